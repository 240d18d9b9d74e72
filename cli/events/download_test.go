package events

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/diskreserve"
)

// folderSpace is a file system of the given room in which what the
// folder's files take is used, noting the most they took.
type folderSpace struct {
	dir         string
	free, total uint64
	most        int64
}

func (s *folderSpace) Space() (diskreserve.Space, error) {
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

// exportServer answers /log/export with blocks of block until it has
// sent total bytes or the client goes, and counts what it wrote.
func exportServer(t *testing.T, block []byte, total int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for sent.Load() < int64(total) {
			n, err := w.Write(block)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &sent
}

// TestDownloadedExportIsBounded: relay events verify --server keeps what a
// relay sends within an export's bounds as it arrives. One endless line is
// refused past evidence.MaxExportLine (27.5 MiB), and lines without end
// stop before the folder the download is kept in has less than the reserve
// free; either way no file is left. Before, the whole answer was saved
// first (300 MiB of one line, 200 MiB of lines: as much as the relay
// sent, so a relay that never stopped filled the disk), and only then was
// the line refused.
func TestDownloadedExportIsBounded(t *testing.T) {
	const mib = 1 << 20
	t.Run("one endless line", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("TMPDIR", dir)
		space := &folderSpace{dir: dir, free: 1 << 50, total: 1 << 50}
		restore := downloadSpace
		downloadSpace = func(string) diskreserve.Source { return space }
		t.Cleanup(func() { downloadSpace = restore })
		srv, sent := exportServer(t, bytes.Repeat([]byte("x"), mib), 300*mib)

		var stderr bytes.Buffer
		name, err := downloadExport(t.Context(), srv.URL, "t", &stderr)
		srv.CloseClientConnections()
		t.Logf("one line of up to 300 MiB: the relay wrote %.1f MiB, the file took at most %.1f MiB; %v",
			float64(sent.Load())/mib, float64(space.most)/mib, err)
		if !evidence.IsLimit(err) || !strings.Contains(err.Error(), "line 1: an export line over the limit") {
			t.Fatalf("downloaded %q, error %v; want the line refused over its limit", name, err)
		}
		if space.most > evidence.MaxExportLine || sent.Load() > 100*mib {
			t.Errorf("the file took %d bytes, the relay wrote %d: more than the line's bound %d allows", space.most, sent.Load(), evidence.MaxExportLine)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%d files left in the temporary folder", len(left))
		}
	})
	t.Run("lines without end", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("TMPDIR", dir)
		reserve := downloadReserve.Of(100 << 30)
		space := &folderSpace{dir: dir, free: reserve + 48*mib, total: 100 << 30}
		restore := downloadSpace
		downloadSpace = func(string) diskreserve.Source { return space }
		t.Cleanup(func() { downloadSpace = restore })
		srv, sent := exportServer(t, bytes.Repeat([]byte("{}\n"), mib/3), 200*mib)

		var stderr bytes.Buffer
		name, err := downloadExport(t.Context(), srv.URL, "t", &stderr)
		srv.CloseClientConnections()
		t.Logf("200 MiB of short lines, 48 MiB above the reserve: the relay wrote %.1f MiB, the file took at most %.1f MiB; %v",
			float64(sent.Load())/mib, float64(space.most)/mib, err)
		if err == nil || !strings.Contains(err.Error(), "free") {
			t.Fatalf("downloaded %q (%s), error %v; want the download stopped before the reserve", name, stderr.String(), err)
		}
		if space.most > 48*mib || sent.Load() > 100*mib {
			t.Errorf("the file took %d bytes, the relay wrote %d: past the room above the reserve (48 MiB)", space.most, sent.Load())
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%d files left in the temporary folder", len(left))
		}
	})
}
