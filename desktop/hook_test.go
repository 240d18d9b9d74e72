package desktop

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHookNeedsItsSecret: the test hook exists only with its variable set,
// and answers only requests carrying the secret from its 0600 file.
func TestHookNeedsItsSecret(t *testing.T) {
	t.Setenv(HookEnv, "")
	off := New(Options{})
	if err := off.StartHook(); err != nil || off.hook != nil {
		t.Fatalf("hook without %s: %v, %v", HookEnv, off.hook, err)
	}

	file := filepath.Join(t.TempDir(), "hook")
	t.Setenv(HookEnv, file)
	a := New(Options{})
	if err := a.StartHook(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.hook.close)
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("hook file: %v, %v; want mode 0600", st, err)
	}
	b, _ := os.ReadFile(file)
	addr, secret, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !strings.HasPrefix(addr, "127.0.0.1:") || len(secret) < 32 {
		t.Fatalf("hook file %q: want a loopback address and a secret", b)
	}
	for _, tt := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Bearer " + secret[:len(secret)-1], http.StatusUnauthorized},
		{"Bearer " + secret, http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/state", nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Authorization %q: %d, want %d", tt.auth, resp.StatusCode, tt.want)
		}
	}
}

// TestHookAssetsLoadTheErrorScriptFirst: with the hook on, the window's
// page loads the hook's error collector before any script of its own;
// without it, the files are Assets' own and the collector is not there.
func TestHookAssetsLoadTheErrorScriptFirst(t *testing.T) {
	t.Setenv(HookEnv, "")
	off := New(Options{})
	if err := off.StartHook(); err != nil {
		t.Fatal(err)
	}
	page, err := fs.ReadFile(off.Assets(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), pageErrorsPath) {
		t.Errorf("without the hook index.html loads %s", pageErrorsPath)
	}
	if _, err := fs.Stat(off.Assets(), pageErrorsPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("without the hook %s: %v, want it missing", pageErrorsPath, err)
	}

	t.Setenv(HookEnv, filepath.Join(t.TempDir(), "hook"))
	on := New(Options{})
	if err := on.StartHook(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(on.hook.close)
	page, err = fs.ReadFile(on.Assets(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Index(string(page), "<script")
	if first < 0 || !strings.HasPrefix(string(page[first:]), `<script src="/`+pageErrorsPath+`"></script>`) {
		t.Errorf("with the hook the page's first script is not the error collector:\n%s", page)
	}
	if js, err := fs.ReadFile(on.Assets(), pageErrorsPath); err != nil || string(js) != pageErrorsScript {
		t.Errorf("%s: %v", pageErrorsPath, err)
	}
	// The rest of the files are the window's own.
	if _, err := fs.Stat(on.Assets(), "console/style.css"); err != nil {
		t.Errorf("console/style.css with the hook: %v", err)
	}
}
