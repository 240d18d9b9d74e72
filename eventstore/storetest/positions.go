package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// testGapFree checks that an empty log starts at 1 and that refused appends
// (conflicts, duplicates, bad input) leave no hole in the positions.
func (s *suite) testGapFree(t *testing.T) {
	if !s.f.Guarantees.EmptyOnOpen || !s.f.Guarantees.GapFreePositions {
		t.Skip("the adapter's positions are not gap-free from 1 in a fresh log")
	}
	store := s.open(t)
	ctx := testContext(t)
	if last := mustLast(t, ctx, store); last != 0 {
		t.Fatalf("LastPosition of an empty log = %d, want 0", last)
	}
	if evs, err := store.ReadAll(ctx, 0, 10); err != nil || len(evs) != 0 {
		t.Fatalf("ReadAll of an empty log = %d events, %v", len(evs), err)
	}
	stream := newStream("gapfree")
	used := newEvent("used")
	steps := []struct {
		name     string
		expected domain.ExpectedRevision
		events   []domain.EventData
		ok       bool
		position uint64 // of the last event, when ok
	}{
		{"first event", domain.NoStream(), []domain.EventData{used}, true, 1},
		{"three at once", domain.Exact(0), newEvents(3, "three"), true, 4},
		{"conflict", domain.Exact(0), newEvents(2, "conflict"), false, 0},
		{"duplicate ID", domain.Exact(3), []domain.EventData{newEvent("new"), used}, false, 0},
		{"bad input", domain.Any(), []domain.EventData{{ID: "x", Type: "t"}}, false, 0},
		{"after refusals", domain.Exact(3), newEvents(1, "after"), true, 5},
	}
	for _, st := range steps {
		res, err := store.Append(ctx, stream, st.expected, st.events...)
		if st.ok != (err == nil) {
			t.Fatalf("%s: Append err = %v, want ok=%v", st.name, err, st.ok)
		}
		if st.ok && res.Position != st.position {
			t.Fatalf("%s: Position = %d, want %d", st.name, res.Position, st.position)
		}
	}
	all, err := store.ReadAll(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Fatalf("ReadAll: %d events, want 5", len(all))
	}
	s.checkIncreasing(t, 0, all)
	if last := mustLast(t, ctx, store); last != 5 {
		t.Fatalf("LastPosition = %d, want 5", last)
	}
}

// testRoundTrip checks that every field an event carries reads back exactly,
// through each of the three ways to read.
func (s *suite) testRoundTrip(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	before := mustLast(t, ctx, store)

	allBytes := make([]byte, 0, 260)
	for i := range 256 {
		allBytes = append(allBytes, byte(i))
	}
	allBytes = append(allBytes, 0xff, 0xfe, 0x00, 0xc3) // invalid UTF-8, a NUL, a cut rune

	kolkata := time.FixedZone("UTC+05:30", 5*3600+1800)
	full := newEvent("full")
	full.Type = "storetest.binary.v7"
	full.Data = allBytes
	full.Metadata = domain.Metadata{
		SchemaVersion: 7,
		OccurredAt:    time.Date(2024, 2, 29, 23, 59, 59, 123456789, kolkata),
		CorrelationID: "corr-" + full.ID,
		CausationID:   "cause-" + full.ID,
	}
	spaced := newEvent("spaced")
	spaced.Data = []byte("{ \"b\" : 1,\n  \"a\": \"\\u00e9\" }") // JSON kept byte for byte, not re-encoded
	spaced.Metadata.OccurredAt = time.Now()                      // carries a monotonic reading
	empty := newEvent("empty")
	empty.Data = nil
	empty.Metadata = domain.Metadata{}
	want := []domain.EventData{full, spaced, empty}

	stream := newStream("roundtrip")
	mustAppend(t, ctx, store, stream, domain.NoStream(), want...)

	checkEvents(t, "ReadStream", mustReadStream(t, ctx, store, stream, 0, 10), want)
	checkEvents(t, "ReadAll", readOwn(t, ctx, store, before, stream), want)

	sub, err := store.SubscribeAll(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	checkEvents(t, "SubscribeAll", s.newReceiver(t, sub, before, stream).until(ctx, len(want)), want)

	got := mustReadStream(t, ctx, store, stream, 0, 1)[0].Metadata.OccurredAt
	if got.Nanosecond() != 123456789 || got.Location() != time.UTC || got.Hour() != 18 {
		t.Fatalf("OccurredAt = %s, want 2024-02-29T18:29:59.123456789Z", got.Format(time.RFC3339Nano))
	}
}

// testStrictlyIncreasing checks the port's position rule: no two events
// share a position, not even the events of one multi-event append, and a
// reader that resumes after any event's position (as the views do after
// their checkpoint, which may fall inside an append) gets exactly the events
// after it, by ReadAll and by SubscribeAll.
func (s *suite) testStrictlyIncreasing(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	before := mustLast(t, ctx, store)
	a, b := newStream("positions-a"), newStream("positions-b")
	appends := []struct {
		stream   string
		expected domain.ExpectedRevision
		events   []domain.EventData
	}{
		{a, domain.NoStream(), newEvents(3, "a-first")},
		{b, domain.NoStream(), newEvents(1, "b-first")},
		{a, domain.Exact(2), newEvents(2, "a-second")},
		{b, domain.Exact(0), newEvents(4, "b-second")},
	}
	var want []domain.EventData
	for _, ap := range appends {
		res := mustAppend(t, ctx, store, ap.stream, ap.expected, ap.events...)
		want = append(want, ap.events...)
		own := readOwn(t, ctx, store, before, ap.stream)
		if last := own[len(own)-1]; res.Position != last.Position {
			t.Fatalf("AppendResult.Position = %d, but the append's last event is at %d", res.Position, last.Position)
		}
	}

	got := readOwn(t, ctx, store, before, a, b)
	checkEvents(t, "ReadAll", got, want)
	seen := map[uint64]string{}
	for i, e := range got {
		if other, ok := seen[e.Position]; ok {
			t.Fatalf("events %s and %s share position %d", other, e.ID, e.Position)
		}
		seen[e.Position] = e.ID
		if i > 0 && e.Position <= got[i-1].Position {
			t.Fatalf("event %d at position %d after %d: positions must strictly increase", i, e.Position, got[i-1].Position)
		}
	}
	if s.f.Guarantees.StreamReadPositions {
		for _, st := range []string{a, b} {
			for _, e := range mustReadStream(t, ctx, store, st, 1, 10) {
				if seen[e.Position] != e.ID {
					t.Fatalf("ReadStream from revision 1: %s at position %d, ReadAll has it at another", e.ID, e.Position)
				}
			}
		}
	}

	// Resume after every event, the ones inside an append included.
	for i, e := range got {
		checkEvents(t, fmt.Sprintf("ReadAll after event %d", i), readOwn(t, ctx, store, e.Position, a, b), want[i+1:])
		if i == len(got)-1 {
			break
		}
		sub, err := store.SubscribeAll(ctx, e.Position)
		if err != nil {
			t.Fatal(err)
		}
		rest := s.newReceiver(t, sub, e.Position, a, b).until(ctx, len(want)-i-1)
		sub.Close()
		checkEvents(t, fmt.Sprintf("SubscribeAll after event %d", i), rest, want[i+1:])
	}
}
