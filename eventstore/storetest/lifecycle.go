package storetest

import (
	"errors"
	"testing"

	"github.com/relayhq/relay/domain"
)

func (s *suite) testLifecycle(t *testing.T) {
	t.Run("Restart", s.testRestart)
	t.Run("Close", s.testClose)
}

// testRestart checks that what was acknowledged survives a close and reopen,
// byte for byte, and that the reopened store carries on where it stopped.
func (s *suite) testRestart(t *testing.T) {
	if s.f.Reopen == nil {
		t.Skip("the adapter cannot reopen its data")
	}
	first := s.open(t)
	ctx := testContext(t)
	before := mustLast(t, ctx, first)
	a, b := newStream("restart-a"), newStream("restart-b")
	mustAppend(t, ctx, first, a, domain.NoStream(), newEvents(3, "a")...)
	retried := newEvent("b0")
	mustAppend(t, ctx, first, b, domain.NoStream(), retried)
	mustAppend(t, ctx, first, a, domain.Exact(2), newEvent("a3"))
	wantAll := readOwn(t, ctx, first, before, a, b)
	wantLast := mustLast(t, ctx, first)

	second := s.f.Reopen(t, first)
	t.Cleanup(func() {
		if err := second.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if s.f.Guarantees.EmptyOnOpen {
		if last := mustLast(t, ctx, second); last != wantLast {
			t.Fatalf("LastPosition after reopen = %d, want %d", last, wantLast)
		}
	}
	gotAll := readOwn(t, ctx, second, before, a, b)
	checkEvents(t, "ReadAll after reopen", gotAll, eventData(wantAll))
	for i := range wantAll {
		g, w := gotAll[i], wantAll[i]
		if g.Stream != w.Stream || g.Revision != w.Revision || g.Position != w.Position {
			t.Fatalf("event %d at %s@%d position %d, was %s@%d position %d", i, g.Stream, g.Revision, g.Position, w.Stream, w.Revision, w.Position)
		}
	}

	// A retry from before the restart is still recognised, and new appends
	// continue the stream and the log.
	if res, err := second.Append(ctx, b, domain.NoStream(), retried); err != nil || res.NextRevision != 0 {
		t.Fatalf("retry after reopen = %+v, %v", res, err)
	}
	res := mustAppend(t, ctx, second, a, domain.Exact(3), newEvent("a4"))
	if res.NextRevision != 4 || res.Position <= wantLast {
		t.Fatalf("append after reopen = %+v, want revision 4 after position %d", res, wantLast)
	}
	if s.f.Guarantees.GapFreePositions && s.f.Guarantees.EmptyOnOpen && res.Position != wantLast+1 {
		t.Fatalf("append after reopen at %d, want %d", res.Position, wantLast+1)
	}
	if _, err := second.Append(ctx, a, domain.Exact(3), newEvent("stale")); !errors.Is(err, domain.ErrWrongExpectedRevision) {
		t.Fatalf("stale append after reopen = %v, want a conflict", err)
	}
}

func (s *suite) testClose(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	stream := newStream("close")
	mustAppend(t, ctx, store, stream, domain.NoStream(), newEvent("before close"))
	if err := store.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := store.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := store.Append(ctx, stream, domain.Any(), newEvent("after close")); err == nil {
		t.Fatal("Append after Close succeeded")
	}
	if _, err := store.SubscribeAll(ctx, 0); err == nil {
		t.Fatal("SubscribeAll after Close succeeded")
	}
}
