//go:build !linux

package projections

import (
	"testing"
	"time"
)

// threadCPU is Linux's alone (RUSAGE_THREAD): elsewhere the benchmarks
// that read it are skipped.
func threadCPU(tb testing.TB) time.Duration {
	tb.Skip("the CPU time of one thread is read on Linux only")
	return 0
}
