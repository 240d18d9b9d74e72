package storetest

import (
	"errors"
	"testing"

	"github.com/relayhq/relay/domain"
)

func (s *suite) testAppend(t *testing.T) {
	t.Run("ExpectedRevision", s.testExpectedRevision)
	t.Run("IdempotentRetry", s.testIdempotentRetry)
	t.Run("DuplicateEventIDElsewhere", s.testDuplicateElsewhere)
	t.Run("InvalidInput", s.testInvalidInput)
}

func (s *suite) testExpectedRevision(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	before := mustLast(t, ctx, store)
	tests := []struct {
		name     string
		prior    int // events already in the stream
		expected domain.ExpectedRevision
		ok       bool
	}{
		{"Any on an empty stream", 0, domain.Any(), true},
		{"Any on a stream", 2, domain.Any(), true},
		{"NoStream on an empty stream", 0, domain.NoStream(), true},
		{"NoStream on a stream", 2, domain.NoStream(), false},
		{"StreamExists on an empty stream", 0, domain.StreamExists(), false},
		{"StreamExists on a stream", 2, domain.StreamExists(), true},
		{"Exact last revision", 2, domain.Exact(1), true},
		{"Exact stale revision", 2, domain.Exact(0), false},
		{"Exact future revision", 2, domain.Exact(5), false},
		{"Exact 0 on an empty stream", 0, domain.Exact(0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := newStream("expected")
			if tt.prior > 0 {
				mustAppend(t, ctx, store, stream, domain.NoStream(), newEvents(tt.prior, "prior")...)
			}
			events := newEvents(2, "new")
			res, err := store.Append(ctx, stream, tt.expected, events...)
			if !tt.ok {
				wantWrongRevision(t, err, stream, tt.expected, uint64(tt.prior)-1, tt.prior > 0)
				if tt.prior == 0 {
					if _, err := store.ReadStream(ctx, stream, 0, 10); !errors.Is(err, domain.ErrStreamNotFound) {
						t.Fatalf("refused append created the stream: ReadStream err = %v", err)
					}
					return
				}
				if got := mustReadStream(t, ctx, store, stream, 0, 10); len(got) != tt.prior {
					t.Fatalf("refused append wrote: stream holds %d events, want %d", len(got), tt.prior)
				}
				return
			}
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			wantNext := uint64(tt.prior + len(events) - 1)
			if res.NextRevision != wantNext {
				t.Fatalf("NextRevision = %d, want %d", res.NextRevision, wantNext)
			}
			got := mustReadStream(t, ctx, store, stream, uint64(tt.prior), 10)
			checkEvents(t, "ReadStream", got, events)
			all := readOwn(t, ctx, store, before, stream)
			if last := all[len(all)-1]; res.Position != last.Position || last.ID != events[1].ID {
				t.Fatalf("AppendResult.Position = %d, but the last event %s is at %d", res.Position, last.ID, last.Position)
			}
		})
	}
}

func (s *suite) testIdempotentRetry(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	stream := newStream("retry")
	e1, e2, e3 := newEvent("1"), newEvent("2"), newEvent("3")

	first := mustAppend(t, ctx, store, stream, domain.NoStream(), e1, e2)
	third := mustAppend(t, ctx, store, stream, domain.Exact(1), e3)
	last := mustLast(t, ctx, store)

	tests := []struct {
		name     string
		expected domain.ExpectedRevision
		events   []domain.EventData
		want     domain.AppendResult
		anyRetry bool // EventStoreDB detects retries with Any only on a best-effort basis
	}{
		{"NoStream retry of the first append", domain.NoStream(), []domain.EventData{e1, e2}, first, false},
		{"Exact retry of the second append", domain.Exact(1), []domain.EventData{e3}, third, false},
		{"Any retry of the second append", domain.Any(), []domain.EventData{e3}, third, true},
		{"Any retry of the first append", domain.Any(), []domain.EventData{e1, e2}, first, true},
		{"StreamExists retry of the second append", domain.StreamExists(), []domain.EventData{e3}, third, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.anyRetry && !s.f.Guarantees.UniqueEventIDs {
				t.Skip("the adapter detects these retries only on a best-effort basis")
			}
			res, err := store.Append(ctx, stream, tt.expected, tt.events...)
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			if res.NextRevision != tt.want.NextRevision {
				t.Fatalf("retry NextRevision = %d, want %d", res.NextRevision, tt.want.NextRevision)
			}
			if s.f.Guarantees.UniqueEventIDs && res != tt.want {
				t.Fatalf("retry result = %+v, want %+v", res, tt.want)
			}
		})
	}
	checkEvents(t, "stream after retries", mustReadStream(t, ctx, store, stream, 0, 10), []domain.EventData{e1, e2, e3})
	if got := mustLast(t, ctx, store); s.f.Guarantees.EmptyOnOpen && got != last {
		t.Fatalf("LastPosition after retries = %d, want %d (nothing written)", got, last)
	}
}

