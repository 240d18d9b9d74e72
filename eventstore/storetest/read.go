package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/relayhq/relay/domain"
)

func (s *suite) testRead(t *testing.T) {
	t.Run("StreamNotFound", s.testStreamNotFound)
	t.Run("ReadStream", s.testReadStream)
	t.Run("ReadStreamFromAnyRevision", s.testReadStreamFromAnyRevision)
	t.Run("LastEvent", s.testLastEvent)
	t.Run("ReadAll", s.testReadAll)
}

func (s *suite) testStreamNotFound(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	for _, from := range []uint64{0, 3} {
		if _, err := store.ReadStream(ctx, newStream("missing"), from, 10); !errors.Is(err, domain.ErrStreamNotFound) {
			t.Fatalf("ReadStream(missing, from %d) = %v, want ErrStreamNotFound", from, err)
		}
	}
}

func (s *suite) testReadStream(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	before := mustLast(t, ctx, store)
	stream, other := newStream("read"), newStream("read-other")
	events := newEvents(5, "read")
	mustAppend(t, ctx, store, stream, domain.NoStream(), events[:2]...)
	mustAppend(t, ctx, store, other, domain.NoStream(), newEvent("other"))
	mustAppend(t, ctx, store, stream, domain.Exact(1), events[2:]...)

	tests := []struct {
		name string
		from uint64
		max  int
		want []domain.EventData
		revs []uint64
	}{
		{"whole stream", 0, 100, events, []uint64{0, 1, 2, 3, 4}},
		{"exact size", 0, 5, events, []uint64{0, 1, 2, 3, 4}},
		{"first page", 0, 2, events[:2], []uint64{0, 1}},
		{"middle page", 2, 2, events[2:4], []uint64{2, 3}},
		{"tail", 4, 10, events[4:], []uint64{4}},
		{"past the end", 5, 10, nil, nil},
		{"far past the end", 1000, 10, nil, nil},
	}
	positions := map[string]uint64{}
	for _, e := range readOwn(t, ctx, store, before, stream) {
		positions[e.ID] = e.Position
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustReadStream(t, ctx, store, stream, tt.from, tt.max)
			checkEvents(t, "ReadStream", got, tt.want)
			for i, e := range got {
				if e.Stream != stream || e.Revision != tt.revs[i] {
					t.Fatalf("event %d at %s@%d, want %s@%d", i, e.Stream, e.Revision, stream, tt.revs[i])
				}
				if s.f.Guarantees.StreamReadPositions && e.Position != positions[e.ID] {
					t.Fatalf("event %d: Position %d, but ReadAll has it at %d", i, e.Position, positions[e.ID])
				}
			}
		})
	}
}

// testReadStreamFromAnyRevision: a read from any revision of a stream of
// many appends, of one and of several events, with other streams' appends
// between them, starts at that revision (a reader that folded the events
// before it, or found a snapshot there, reads on from it).
func (s *suite) testReadStreamFromAnyRevision(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	stream, other := newStream("read-many"), newStream("read-many-other")
	var events []domain.EventData
	for i := range 40 {
		batch := newEvents(1+2*(i%3/2), fmt.Sprintf("e%d", i)) // 1, 1, 3 events, ...
		mustAppend(t, ctx, store, stream, domain.Any(), batch...)
		events = append(events, batch...)
		mustAppend(t, ctx, store, other, domain.Any(), newEvent(fmt.Sprintf("o%d", i)))
	}
	for from := range len(events) + 2 {
		got := mustReadStream(t, ctx, store, stream, uint64(from), 4)
		want := events[min(from, len(events)):min(from+4, len(events))]
		checkEvents(t, fmt.Sprintf("ReadStream from %d", from), got, want)
		for i, e := range got {
			if e.Revision != uint64(from+i) {
				t.Fatalf("ReadStream from %d: event %d at revision %d", from, i, e.Revision)
			}
		}
	}
}

