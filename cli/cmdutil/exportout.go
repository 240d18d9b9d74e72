package cmdutil

import (
	"bufio"
	"fmt"
	"io"
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
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.partial")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("export: %w", err)
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
			return fmt.Errorf("export: %w", err)
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
