package agentcli

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// sparseFile makes a file of size bytes that takes no room on disk.
func sparseFile(t *testing.T, size int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// allocated is what fn allocated on the heap, in bytes.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestCAFileIsBounded: a --ca-file over MaxCAFile (a 64 MiB file, or a
// device that never ends) is refused, naming the flag, the file and the
// bound, having read no more than the bound. It was read whole.
func TestCAFileIsBounded(t *testing.T) {
	args := []string{"--server", "http://localhost:8080", "--token", "tok", "--endpoint", "ep-1", "--target", "127.0.0.1:3000", "--ca-file"}
	files := map[string]string{"64 MiB": sparseFile(t, 64<<20)}
	if _, err := os.Stat("/dev/zero"); err == nil && !testing.Short() {
		files["endless"] = "/dev/zero"
	}
	for name, path := range files {
		t.Run(name, func(t *testing.T) {
			var err error
			n := allocated(func() {
				_, err = parseArgs(append(args, path), io.Discard, func(string) (string, bool) { return "", false })
			})
			if err == nil || !strings.Contains(err.Error(), "--ca-file "+path) || !strings.Contains(err.Error(), "over 1 MiB") {
				t.Errorf("error = %v, want --ca-file %s refused as over 1 MiB", err, path)
			}
			// Reading the file whole allocated 67.6 MiB; -race doubles
			// what reading to the bound allocates (4.3 MiB).
			if n > 16<<20 {
				t.Errorf("refusing the file allocated %.1f MiB, want at most 16", float64(n)/(1<<20))
			}
			t.Logf("refused having allocated %.1f MiB", float64(n)/(1<<20))
		})
	}
	// At the bound, the file is read (and refused for what it holds).
	_, err := TLSConfig(sparseFile(t, MaxCAFile))
	if err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a file of MaxCAFile bytes: error = %v, want no PEM certificate", err)
	}
}
