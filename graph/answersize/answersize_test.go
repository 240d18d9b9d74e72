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
	b := New(100, 150*HeapPerByte)
	m1, m2 := b.Meter(), b.Meter()
	ctx := With(context.Background(), m1)
	if err := Charge(ctx, 90); err != nil {
		t.Fatal(err)
	}
	if err := Charge(ctx, 20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("past the answer's limit: %v, want ErrTooLarge", err)
	}
	if err := m2.Charge(70); !errors.Is(err, ErrBusy) {
		t.Errorf("past the budget: %v, want ErrBusy", err)
	}
	if err := m2.Charge(60); err != nil {
		t.Errorf("within both: %v", err)
	}
	if b.InUse() != 150*HeapPerByte {
		t.Errorf("in use %d, want %d", b.InUse(), 150*HeapPerByte)
	}
	m1.Release()
	m2.Release()
	if b.InUse() != 0 {
		t.Errorf("after release, %d in use", b.InUse())
	}
	if err := Charge(context.Background(), 1<<40); err != nil {
		t.Errorf("no meter counts nothing: %v", err)
	}
}
