package datalock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileName is the lock file inside a data folder.
const FileName = "relay.lock"

// HeldError is a data folder another process holds.
type HeldError struct {
	Path string
	PID  int // 0 when the holder has not written it yet
}

func (e *HeldError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("the data folder is in use by %s (lock %s): stop it first, or give this one another --data", holder, e.Path)
}

// ExitCode is 2: a refusal, not a failure of the operation.
func (e *HeldError) ExitCode() int { return 2 }

// Lock is a held data folder lock.
type Lock struct{ f *os.File }

// Acquire takes the folder's lock without waiting, and writes this
// process's PID into it; a folder another process holds is a *HeldError.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data folder: %w", err)
	}
	if err := lockFile(f); err != nil {
		defer f.Close()
		if errors.Is(err, errHeld) {
			b, _ := os.ReadFile(path)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, &HeldError{Path: path, PID: pid}
		}
		return nil, fmt.Errorf("lock data folder %s: %w", path, err)
	}
	// The pid names the holder to a second process; a failure to write it
	// (the inner err used to shadow this one and be lost) is reported.
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data folder %s: write pid: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up. The file stays: removing it would let a
// process that opened it just before lock a file nobody else sees.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor releases the lock
	l.f = nil
	return err
}
