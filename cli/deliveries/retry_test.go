package deliveries

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/relayhq/relay/cli/cmdutil"
)

// TestRetryBodyFileIsBounded: `relay retry --body @FILE` reads a file only
// up to maxEditBody (16 MiB, the most any relay's --max-body takes): a
// file past it, of one byte more or of 64 MiB, is refused as a usage error
// (exit 2) naming the file and the bound, having allocated at most 8 times
// the bound (the race detector's allocations included), not the file; one
// at the bound is sent.
func TestRetryBodyFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		size int
		ok   bool
	}{
		{"at the bound", maxEditBody, true},
		{"one byte past it", maxEditBody + 1, false},
		{"64 MiB", 64 << 20, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			writeSized(t, path, tt.size)
			var edit map[string]any
			var err error
			allocated := allocatedBy(func() { edit, err = editFlags{body: "@" + path}.edit() })
			t.Logf("a file of %d bytes: allocated %d KiB", tt.size, allocated>>10)
			if tt.ok {
				b64, _ := edit["bodyBase64"].(string)
				if err != nil || base64.StdEncoding.DecodedLen(len(b64)) < tt.size {
					t.Fatalf("a file at the bound: %v, %d bytes of base64; want it sent", err, len(b64))
				}
				return
			}
			var usage *cmdutil.UsageError
			if !errors.As(err, &usage) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "over 16 MiB") {
				t.Errorf("a file of %d bytes: %v; want a usage error naming the file and the bound", tt.size, err)
			}
			if limit := uint64(8 * maxEditBody); allocated > limit {
				t.Errorf("refusing a file of %d bytes allocated %d KiB, want at most %d KiB", tt.size, allocated>>10, limit>>10)
			}
		})
	}
}

// writeSized makes a file of size zero bytes without writing them.
func writeSized(t *testing.T, path string, size int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// allocatedBy is the bytes the heap allocated while f ran.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
