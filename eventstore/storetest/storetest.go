package storetest

import (
	"testing"

	"github.com/relayhq/relay/domain"
)

// Factory opens the adapter under test and declares what it promises beyond
// the port's minimum.
type Factory struct {
	// Open returns a store ready for use. The suite closes it (possibly twice).
	Open func(t *testing.T) domain.EventStore
	// Reopen closes store and opens the same data again, as after a restart.
	// Nil skips the restart test.
	Reopen func(t *testing.T, store domain.EventStore) domain.EventStore
	// Guarantees switches on the checks for optional promises.
	Guarantees Guarantees
}

// Guarantees are promises some adapters make beyond the port. Each one turns
// on stricter checks; leaving one false never weakens the port's contract.
type Guarantees struct {
	// EmptyOnOpen: Open returns a private log with no events, so the suite may
	// check exact positions, LastPosition and page boundaries.
	EmptyOnOpen bool
	// GapFreePositions: an append's events take positions last+1, last+2, …,
	// with no gap even after refused appends (a deleted stream's events leave
	// the only gaps). Without it positions need only strictly increase
	// (EventStoreDB's come from byte offsets).
	GapFreePositions bool
	// UniqueEventIDs: the store knows every ID in the log, so an ID reused at
	// another place fails with domain.ErrDuplicateEventID and a retry reports
	// the original position. EventStoreDB only detects retries at the same
	// place.
	UniqueEventIDs bool
	// StreamReadPositions: ReadStream fills RecordedEvent.Position.
	StreamReadPositions bool
}

// Run runs the whole suite against f.
func Run(t *testing.T, f Factory) {
	t.Helper()
	if f.Open == nil {
		t.Fatal("storetest: Factory.Open is nil")
	}
	s := &suite{f: f}
	t.Run("Append", s.testAppend)
	t.Run("Read", s.testRead)
	t.Run("GapFreePositions", s.testGapFree)
	t.Run("StrictlyIncreasingPositions", s.testStrictlyIncreasing)
	t.Run("RoundTrip", s.testRoundTrip)
	t.Run("Subscribe", s.testSubscribe)
	t.Run("Concurrency", s.testConcurrency)
	t.Run("Lifecycle", s.testLifecycle)
	t.Run("Delete", s.testDelete)
}

type suite struct{ f Factory }

// open returns a store that is closed when t ends.
func (s *suite) open(t *testing.T) domain.EventStore {
	t.Helper()
	store := s.f.Open(t)
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return store
}
