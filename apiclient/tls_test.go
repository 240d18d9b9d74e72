package apiclient

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestTLSConfigBoundsTheCAFile: TLSConfig reads at most MaxCAFile bytes of
// a CA file; a 64 MiB file, or a device that never ends, is refused naming
// the flag, the file and the bound. It was read whole: 64 MiB allocated for
// the file, and the device read until memory ran out.
func TestTLSConfigBoundsTheCAFile(t *testing.T) {
	big := filepath.Join(t.TempDir(), "ca.pem")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	files := map[string]string{"64 MiB": big}
	if _, err := os.Stat("/dev/zero"); err == nil && !testing.Short() {
		files["endless"] = "/dev/zero"
	}
	for name, path := range files {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := TLSConfig(path)
			runtime.ReadMemStats(&after)
			n := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
			t.Logf("%v; allocated %.1f MiB", err, n)
			if err == nil || !strings.Contains(err.Error(), "--ca-file "+path) || !strings.Contains(err.Error(), "over 1 MiB") {
				t.Errorf("error = %v, want --ca-file %s refused as over 1 MiB", err, path)
			}
			// Reading the file whole allocated 67.6 MiB; -race doubles
			// what reading to the bound allocates (4.3 MiB).
			if n > 16 {
				t.Errorf("refusing the file allocated %.1f MiB, want at most 16", n)
			}
		})
	}
}
