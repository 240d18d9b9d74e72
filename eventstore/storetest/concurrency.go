package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/relayhq/relay/domain"
)

func (s *suite) testConcurrency(t *testing.T) {
	t.Run("DifferentStreams", s.testConcurrentStreams)
	t.Run("OneStreamOneWinner", s.testOneWinner)
	t.Run("OneStreamAny", s.testConcurrentAny)
}

// parallel runs fn(i) for i in [0, n) at once, released together to maximise
// contention, and returns the errors in index order.
func parallel(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			errs[i] = fn(i)
		}()
	}
	close(gate)
	wg.Wait()
	return errs
}

func (s *suite) testConcurrentStreams(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	before := mustLast(t, ctx, store)
	const writers, perWriter = 8, 20
	streams := make([]string, writers)
	events := make([][]domain.EventData, writers)
	for w := range writers {
		streams[w] = newStream(fmt.Sprint("concurrent", w))
		events[w] = newEvents(perWriter, streams[w])
	}
	var mu sync.Mutex
	positions := map[uint64]string{}
	errs := parallel(writers, func(w int) error {
		for i, e := range events[w] {
			res, err := store.Append(ctx, streams[w], expectedBefore(i), e)
			if err != nil {
				return fmt.Errorf("append %d to %s: %w", i, streams[w], err)
			}
			if res.NextRevision != uint64(i) {
				return fmt.Errorf("append %d to %s: NextRevision %d", i, streams[w], res.NextRevision)
			}
			mu.Lock()
			other, dup := positions[res.Position]
			positions[res.Position] = e.ID
			mu.Unlock()
			if dup {
				return fmt.Errorf("events %s and %s both reported position %d", other, e.ID, res.Position)
			}
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		checkEvents(t, streams[w], mustReadStream(t, ctx, store, streams[w], 0, 100), events[w])
	}
	all := readOwn(t, ctx, store, before, streams...)
	if len(all) != writers*perWriter {
		t.Fatalf("ReadAll: %d events, want %d", len(all), writers*perWriter)
	}
	s.checkIncreasing(t, before, all)
	for _, e := range all {
		if positions[e.Position] != e.ID {
			t.Fatalf("position %d holds %s, but its append reported %s", e.Position, e.ID, positions[e.Position])
		}
	}
}

// testOneWinner races appenders with the same expected revision: exactly one
// may win each round, every other one must get a conflict.
func (s *suite) testOneWinner(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	stream := newStream("race")
	const rounds, racers = 5, 8
	var winners []domain.EventData
	for round := range rounds {
		candidates := newEvents(racers, fmt.Sprint("round", round))
		errs := parallel(racers, func(i int) error {
			_, err := store.Append(ctx, stream, expectedBefore(round), candidates[i])
			return err
		})
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won >= 0:
				t.Fatalf("round %d: racers %d and %d both won", round, won, i)
			case err == nil:
				won = i
			case !errors.Is(err, domain.ErrWrongExpectedRevision):
				t.Fatalf("round %d: racer %d: %v, want a conflict", round, i, err)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: nobody won", round)
		}
		winners = append(winners, candidates[won])
	}
	checkEvents(t, "raced stream", mustReadStream(t, ctx, store, stream, 0, 100), winners)
}

// testConcurrentAny appends to one stream with Any from many goroutines: all
// succeed and the stream's revisions stay dense and unique.
func (s *suite) testConcurrentAny(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	stream := newStream("any")
	const writers, perWriter = 8, 10
	var mu sync.Mutex
	revisions := map[uint64]bool{}
	errs := parallel(writers, func(w int) error {
		for i := range perWriter {
			res, err := store.Append(ctx, stream, domain.Any(), newEvent(fmt.Sprint(w, "-", i)))
			if err != nil {
				return err
			}
			mu.Lock()
			dup := revisions[res.NextRevision]
			revisions[res.NextRevision] = true
			mu.Unlock()
			if dup {
				return fmt.Errorf("two appends reported revision %d", res.NextRevision)
			}
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got := mustReadStream(t, ctx, store, stream, 0, 1000)
	if len(got) != writers*perWriter {
		t.Fatalf("stream holds %d events, want %d", len(got), writers*perWriter)
	}
	for i, e := range got {
		if e.Revision != uint64(i) || !revisions[e.Revision] {
			t.Fatalf("event %d has revision %d (reported: %v)", i, e.Revision, revisions[e.Revision])
		}
	}
}
