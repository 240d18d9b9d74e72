package keyfile_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/relayhq/relay/internal/keyfile"
)

// TestCreateOnceRace: processes starting together on a shared folder all
// end with the one content written, whole; no temporary file remains.
func TestCreateOnceRace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k.key")
	const n = 16
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = keyfile.CreateOnce(path, []byte(fmt.Sprintf("key-%02d-%s", i, bytes.Repeat([]byte("x"), 4096))))
		}()
	}
	wg.Wait()
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil || !bytes.Equal(got[i], onDisk) {
			t.Fatalf("caller %d got %.10q, %v; the file holds %.10q", i, got[i], errs[i], onDisk)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the folder holds %d files, want only the key", len(entries))
	}
}
