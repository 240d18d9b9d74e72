package agentcli

import (
	"runtime"
	"strings"
	"testing"
)

// TestDotSegmentCheckIsLinear: the check of a delivery's path under a
// prefix copies the path a few times (lowercased, decoded, split), so
// what it allocates grows with the path's length, never faster: a path of
// 1 MiB, the most the relay's header limits let through, of the shapes
// that make every step copy, costs at most 24 bytes a byte of path (a backslash is a segment of its own:
// its string header, 16 bytes, and the copies).
func TestDotSegmentCheckIsLinear(t *testing.T) {
	for _, tt := range []struct{ name, unit string }{
		{"segments", "/A"},
		{"encoded separators", "%2F"},
		{"backslashes", `\`},
		{"parameters", "/a;b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var perByte [2]float64
			for i, size := range []int{64 << 10, 1 << 20} {
				path := strings.Repeat(tt.unit, size/len(tt.unit))
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				if hasDotSegment(path) {
					t.Fatalf("a path of %q has no dot-segment", tt.unit)
				}
				runtime.ReadMemStats(&after)
				perByte[i] = float64(after.TotalAlloc-before.TotalAlloc) / float64(len(path))
				t.Logf("%d KiB of %q: %.1f bytes allocated a byte", size>>10, tt.unit, perByte[i])
				if perByte[i] > 24 {
					t.Fatalf("a path of %d KiB allocated %.1f bytes a byte, want at most 24", size>>10, perByte[i])
				}
			}
			if perByte[1] > 1.5*perByte[0]+1 {
				t.Errorf("allocated %.1f bytes a byte of a 64 KiB path, %.1f of a 1 MiB one: want no growth with the length", perByte[0], perByte[1])
			}
		})
	}
}
