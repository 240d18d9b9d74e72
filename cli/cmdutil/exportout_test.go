package cmdutil

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayhq/relay/internal/diskreserve"
)

// dirSpace is a file system of the given room, in which what the folder's
// files take is used, noting the most they took.
type dirSpace struct {
	dir         string
	free, total uint64
	most        int64
}

func (s *dirSpace) Space() (diskreserve.Space, error) {
	var used int64
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			used += fi.Size()
		}
	}
	s.most = max(s.most, used)
	return diskreserve.Space{Free: s.free - uint64(used), Total: s.total}, nil
}

// TestExportOutKeepsTheReserveFree: an export written to -o FILE (relay
// deliveries export, whose deliveries a relay sends; relay events export)
// stops before the file's folder has less than the reserve free (1 GiB,
// relay serve's default), naming the folder and the reserve, and leaves
// no file. Before, it was written whole: here 128 MiB to a folder with
// 32 MiB above the reserve (10 000 deliveries of a relay could fill a
// disk).
func TestExportOutKeepsTheReserveFree(t *testing.T) {
	dir := t.TempDir()
	space := &dirSpace{dir: dir, free: 1<<30 + 32<<20, total: 64 << 30}
	exportSpace = func(string) diskreserve.Source { return space }
	t.Cleanup(func() { exportSpace = statfsSpace })
	path := filepath.Join(dir, "out.har")
	w, commit, abort, err := ExportOut(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	block := bytes.Repeat([]byte("x"), 1<<20)
	var werr error
	written := 0
	for written < 128<<20 {
		if _, werr = w.Write(block); werr != nil {
			break
		}
		written += len(block)
	}
	if werr == nil {
		werr = commit()
	}
	abort()
	t.Logf("wrote %d MiB, the folder held at most %.1f MiB: %v", written>>20, float64(space.most)/(1<<20), werr)
	if werr == nil || !strings.Contains(werr.Error(), dir) || !strings.Contains(werr.Error(), "1.0 GiB") {
		t.Errorf("export of 128 MiB with 32 MiB above the reserve: %v, want it stopped naming %s and the reserve", werr, dir)
	}
	if space.most > 32<<20 {
		t.Errorf("the folder held %.1f MiB, want at most the 32 MiB above the reserve", float64(space.most)/(1<<20))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %v in the folder", entries)
	}
}
