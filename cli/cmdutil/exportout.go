package cmdutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
	bw := bufio.NewWriterSize(f, 64<<10)
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
