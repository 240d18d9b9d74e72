package endpoints

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/relayhq/relay/cli/cmdutil"
)

// TestFilesReadAreBounded: a secret file and an answer's body file are
// read only up to their bounds (4 KiB, 1 MiB): a file of 64 MiB is
// refused as a usage error naming the file and the bound, having allocated
// at most 8 times the bound (the race detector's allocations included),
// not the file; one at the bound is taken.
func TestFilesReadAreBounded(t *testing.T) {
	const huge = 64 << 20 // sparse: costs no disk
	for _, tt := range []struct {
		name  string
		bound int
		read  func(path string) (int, error)
		says  string
	}{
		{"secret", 4 << 10, func(path string) (int, error) {
			s, err := ReadSecretFile("--zoom-secret-file", path)
			return len(s), err
		}, "over 4096 bytes"},
		{"answer body", 1 << 20, func(path string) (int, error) {
			b, err := readAnswerBody("@" + path)
			return len(b), err
		}, "over 1 MiB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			over, at := filepath.Join(dir, "over"), filepath.Join(dir, "at")
			writeSized(t, over, huge)
			writeSized(t, at, tt.bound)

			allocated := allocatedBy(func() {
				n, err := tt.read(over)
				var usage *cmdutil.UsageError
				if !errors.As(err, &usage) || !strings.Contains(err.Error(), over) || !strings.Contains(err.Error(), tt.says) {
					t.Errorf("a %d MiB file: %d bytes, %v; want a usage error naming the file and %q", huge>>20, n, err, tt.says)
				}
			})
			t.Logf("refusing a %d MiB file allocated %d KiB", huge>>20, allocated>>10)
			if limit := uint64(8*tt.bound + 64<<10); allocated > limit {
				t.Errorf("refusing a %d MiB file allocated %d KiB, want at most %d KiB", huge>>20, allocated>>10, limit>>10)
			}
			if n, err := tt.read(at); err != nil || n != tt.bound {
				t.Errorf("a file at the bound: %d bytes, %v; want all %d", n, err, tt.bound)
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
