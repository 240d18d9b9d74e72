package cmdutil

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

// TestSetGC: the GC target and the soft memory limit are set only where
// GOGC and GOMEMLIMIT leave them to the relay, and a limit of 0 (off)
// sets none. Allocations are no longer sampled.
func TestSetGC(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	rate := runtime.MemProfileRate
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
		runtime.MemProfileRate = rate
	})
	for _, tc := range []struct {
		name        string
		env         map[string]string
		limit       int64
		wantPercent int
		wantLimit   int64
	}{
		{"neither set", nil, 512 << 20, GCPercent, 512 << 20},
		{"GOGC set", map[string]string{"GOGC": "100"}, 512 << 20, 100, 512 << 20},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 512 << 20, GCPercent, math.MaxInt64},
		{"both set", map[string]string{"GOGC": "100", "GOMEMLIMIT": "1GiB"}, 512 << 20, 100, math.MaxInt64},
		{"limit off", nil, 0, GCPercent, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			runtime.MemProfileRate = 512 << 10 // the runtime's default
			SetGC(func(k string) string { return tc.env[k] }, tc.limit)
			if got := debug.SetGCPercent(100); got != tc.wantPercent {
				t.Errorf("GC percent %d, want %d", got, tc.wantPercent)
			}
			if got := debug.SetMemoryLimit(math.MaxInt64); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
			}
			if runtime.MemProfileRate != 0 {
				t.Errorf("allocations sampled every %d bytes, want none", runtime.MemProfileRate)
			}
		})
	}
}