// testLastEvent: LastEvent is the stream's newest event, as ReadStream
// returns it, after appends of one and of several events.
func (s *suite) testLastEvent(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	stream, other := newStream("last"), newStream("last-other")
	if _, err := store.LastEvent(ctx, stream); !errors.Is(err, domain.ErrStreamNotFound) {
		t.Fatalf("LastEvent(missing) = %v, want ErrStreamNotFound", err)
	}
	appends := [][]domain.EventData{newEvents(1, "a"), newEvents(3, "b"), newEvents(1, "c")}
	n := 0
	for _, batch := range appends {
		mustAppend(t, ctx, store, stream, domain.Any(), batch...)
		mustAppend(t, ctx, store, other, domain.Any(), newEvent("other"))
		n += len(batch)
		got, err := store.LastEvent(ctx, stream)
		if err != nil {
			t.Fatalf("LastEvent after %d events: %v", n, err)
		}
		checkEvents(t, "LastEvent", []domain.RecordedEvent{got}, batch[len(batch)-1:])
		read := mustReadStream(t, ctx, store, stream, uint64(n-1), 1)
		if got.Stream != stream || got.Revision != uint64(n-1) ||
			(s.f.Guarantees.StreamReadPositions && got.Position != read[0].Position) {
			t.Fatalf("LastEvent after %d events: %s@%d at %d; ReadStream has %s@%d at %d",
				n, got.Stream, got.Revision, got.Position, read[0].Stream, read[0].Revision, read[0].Position)
		}
	}
}

func (s *suite) testReadAll(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	before := mustLast(t, ctx, store)
	a, b, c := newStream("all-a"), newStream("all-b"), newStream("all-c")
	type step struct {
		stream   string
		expected domain.ExpectedRevision
		event    domain.EventData
	}
	steps := []step{
		{a, domain.NoStream(), newEvent("a0")},
		{b, domain.NoStream(), newEvent("b0")},
		{a, domain.Exact(0), newEvent("a1")},
		{c, domain.Any(), newEvent("c0")},
		{b, domain.StreamExists(), newEvent("b1")},
		{a, domain.Any(), newEvent("a2")},
	}
	var want []domain.EventData
	var results []domain.AppendResult
	for _, st := range steps {
		results = append(results, mustAppend(t, ctx, store, st.stream, st.expected, st.event))
		want = append(want, st.event)
	}

	got := readOwn(t, ctx, store, before, a, b, c)
	checkEvents(t, "ReadAll", got, want)
	s.checkIncreasing(t, before, got)
	for i, e := range got {
		if e.Position != results[i].Position {
			t.Fatalf("event %d at position %d, but its append reported %d", i, e.Position, results[i].Position)
		}
		if i > 0 && e.Position <= got[i-1].Position {
			t.Fatalf("separate appends share position %d", e.Position)
		}
	}

	// Resuming from any event's position yields exactly the events after it.
	for i, e := range got {
		rest := readOwn(t, ctx, store, e.Position, a, b, c)
		checkEvents(t, "ReadAll after an event", rest, want[i+1:])
	}

	last := mustLast(t, ctx, store)
	if last < results[len(results)-1].Position {
		t.Fatalf("LastPosition = %d, before the last append's %d", last, results[len(results)-1].Position)
	}
	if !s.f.Guarantees.EmptyOnOpen {
		return
	}
	// A private log allows exact paging checks.
	if last != results[len(results)-1].Position {
		t.Fatalf("LastPosition = %d, want %d", last, results[len(results)-1].Position)
	}
	page, err := store.ReadAll(ctx, before, 2)
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, "ReadAll first page", page, want[:2])
	page, err = store.ReadAll(ctx, page[1].Position, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, "ReadAll second page", page, want[2:5])
	if page, err := store.ReadAll(ctx, last, 10); err != nil || len(page) != 0 {
		t.Fatalf("ReadAll after the last position = %d events, %v; want none", len(page), err)
	}
}
