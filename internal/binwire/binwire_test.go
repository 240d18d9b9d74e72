package binwire

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/relayhq/relay/domain"
)

// TestLensAreWhatWriterAppends: UvarintLen, StrLen and HeadersLen give the
// length Writer appends, on both sides of every varint step.
func TestLensAreWhatWriterAppends(t *testing.T) {
	for shift := range 64 {
		for _, x := range []uint64{1<<shift - 1, 1 << shift, 1<<shift + 1, math.MaxUint64} {
			if got, want := UvarintLen(x), len(binary.AppendUvarint(nil, x)); got != want {
				t.Errorf("UvarintLen(%d) = %d, want %d", x, got, want)
			}
		}
	}
	for _, n := range []int{0, 1, 127, 128, 300, 16384} {
		var w Writer
		w.Str(string(make([]byte, n)))
		if StrLen(n) != len(w.B) {
			t.Errorf("StrLen(%d) = %d, want %d", n, StrLen(n), len(w.B))
		}
		h := make([]domain.Header, n)
		for i := range h {
			h[i] = domain.Header{Name: "X-A", Value: string(make([]byte, i%300))}
		}
		w = Writer{}
		w.Headers(h)
		if HeadersLen(h) != len(w.B) {
			t.Errorf("HeadersLen of %d headers = %d, want %d", n, HeadersLen(h), len(w.B))
		}
	}
}
