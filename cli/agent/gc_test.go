package agent

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestSetGCTarget: the agent raises the GC target and sets a soft memory
// limit only where GOGC and GOMEMLIMIT leave them to it.
func TestSetGCTarget(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
	for _, tc := range []struct {
		name        string
		env         map[string]string
		wantPercent int
		wantLimit   int64
	}{
		{"neither set", nil, gcPercent, memoryLimit},
		{"GOGC set", map[string]string{"GOGC": "100"}, 100, memoryLimit},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, gcPercent, math.MaxInt64},
		{"both set", map[string]string{"GOGC": "100", "GOMEMLIMIT": "1GiB"}, 100, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			SetGCTarget(func(k string) string { return tc.env[k] })
			if got := debug.SetGCPercent(100); got != tc.wantPercent {
				t.Errorf("GC percent %d, want %d", got, tc.wantPercent)
			}
			if got := debug.SetMemoryLimit(math.MaxInt64); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
			}
		})
	}
}
