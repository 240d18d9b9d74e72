package desktop

import (
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
