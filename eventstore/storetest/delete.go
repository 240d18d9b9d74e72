package storetest

import (
	"errors"
	"testing"

	"github.com/relayhq/relay/domain"
)

func (s *suite) testDelete(t *testing.T) {
	t.Run("RemovesEventsAndLeavesTombstone", s.testDeleteRemoves)
	t.Run("RefusesAppendsAndSecondDelete", s.testDeleteRefuses)
	t.Run("WrongExpectedRevision", s.testDeleteConflict)
	t.Run("PositionsNotReused", s.testDeleteNewest)
	t.Run("SubscriptionGetsTombstone", s.testDeleteSubscribe)
	t.Run("SurvivesRestart", s.testDeleteRestart)
}

// wantTombstone fails unless e is the port's tombstone of stream.
func wantTombstone(t *testing.T, e domain.RecordedEvent, stream string) domain.StreamDeleted {
	t.Helper()
	if e.Type != domain.TypeStreamDeleted || e.Stream != stream {
		t.Fatalf("event %s of %s at %d, want the tombstone of %s", e.Type, e.Stream, e.Position, stream)
	}
	p, err := domain.NewCodec().Decode(e.Type, e.Data)
	if err != nil {
		t.Fatalf("tombstone does not decode: %v", err)
	}
	tomb := p.(domain.StreamDeleted)
	if tomb.Stream != stream {
		t.Fatalf("tombstone names %q, want %q", tomb.Stream, stream)
	}
	return tomb
}

func wantDeleted(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, domain.ErrStreamDeleted) {
		t.Fatalf("%s: err = %v, want ErrStreamDeleted", what, err)
	}
}

// testDeleteRemoves: the stream's events are gone from ReadStream and
// ReadAll, other streams are untouched, and a tombstone naming the stream
// follows everything that was appended before the deletion.
func (s *suite) testDeleteRemoves(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	before := mustLast(t, ctx, store)
	a, b := newStream("delete-a"), newStream("delete-b")
	mustAppend(t, ctx, store, a, domain.NoStream(), newEvents(3, "a")...)
	keep := newEvents(2, "b")
	mustAppend(t, ctx, store, b, domain.NoStream(), keep...)
	lastA := mustAppend(t, ctx, store, a, domain.Exact(2), newEvent("a3"))

	res, err := store.DeleteStream(ctx, a, domain.Exact(3))
	if err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	_, err = store.ReadStream(ctx, a, 0, 10)
	wantDeleted(t, "ReadStream of the deleted stream", err)
	if !errors.Is(err, domain.ErrStreamNotFound) {
		t.Fatalf("ReadStream of the deleted stream: %v does not match ErrStreamNotFound", err)
	}
	checkEvents(t, "ReadStream of the other stream", mustReadStream(t, ctx, store, b, 0, 10), keep)

	all := readOwn(t, ctx, store, before, a, b)
	if len(all) != 3 {
		t.Fatalf("ReadAll holds %d events of the two streams, want b's 2 and a's tombstone", len(all))
	}
	checkEvents(t, "ReadAll of the other stream", all[:2], keep)
	tomb := wantTombstone(t, all[2], a)
	if all[2].Position <= lastA.Position {
		t.Fatalf("tombstone at position %d, not after the stream's last event at %d", all[2].Position, lastA.Position)
	}
	if res.Position != 0 && res.Position != all[2].Position {
		t.Fatalf("DeleteStream reported position %d, the tombstone is at %d", res.Position, all[2].Position)
	}
	if tomb.Events >= 0 && (tomb.Events != 4 || tomb.LastRevision != 3) {
		t.Fatalf("tombstone %+v, want 4 events up to revision 3", tomb)
	}
}

// testDeleteRefuses: a deleted stream cannot be written again, whatever the
// condition, nor deleted again (EventStoreDB's StreamDeleted).
func (s *suite) testDeleteRefuses(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	a := newStream("delete-refuse")
	mustAppend(t, ctx, store, a, domain.NoStream(), newEvent("a0"))
	if _, err := store.DeleteStream(ctx, a, domain.Any()); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	for _, exp := range []domain.ExpectedRevision{domain.Any(), domain.NoStream(), domain.StreamExists(), domain.Exact(0), domain.Exact(1)} {
		_, err := store.Append(ctx, a, exp, newEvent("again"))
		wantDeleted(t, "Append("+exp.String()+") to the deleted stream", err)
	}
	_, err := store.DeleteStream(ctx, a, domain.Any())
	wantDeleted(t, "second DeleteStream", err)
	_, err = store.LastEvent(ctx, a)
	wantDeleted(t, "LastEvent of the deleted stream", err)
}

// testDeleteConflict: a condition that does not match deletes nothing.
func (s *suite) testDeleteConflict(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	a := newStream("delete-conflict")
	evs := newEvents(2, "a")
	mustAppend(t, ctx, store, a, domain.NoStream(), evs...)
	_, err := store.DeleteStream(ctx, a, domain.Exact(0))
	wantWrongRevision(t, err, a, domain.Exact(0), 1, true)
	checkEvents(t, "ReadStream after a refused delete", mustReadStream(t, ctx, store, a, 0, 10), evs)
}

// testDeleteNewest: deleting the stream that holds the newest event does not
// let a later append take that event's position again.
func (s *suite) testDeleteNewest(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	a, b := newStream("delete-newest"), newStream("after-delete")
	last := mustAppend(t, ctx, store, a, domain.NoStream(), newEvents(2, "a")...)
	res, err := store.DeleteStream(ctx, a, domain.Any())
	if err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	next := mustAppend(t, ctx, store, b, domain.NoStream(), newEvent("b0"))
	if next.Position <= last.Position || (res.Position != 0 && next.Position <= res.Position) {
		t.Fatalf("append after the delete at position %d; the deleted stream ended at %d, its tombstone at %d",
			next.Position, last.Position, res.Position)
	}
	if got := mustLast(t, ctx, store); got < next.Position {
		t.Fatalf("LastPosition = %d, below the newest append at %d", got, next.Position)
	}
}

// testDeleteSubscribe: a live subscription receives the tombstone.
func (s *suite) testDeleteSubscribe(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	a := newStream("delete-sub")
	from := mustLast(t, ctx, store)
	mustAppend(t, ctx, store, a, domain.NoStream(), newEvent("a0"))
	sub, err := store.SubscribeAll(ctx, from)
	if err != nil {
		t.Fatalf("SubscribeAll: %v", err)
	}
	defer sub.Close()
	r := s.newReceiver(t, sub, from, a)
	r.until(ctx, 1) // the event, before the delete
	if _, err := store.DeleteStream(ctx, a, domain.Exact(0)); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	got := r.until(ctx, 2)
	wantTombstone(t, got[1], a)
}

// testDeleteRestart: a deletion is durable like an append.
func (s *suite) testDeleteRestart(t *testing.T) {
	if s.f.Reopen == nil {
		t.Skip("the adapter cannot reopen its data")
	}
	first := s.f.Open(t)
	ctx := testContext(t)
	a := newStream("delete-restart")
	mustAppend(t, ctx, first, a, domain.NoStream(), newEvent("a0"))
	if _, err := first.DeleteStream(ctx, a, domain.Any()); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	second := s.f.Reopen(t, first)
	t.Cleanup(func() { second.Close() })
	_, err := second.ReadStream(ctx, a, 0, 10)
	wantDeleted(t, "ReadStream after reopen", err)
	_, err = second.Append(ctx, a, domain.NoStream(), newEvent("again"))
	wantDeleted(t, "Append after reopen", err)
}
