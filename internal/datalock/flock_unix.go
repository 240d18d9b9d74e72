//go:build unix

package datalock

import (
	"errors"
	"os"
	"syscall"
)

var errHeld = errors.New("held")

// lockFile takes flock(LOCK_EX|LOCK_NB) on f.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errHeld
	}
	return err
}
