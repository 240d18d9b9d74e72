package clientconfig

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestSaveAndLoad(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("HOME", dir)
	c, path, err := Load()
	if err != nil || c != (Config{}) {
		t.Fatalf("Load with no file = %+v, %v; want an empty Config", c, err)
	}
	if want := filepath.Join(dir, "relay", "config.json"); path != want {
		t.Errorf("path %q, want %q", path, want)
	}
	if err := Save(path, Config{Server: "http://x", Token: "secret"}); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, %v; want %v", p, st.Mode().Perm(), err, mode)
		}
	}
	if c, _, err := Load(); err != nil || c.Server != "http://x" || c.Token != "secret" {
		t.Errorf("Load = %+v, %v", c, err)
	}
	os.WriteFile(path, []byte("{"), 0o600)
	if _, _, err := Load(); err == nil {
		t.Error("Load of a damaged file: no error")
	}
}

// TestSameServer: a stored login serves the relay it was made for, under
// any of this machine's loopback names, and no other.
func TestSameServer(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"http://localhost:8080", "http://localhost:8080/", true},
		{"HTTP://Localhost:8080", "http://localhost:8080", true},
		{"http://localhost:8080", "http://127.0.0.1:8080", true},
		{"http://localhost:8080", "http://[::1]:8080", true},
		{"http://127.0.0.1:8080/", "http://LOCALHOST:8080", true},
		{"http://localhost:8080", "http://127.0.0.1:8081", false},
		{"http://localhost:8080", "https://127.0.0.1:8080", false},
		{"http://localhost:8080", "http://relay.localhost:8080", false},
		{"http://localhost:8080/a", "http://127.0.0.1:8080", false},
		{"https://relay.example", "https://relay.example.org", false},
		{"https://relay.example", "http://relay.example", false},
	} {
		if got := SameServer(tt.a, tt.b); got != tt.want {
			t.Errorf("SameServer(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

// TestLoadIsBounded: a config file over maxFile (a server and a token
// take a few hundred bytes) is refused, naming the file, the bound and
// what to do, having read no more than the bound. It was read whole and
// decoded: every client command read a 64 MiB file there.
func TestLoadIsBounded(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("HOME", dir)
	path := filepath.Join(dir, "relay", "config.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil { // sparse: no room on disk
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err = Load()
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "over 64 KiB") || !strings.Contains(err.Error(), "relay login") {
		t.Errorf("Load of a 64 MiB file = %v, want it refused as over 64 KiB, naming the file and relay login", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("refusing a 64 MiB file allocated %.1f MiB, want at most 1", float64(n)/(1<<20))
	} else {
		t.Logf("refused having allocated %d KiB", n>>10)
	}
}
