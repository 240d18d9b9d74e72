package agentwire

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/relayhq/relay/internal/binwire"
)

// TestCompleteFrameHeadersAreBounded: a Complete frame as large as a token
// socket may send (4/3 × 10 MiB + 1 MiB ≈ 14.3 MiB) made of empty headers,
// two bytes each, for an attempt nobody waits for, is refused, and
// decoding it allocates no more than twice the frame. Before the bound it
// decoded into one 32-byte domain.Header per two bytes of frame: 238 MiB
// for 14 MiB, before the attempt was looked at.
func TestCompleteFrameHeadersAreBounded(t *testing.T) {
	const frameLen = 14 << 20
	n := (frameLen - 16) / 2
	f := []byte{KindComplete}
	f = binary.AppendUvarint(f, 3)
	f = append(f, "att"...)
	f = binary.AppendVarint(f, 200)
	f = binary.AppendUvarint(f, uint64(n))
	f = append(f, make([]byte, 2*n)...) // n headers, "" and ""
	f = binary.AppendUvarint(f, 0)      // body
	f = binary.AppendUvarint(f, 0)      // error
	f = binary.AppendUvarint(f, 0)      // failure
	f = binary.AppendVarint(f, 0)       // duration
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c, err := DecodeComplete(f)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("frame %d bytes, %d headers: decode allocated %d MiB (%.1f× the frame), %v", len(f), n, alloc>>20, float64(alloc)/float64(len(f)), err)
	if !errors.Is(err, binwire.ErrMalformed) {
		t.Errorf("a frame of %d headers decoded (%d headers), want it refused: at most %d", n, len(c.Headers), MaxAnswerHeaders)
	}
	if alloc > 2*uint64(len(f)) {
		t.Errorf("decoding a %d MiB Complete frame allocated %d MiB: more than twice the frame", len(f)>>20, alloc>>20)
	}
}

// TestCompleteFrameHeadersAtTheBound: the most headers the agent can read
// from a local answer's head (the shortest field line, "a:\n", filling
// MaxAnswerHead) decode; one more header, or names and values past
// MaxAnswerHeaderBytes, do not.
func TestCompleteFrameHeadersAtTheBound(t *testing.T) {
	frame := func(n int, value string) []byte {
		f := []byte{KindComplete}
		f = binary.AppendUvarint(f, 1)
		f = append(f, 'a')
		f = binary.AppendVarint(f, 200)
		f = binary.AppendUvarint(f, uint64(n))
		for range n {
			f = append(f, 1, 'a')
			f = binary.AppendUvarint(f, uint64(len(value)))
			f = append(f, value...)
		}
		return append(f, 0, 0, 0, 0) // body, error, failure, duration
	}
	if MaxAnswerHeaders < MaxAnswerHead/len("a:\n") {
		t.Fatalf("MaxAnswerHeaders %d: a head of %d bytes holds %d fields", MaxAnswerHeaders, MaxAnswerHead, MaxAnswerHead/len("a:\n"))
	}
	if c, err := DecodeComplete(frame(MaxAnswerHeaders, "")); err != nil || len(c.Headers) != MaxAnswerHeaders {
		t.Fatalf("%d headers: %d, %v", MaxAnswerHeaders, len(c.Headers), err)
	}
	if _, err := DecodeComplete(frame(MaxAnswerHeaders+1, "")); !errors.Is(err, binwire.ErrMalformed) {
		t.Fatalf("%d headers: %v, want refused", MaxAnswerHeaders+1, err)
	}
	// 1 024 headers of 1 KiB: names and values of 1 MiB and 1 KiB.
	value := string(make([]byte, 1<<10))
	if _, err := DecodeComplete(frame(MaxAnswerHeaderBytes/(1+len(value))+1, value)); !errors.Is(err, binwire.ErrMalformed) {
		t.Fatalf("names and values past %d bytes: %v, want refused", MaxAnswerHeaderBytes, err)
	}
}
