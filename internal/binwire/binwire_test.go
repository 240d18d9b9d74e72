package binwire

import (
	"encoding/binary"
	"errors"
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

// TestHeadersLimit: Headers reads a list at its bounds, and refuses one
// header more, a byte of names and values more, or a header without a
// name, as a malformed message.
func TestHeadersLimit(t *testing.T) {
	list := func(names ...string) []byte {
		var w Writer
		h := make([]domain.Header, len(names))
		for i, n := range names {
			h[i] = domain.Header{Name: n, Value: "vv"}
		}
		w.Headers(h)
		return w.B
	}
	for _, tt := range []struct {
		name          string
		msg           []byte
		max, maxBytes int
		ok            bool
	}{
		{"none", list(), 0, 0, true},
		{"at the count", list("a", "b", "c"), 3, 100, true},
		{"past the count", list("a", "b", "c", "d"), 3, 100, false},
		{"none allowed", list("a"), 0, 100, false},
		{"at the bytes", list("a", "bb"), 3, 7, true},
		{"past the bytes", list("a", "bb"), 3, 6, false},
		{"an empty name", list("a", "", "c"), 3, 100, false},
		{"a count past the message", []byte{0x7f, 1, 'a', 0}, 1000, 100, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.msg)
			h := r.Headers(tt.max, tt.maxBytes)
			err := r.End("headers")
			if tt.ok && (err != nil || HeadersLen(h) != len(tt.msg)) {
				t.Fatalf("Headers(%d, %d) = %q, %v; want the list", tt.max, tt.maxBytes, h, err)
			}
			if !tt.ok && (!errors.Is(err, ErrMalformed) || h != nil) {
				t.Fatalf("Headers(%d, %d) = %q, %v; want ErrMalformed", tt.max, tt.maxBytes, h, err)
			}
		})
	}
}
