package wsgql

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
)

// probeReader gives msg in pieces and, once at gives have been given,
// measures the heap: what a message being read holds while its sender
// stalls.
type probeReader struct {
	msg    []byte
	off    int
	at     int
	heap   uint64
	probed bool
}

func (p *probeReader) Read(b []byte) (int, error) {
	if p.off >= len(p.msg) {
		return 0, io.EOF
	}
	if !p.probed && p.off >= p.at {
		p.probed = true
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		p.heap = ms.HeapAlloc
	}
	n := copy(b, p.msg[p.off:min(len(p.msg), p.off+32<<10)])
	p.off += n
	return n, nil
}

// TestReadReservedHoldsWhatItReserved: a message past the free part is
// held, while it is read and once read, in what was reserved of it and
// the free part, not in a buffer grown by doubling: a message of 9 MiB
// stalled at 8.5 MiB held 16 MiB of heap in one buffer (its capacity), and
// the message read whole kept that capacity while its operation ran.
func TestReadReservedHoldsWhatItReserved(t *testing.T) {
	const free, size = 1 << 20, 9 << 20
	msg := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	r := &probeReader{msg: msg, at: size - size/18}
	reserves := 0
	got, err := readReserved(r, free, func() bool { reserves++; return true })
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("read %d bytes, not the message's %d", len(got), len(msg))
	}
	reserved := int64(reserves) * budgetChunk
	held := int64(r.heap) - int64(base.HeapAlloc)
	t.Logf("a message of %d bytes, stalled at %d: heap +%d, %d reserved (%d chunks); read whole: capacity %d",
		size, r.at, held, reserved, reserves, cap(got))
	if want := reserved + 2*free + 1<<20; held > want {
		t.Errorf("the message stalled at %d bytes held %d bytes of heap, past what it reserved and its free part (%d)", r.at, held, want)
	}
	if cap(got) != len(got) {
		t.Errorf("the message read whole keeps a capacity of %d for its %d bytes", cap(got), len(got))
	}
	if want := int64(size-free)/budgetChunk + 1; int64(reserves) > want {
		t.Errorf("%d chunks reserved for %d bytes past the free part, want at most %d", reserves, size-free, want)
	}
}

// TestReadReservedStopsWhereTheBudgetEnds: a chunk the budget has no room
// for ends the read with errBudgetFull before it is read; a message within
// the free part reserves nothing.
func TestReadReservedStopsWhereTheBudgetEnds(t *testing.T) {
	msg := bytes.Repeat([]byte("x"), 3<<20)
	r := bytes.NewReader(msg)
	left := 4
	_, err := readReserved(r, 1<<20, func() bool { left--; return left >= 0 })
	if !errors.Is(err, errBudgetFull) {
		t.Fatalf("a message past its budget: %v, want errBudgetFull", err)
	}
	if read := len(msg) - r.Len(); read > 1<<20+4*budgetChunk {
		t.Errorf("read %d bytes of a message whose budget held 4 chunks past 1 MiB", read)
	}
	small, err := readReserved(bytes.NewReader(msg[:900<<10]), 1<<20, func() bool { t.Error("a message within the free part reserved"); return true })
	if err != nil || len(small) != 900<<10 {
		t.Errorf("a message within the free part: %d bytes, %v", len(small), err)
	}
}
