//go:build linux || darwin || freebsd

package diskreserve

import (
	"fmt"
	"syscall"
)

// Space reads the file system holding s.Dir: the bytes an unprivileged
// process may still write, and its size.
func (s Statfs) Space() (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.Dir, &st); err != nil {
		return Space{}, fmt.Errorf("statfs %s: %w", s.Dir, err)
	}
	bsize := uint64(st.Bsize) // int64 on Linux, uint32 on macOS
	return Space{Free: uint64(st.Bavail) * bsize, Total: uint64(st.Blocks) * bsize}, nil
}
