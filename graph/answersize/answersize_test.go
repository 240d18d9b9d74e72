package answersize

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/99designs/gqlgen/graphql"
)

// FuzzEncodedLen: EncodedLen is exactly what gqlgen writes for a string.
func FuzzEncodedLen(f *testing.F) {
	for _, s := range []string{"", "plain", "<>&", "\x00\x01\x1f", "\"\\\n\r\t", "caf\xe9", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		graphql.MarshalString(s).MarshalGQL(&b)
		if got, want := EncodedLen(s), int64(b.Len()); got != want {
			t.Errorf("EncodedLen(%q) = %d, gqlgen writes %d bytes", s, got, want)
		}
	})
}

// TestMeter: an answer is refused past its own limit, answers together past
// the budget (HeapPerByte a byte counted), and Release gives every byte
// back.
func TestMeter(t *testing.T) {
	b := New(100, 400*HeapPerByte)
	m1, m2 := b.Meter(), b.Meter()
	m1.SetCaller("account:a")
	m2.SetCaller("account:b")
	ctx := With(context.Background(), m1)
	if err := Charge(ctx, 90); err != nil {
		t.Fatal(err)
	}
	if err := Charge(ctx, 20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("past the answer's limit: %v, want ErrTooLarge", err)
	}
	if err := m2.Charge(60); err != nil {
		t.Errorf("within both: %v", err)
	}
	if b.InUse() != 150*HeapPerByte {
		t.Errorf("in use %d, want %d", b.InUse(), 150*HeapPerByte)
	}
	m1.Release()
	m2.Release()
	if b.InUse() != 0 || b.Held("account:a") != 0 || b.Held("account:b") != 0 {
		t.Errorf("after release, %d in use", b.InUse())
	}
	if err := Charge(context.Background(), 1<<40); err != nil {
		t.Errorf("no meter counts nothing: %v", err)
	}
}

// TestBudgetShares: one caller holds at most a quarter of the budget (at
// least one answer at its limit), its client network half, and the last
// quarter is left to callers that hold at most a sixteenth; a refusal
// names the share and is ErrBusy; what a meter charged before its caller
// was named moves to that caller.
func TestBudgetShares(t *testing.T) {
	// 1 600 bytes of heap: a caller 400, a network 800, 1 200 before the
	// reserve, 100 for a caller to take from it; one answer 100 bytes
	// counted, 300 of heap.
	const perAnswer, total = 100, 1600
	type charge struct {
		caller string
		n      int64
		share  string // "": admitted
	}
	for _, tc := range []struct {
		name    string
		charges []charge
	}{
		{"a caller's share", []charge{
			{"account:a", 100, ""}, {"account:a", 40, ShareCaller}, {"account:b", 100, ""},
		}},
		{"a network's share", []charge{
			{"10.0.0.1", 100, ""}, {"10.0.0.2", 100, ""}, {"10.0.0.3", 100, ShareNetwork}, {"10.0.1.1", 100, ""},
		}},
		{"the reserve", []charge{
			{"account:a", 100, ""}, {"account:b", 100, ""}, {"account:c", 100, ""}, {"account:d", 100, ""},
			{"account:e", 34, ShareReserve}, {"account:e", 30, ""}, {"account:f", 30, ""}, {"account:e", 4, ShareReserve},
		}},
		{"the whole", []charge{
			{"account:a", 100, ""}, {"account:b", 100, ""}, {"account:c", 100, ""}, {"account:d", 100, ""},
			{"account:e", 33, ""}, {"account:f", 33, ""}, {"account:g", 33, ""}, {"account:h", 33, ""},
			{"account:i", 2, ShareRelay},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(perAnswer, total)
			var meters []*Meter
			for i, c := range tc.charges {
				m := b.Meter()
				m.SetCaller(c.caller)
				meters = append(meters, m)
				err := m.Charge(c.n)
				var busy *BusyError
				switch {
				case c.share == "" && err != nil:
					t.Errorf("charge %d (%s, %d): %v, want it admitted", i, c.caller, c.n, err)
				case c.share != "" && (!errors.As(err, &busy) || busy.Share != c.share || !errors.Is(err, ErrBusy)):
					t.Errorf("charge %d (%s, %d): %v, want refused by the %s share", i, c.caller, c.n, err, c.share)
				}
			}
			for _, m := range meters {
				m.Release()
			}
			if b.InUse() != 0 || len(b.byCaller) != 0 || len(b.byNetwork) != 0 {
				t.Errorf("after release: %d in use, callers %v, networks %v", b.InUse(), b.byCaller, b.byNetwork)
			}
		})
	}

	b := New(perAnswer, total)
	m := b.Meter()
	if err := m.Charge(10); err != nil {
		t.Fatal(err)
	}
	m.SetCaller("account:z")
	if b.Held("") != 0 || b.Held("account:z") != 10*HeapPerByte {
		t.Errorf("after SetCaller: %d held by no caller, %d by the caller, want 0 and %d", b.Held(""), b.Held("account:z"), 10*HeapPerByte)
	}
}

