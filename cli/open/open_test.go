package open

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestOpenBrowserSaysWhenTheOpenerFails runs openBrowser against a real
// opener program on PATH: one that fails as xdg-open does on a machine
// with no browser, and one that succeeds.
func TestOpenBrowserSaysWhenTheOpenerFails(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the opener stand-in is a shell script named xdg-open")
	}
	const link = "http://localhost:8080/e/abc#token=rly_secret"
	tests := []struct {
		name, script, want string
	}{
		{"no browser", `echo "xdg-open: no method available for opening '$1'" >&2; exit 3`,
			"xdg-open could not open a browser (exit 3: xdg-open: no method available for opening 'the link'): open the printed link yourself"},
		{"opened", `exit 0`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "xdg-open"), []byte("#!/bin/sh\n"+tt.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", dir)
			err := openBrowser(link)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("openBrowser = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("openBrowser = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "rly_secret") {
				t.Fatalf("the error repeats the token: %v", err)
			}
		})
	}
}
