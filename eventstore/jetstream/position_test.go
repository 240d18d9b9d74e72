package jetstream

import (
	"math"
	"testing"

	"github.com/relayhq/relay/domain"
)

func TestPosition(t *testing.T) {
	tests := []struct {
		seq  uint64
		i, n int
		want uint64
	}{
		{1, 0, 1, 1999},
		{1, 0, 3, 1997},
		{1, 2, 3, 1999},
		{2, 0, 1, 2999},
		{12, 0, 1000, 12000},
		{12, 999, 1000, 12999},
	}
	for _, tt := range tests {
		if got := position(tt.seq, tt.i, tt.n); got != tt.want {
			t.Errorf("position(%d, %d, %d) = %d, want %d", tt.seq, tt.i, tt.n, got, tt.want)
		}
	}
}

// TestPositionOrder walks a log of messages of every size and checks what
// the views and subscriptions rely on: positions rise strictly, the last
// position follows from the last sequence, and every position leads back to
// the message that holds it.
func TestPositionOrder(t *testing.T) {
	sizes := []int{1, 3, MaxAppendEvents, 1, 2, MaxAppendEvents - 1, 1}
	var prev uint64
	for k, n := range sizes {
		seq := uint64(k + 1)
		for i := range n {
			p := position(seq, i, n)
			if p <= prev {
				t.Fatalf("message %d event %d of %d: position %d after %d", seq, i, n, p, prev)
			}
			if got := firstSeq(p); got != seq {
				t.Fatalf("firstSeq(%d) = %d, want %d", p, got, seq)
			}
			prev = p
		}
		if got := lastPosition(seq); got != prev {
			t.Fatalf("lastPosition(%d) = %d, want the last event's %d", seq, got, prev)
		}
	}
	if lastPosition(0) != 0 || firstSeq(0) != 1 || firstSeq(positionSlot-1) != 1 {
		t.Fatalf("empty log: lastPosition(0) = %d, firstSeq(0) = %d, firstSeq(999) = %d", lastPosition(0), firstSeq(0), firstSeq(positionSlot-1))
	}
}

func TestExpectedSubjectSeq(t *testing.T) {
	empty := head{}
	// The stream's newest message is sequence 40 and holds revisions 3 to 5.
	stream := head{exists: true, seq: 40, first: 3, last: 5}
	tests := []struct {
		name     string
		expected domain.ExpectedRevision
		h        head
		seq      uint64
		ok       bool
	}{
		{"any, empty", domain.Any(), empty, 0, true},
		{"any, stream", domain.Any(), stream, 40, true},
		{"no stream, empty", domain.NoStream(), empty, 0, true},
		{"no stream, stream", domain.NoStream(), stream, 0, false},
		{"exists, empty", domain.StreamExists(), empty, 0, false},
		{"exists, stream", domain.StreamExists(), stream, 40, true},
		{"exact last revision", domain.Exact(5), stream, 40, true},
		{"exact first revision of the last message", domain.Exact(3), stream, 0, false},
		{"exact stale revision", domain.Exact(2), stream, 0, false},
		{"exact future revision", domain.Exact(6), stream, 0, false},
		{"exact 0, empty", domain.Exact(0), empty, 0, false},
		{"exact max", domain.Exact(math.MaxUint64), stream, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seq, ok := expectedSubjectSeq(tt.expected, tt.h)
			if seq != tt.seq || ok != tt.ok {
				t.Fatalf("expectedSubjectSeq(%s, %+v) = %d, %v; want %d, %v", tt.expected, tt.h, seq, ok, tt.seq, tt.ok)
			}
		})
	}
}

func TestHeadNextRevision(t *testing.T) {
	if got := (head{}).nextRevision(); got != 0 {
		t.Fatalf("empty stream: next revision %d, want 0", got)
	}
	if got := (head{exists: true, seq: 9, first: 3, last: 5}).nextRevision(); got != 6 {
		t.Fatalf("next revision %d, want 6", got)
	}
}

func TestPlaceOf(t *testing.T) {
	tests := []struct {
		expected domain.ExpectedRevision
		rev      uint64
		ok       bool
	}{
		{domain.NoStream(), 0, true},
		{domain.Exact(0), 1, true},
		{domain.Exact(41), 42, true},
		{domain.Exact(math.MaxUint64), 0, false},
		{domain.Any(), 0, false},
		{domain.StreamExists(), 0, false},
	}
	for _, tt := range tests {
		if rev, ok := placeOf(tt.expected); rev != tt.rev || ok != tt.ok {
			t.Errorf("placeOf(%s) = %d, %v; want %d, %v", tt.expected, rev, ok, tt.rev, tt.ok)
		}
	}
}

func TestCheckAppendSize(t *testing.T) {
	if err := checkAppendSize(MaxAppendEvents); err != nil {
		t.Fatalf("checkAppendSize(%d) = %v", MaxAppendEvents, err)
	}
	if err := checkAppendSize(MaxAppendEvents + 1); err == nil {
		t.Fatalf("checkAppendSize(%d) accepted an append larger than a slot", MaxAppendEvents+1)
	}
}
