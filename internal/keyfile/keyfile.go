package keyfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CreateOnce writes content to path with mode 0600 unless path exists,
// and returns what path holds then: content when this call created it,
// else the existing file's content (which the caller must use instead).
// The file is written under a temporary name and linked into place, so a
// reader never sees it half written and no writer replaces another's.
func CreateOnce(path string, content []byte) ([]byte, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.partial") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // the link, if made, keeps the content
	_, werr := f.Write(content)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	err = os.Link(tmp, path)
	switch {
	case err == nil:
		return content, nil
	case errors.Is(err, fs.ErrExist):
		b, rerr := os.ReadFile(path) // another process created it first
		if rerr != nil {
			return nil, fmt.Errorf("read %s: %w", path, rerr)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
}