// BenchmarkCharge: what counting one field of an answer costs, one meter
// per goroutine, as the API's concurrent answers charge.
func BenchmarkCharge(b *testing.B) {
	budget := New(32<<20, 256<<20)
	b.RunParallel(func(pb *testing.PB) {
		m := budget.Meter()
		m.SetCaller("account:a")
		for i := 0; pb.Next(); i++ {
			if err := m.Charge(64); err != nil {
				b.Fatal(err)
			}
			if i%1000 == 999 {
				m.Release()
			}
		}
	})
}

// TestClosedMeterCountsNothing: once an answer's operation has ended, a
// charge made for it (a resolver still running) is refused and holds
// nothing of the budget; Release, between messages, keeps the meter open.
func TestClosedMeterCountsNothing(t *testing.T) {
	b := New(1<<20, 64<<20)
	m := b.Meter()
	m.SetCaller("account:a")
	if err := m.Charge(100); err != nil {
		t.Fatal(err)
	}
	m.Release()
	if err := m.Charge(100); err != nil {
		t.Fatalf("a charge after a message's release: %v", err)
	}
	m.Close()
	if err := m.Charge(100); !errors.Is(err, ErrEnded) {
		t.Errorf("a charge after the operation ended: %v, want ErrEnded", err)
	}
	if got := b.InUse(); got != 0 {
		t.Errorf("the budget holds %d bytes once the answer's operation ended, want 0", got)
	}
}

// TestReservedAnswersFinish: answers admitted at once for a part of what
// they count each finish when they reserve the rest with it; charged a
// part at a time, each took a part and every one was refused half built.
func TestReservedAnswersFinish(t *testing.T) {
	const (
		// As in graph.TestAnswersHeapStaysWithinTheBudget: pages of 8
		// stored bodies of 256 KiB with body and bodyBase64, 64 MiB.
		part  = 2 << 20 // counted when admitted (a page's stored bodies)
		rest  = 4 << 20 // counted as its fields resolve
		count = 8
	)
	for _, reserve := range []bool{false, true} {
		b := New(32<<20, 64<<20)
		meters := make([]*Meter, count)
		admitted := 0
		for i := range meters {
			m := b.Meter()
			m.SetCaller("account:a")
			meters[i] = m
			err := m.Charge(part)
			if err == nil && reserve {
				err = m.Reserve(rest)
			}
			if err == nil {
				admitted++
			} else if !errors.Is(err, ErrBusy) {
				t.Fatalf("admitting: %v", err)
			}
		}
		finished := 0
		for _, m := range meters[:admitted] {
			if m.Charge(rest) == nil {
				finished++
			}
		}
		t.Logf("reserve %v: %d of %d admitted, %d finished", reserve, admitted, count, finished)
		if reserve && (finished == 0 || finished != admitted) {
			t.Errorf("reserving: %d admitted, %d finished; want every admitted answer finished", admitted, finished)
		}
		if !reserve && finished != 0 {
			t.Errorf("charged a part at a time, %d of %d finished; want none: each took a part of the budget the others needed", finished, admitted)
		}
		for _, m := range meters {
			m.Close()
		}
		if b.InUse() != 0 {
			t.Errorf("%d in use after every meter closed", b.InUse())
		}
	}
	b := New(100, 1000)
	m := b.Meter()
	if err := m.Reserve(101); !errors.Is(err, ErrTooLarge) || b.InUse() != 0 {
		t.Errorf("reserving past the answer's limit: %v, %d in use; want ErrTooLarge and nothing taken", err, b.InUse())
	}
}
