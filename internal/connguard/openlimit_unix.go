//go:build unix

package connguard

import (
	"fmt"
	"syscall"
)

// DescriptorLimit is the process's soft RLIMIT_NOFILE, which the Go runtime
// has already raised to the hard limit at start.
func DescriptorLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	return uint64(lim.Cur), nil
}