func (s *suite) testDuplicateElsewhere(t *testing.T) {
	if !s.f.Guarantees.UniqueEventIDs {
		t.Skip("the adapter does not track event IDs across the log")
	}
	store := s.open(t)
	ctx := testContext(t)
	stream, other := newStream("dup"), newStream("dup-other")
	e1, e2 := newEvent("1"), newEvent("2")
	mustAppend(t, ctx, store, stream, domain.NoStream(), e1, e2)
	last := mustLast(t, ctx, store)

	tests := []struct {
		name     string
		stream   string
		expected domain.ExpectedRevision
		events   []domain.EventData
	}{
		{"another stream", other, domain.NoStream(), []domain.EventData{e1}},
		{"another stream with Any", other, domain.Any(), []domain.EventData{e2}},
		{"same stream, later place", stream, domain.Exact(1), []domain.EventData{e1}},
		{"same stream, shifted place", stream, domain.Exact(0), []domain.EventData{e1, e2}},
		{"new event then a used one", stream, domain.Exact(1), []domain.EventData{newEvent("3"), e2}},
		{"used events out of order", stream, domain.Any(), []domain.EventData{e2, e1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := store.Append(ctx, tt.stream, tt.expected, tt.events...)
			if !errors.Is(err, domain.ErrDuplicateEventID) {
				t.Fatalf("Append = %v, want ErrDuplicateEventID", err)
			}
		})
	}
	if _, err := store.ReadStream(ctx, other, 0, 10); !errors.Is(err, domain.ErrStreamNotFound) {
		t.Fatalf("refused appends created %s: %v", other, err)
	}
	if got := mustLast(t, ctx, store); got != last {
		t.Fatalf("LastPosition = %d, want %d: a refused append wrote", got, last)
	}
}

func (s *suite) testInvalidInput(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	bad := func(mutate func(*domain.EventData)) []domain.EventData {
		e := newEvent("bad")
		mutate(&e)
		return []domain.EventData{e}
	}
	dup := newEvent("dup")
	tests := []struct {
		name   string
		stream string
		events []domain.EventData
	}{
		{"empty stream name", "", newEvents(1, "x")},
		{"system stream name", "$" + newStream("sys"), newEvents(1, "x")},
		{"no events", newStream("invalid"), nil},
		{"empty ID", newStream("invalid"), bad(func(e *domain.EventData) { e.ID = "" })},
		{"ID not a UUID", newStream("invalid"), bad(func(e *domain.EventData) { e.ID = "not-a-uuid" })},
		{"empty type", newStream("invalid"), bad(func(e *domain.EventData) { e.Type = "" })},
		{"same ID twice", newStream("invalid"), []domain.EventData{dup, dup}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := store.Append(ctx, tt.stream, domain.Any(), tt.events...)
			if !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("Append = %v, want ErrInvalidInput", err)
			}
			if tt.stream == "" {
				return
			}
			if _, err := store.ReadStream(ctx, tt.stream, 0, 1); !errors.Is(err, domain.ErrStreamNotFound) {
				t.Fatalf("refused append created the stream: %v", err)
			}
		})
	}
	for _, max := range []int{0, -1} {
		if _, err := store.ReadAll(ctx, 0, max); !errors.Is(err, domain.ErrInvalidInput) {
			t.Fatalf("ReadAll(max %d) = %v, want ErrInvalidInput", max, err)
		}
		if _, err := store.ReadStream(ctx, newStream("invalid"), 0, max); !errors.Is(err, domain.ErrInvalidInput) {
			t.Fatalf("ReadStream(max %d) = %v, want ErrInvalidInput", max, err)
		}
	}
}
