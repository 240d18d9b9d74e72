package cmdutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dustin/go-humanize"

	"github.com/relayhq/relay/internal/diskreserve"
)

// ExportOut is where an export writes: stdout (path "" or "-"), or a
// temporary file next to path that commit renames to path, so the file
// is written whole or not at all; abort removes it unless committed.
func ExportOut(path string, stdout io.Writer) (w io.Writer, commit func() error, abort func(), err error) {
	if path == "" || path == "-" {
		bw := bufio.NewWriterSize(stdout, 64<<10)
		return bw, bw.Flush, func() {}, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, nil, nil, Usage(fmt.Errorf("export: -o %s is a folder: name the file to write in it", path))
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.partial")
	if err != nil {
		// The temporary file's name is none of the user's: the error
		// names path and its folder.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil, Usage(fmt.Errorf("export: -o %s: there is no folder %s", path, filepath.Dir(path)))
		}
		return nil, nil, nil, fmt.Errorf("export: write %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(&reserveWriter{w: f, path: path, dir: filepath.Dir(path), space: exportSpace(filepath.Dir(path))}, 64<<10)
	done := false
	commit = func() error {
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("export: write %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("export: write %s: %w", path, err)
		}
		if err := os.Rename(f.Name(), path); err != nil {
			var le *os.LinkError
			if errors.As(err, &le) {
				err = le.Err
			}
			return fmt.Errorf("export: write %s: %w", path, err)
		}
		done = true
		return nil
	}
	abort = func() {
		if !done {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}
	return bw, commit, abort, nil
}

// exportReserveEvery is how often (in bytes written) an export reads the
// free space left: it passes the reserve by at most this much.
const exportReserveEvery = 16 << 20

// reserveWriter stops an export before the folder it is written in has
// less than relay serve's default reserve free (diskreserve.DefaultLimit):
// how much a relay sends is its own to choose, up to --limit deliveries
// of up to 64 MiB each, and a disk filled to the last byte fails more
// than the export.
type reserveWriter struct {
	w         io.Writer
	path, dir string
	space     diskreserve.Source
	written   int64
	checked   int64 // written when the free space was last read
	looked    bool
}

func (r *reserveWriter) Write(p []byte) (int, error) {
	if !r.looked || r.written+int64(len(p))-r.checked > exportReserveEvery {
		r.looked, r.checked = true, r.written
		// A file system whose free space cannot be read is not checked.
		if sp, err := r.space.Space(); err == nil {
			if reserve := diskreserve.DefaultLimit.Of(sp.Total); sp.Free < reserve+exportReserveEvery+uint64(len(p)) {
				return 0, fmt.Errorf("-o %s: %s would have less than %s free (relay serve's default reserve), after %s written; write it where there is more room",
					r.path, r.dir, humanize.IBytes(reserve), humanize.IBytes(uint64(r.written)))
			}
		}
	}
	n, err := r.w.Write(p)
	r.written += int64(n)
	return n, err
}

// exportSpace tells how much room the folder an export is written in has
// (a test's own in tests).
var exportSpace = statfsSpace

func statfsSpace(dir string) diskreserve.Source { return diskreserve.Statfs{Dir: dir} }
