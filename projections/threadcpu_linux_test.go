package projections

import (
	"syscall"
	"testing"
	"time"
)

// threadCPU is the CPU time of the calling thread (the caller locks its
// goroutine to it).
func threadCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
