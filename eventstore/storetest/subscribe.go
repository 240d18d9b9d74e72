package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

func (s *suite) testSubscribe(t *testing.T) {
	t.Run("CatchUpThenLive", s.testCatchUpThenLive)
	t.Run("FromMiddle", s.testSubscribeFromMiddle)
	t.Run("ContextEndsRecv", s.testRecvContext)
	t.Run("CloseEndsRecv", s.testSubscriptionClose)
	t.Run("StoreCloseEndsRecv", s.testStoreCloseEndsSubscription)
}

// testCatchUpThenLive subscribes while other goroutines are appending, so the
// switch from stored to live events happens under load: every event must
// arrive once, in log order, with no hole at the seam.
func (s *suite) testCatchUpThenLive(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	before := mustLast(t, ctx, store)

	const stored, writers, perWriter = 40, 4, 30
	history := newStream("sub-history")
	for i := range stored {
		mustAppend(t, ctx, store, history, domain.Any(), newEvent(fmt.Sprint("stored-", i)))
	}

	streams := []string{history}
	for w := range writers {
		streams = append(streams, newStream(fmt.Sprint("sub-live", w)))
	}
	started := make(chan struct{})
	var once sync.Once
	errc := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func(stream string) {
			defer wg.Done()
			for i := range perWriter {
				if _, err := store.Append(ctx, stream, expectedBefore(i), newEvent(fmt.Sprint(stream, i))); err != nil {
					errc <- fmt.Errorf("append %d to %s: %w", i, stream, err)
					return
				}
				once.Do(func() { close(started) })
			}
		}(streams[1+w])
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("no concurrent append finished")
	}

	sub, err := store.SubscribeAll(ctx, before)
	if err != nil {
		t.Fatalf("SubscribeAll: %v", err)
	}
	defer sub.Close()
	r := s.newReceiver(t, sub, before, streams...)
	total := stored + writers*perWriter
	got := r.until(ctx, total)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	next := map[string]uint64{}
	for _, e := range got {
		if e.Revision != next[e.Stream] {
			t.Fatalf("%s: revision %d arrived when %d was due", e.Stream, e.Revision, next[e.Stream])
		}
		next[e.Stream]++
	}
	checkEvents(t, "subscription versus ReadAll", got, eventData(readOwn(t, ctx, store, before, streams...)))

	// Caught up, the subscription now waits for new events.
	live := newEvent("after catch-up")
	mustAppend(t, ctx, store, history, domain.Exact(stored-1), live)
	got = r.until(ctx, total+1)
	if last := got[len(got)-1]; last.ID != live.ID {
		t.Fatalf("live event = %s, want %s", last.ID, live.ID)
	}
}

func eventData(evs []domain.RecordedEvent) []domain.EventData {
	out := make([]domain.EventData, len(evs))
	for i, e := range evs {
		out[i] = e.EventData
	}
	return out
}

func (s *suite) testSubscribeFromMiddle(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	stream := newStream("middle")
	events := newEvents(10, "middle")
	positions := make([]uint64, len(events))
	for i, e := range events {
		positions[i] = mustAppend(t, ctx, store, stream, domain.Any(), e).Position
	}

	sub, err := store.SubscribeAll(ctx, positions[4])
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r := s.newReceiver(t, sub, positions[4], stream)
	got := r.until(ctx, 5)
	checkEvents(t, "from the middle", got, events[5:])
	if got[0].Position != positions[5] {
		t.Fatalf("first event at %d, want %d", got[0].Position, positions[5])
	}

	live := newEvent("live")
	mustAppend(t, ctx, store, stream, domain.Exact(9), live)
	checkEvents(t, "live after the middle", r.until(ctx, 6)[5:], []domain.EventData{live})
}

func (s *suite) testRecvContext(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	stream := newStream("recv-ctx")
	tests := []struct {
		name string
		recv func(sub domain.Subscription) error
		want error
	}{
		{"already cancelled", func(sub domain.Subscription) error {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := sub.Recv(cctx)
			return err
		}, context.Canceled},
		{"cancelled while waiting", func(sub domain.Subscription) error {
			cctx, cancel := context.WithCancel(ctx)
			errc := recvErr(cctx, sub)
			cancel()
			return waitErr(t, errc)
		}, context.Canceled},
		{"deadline while waiting", func(sub domain.Subscription) error {
			dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			return waitErr(t, recvErr(dctx, sub))
		}, context.DeadlineExceeded},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := mustLast(t, ctx, store)
			sub, err := store.SubscribeAll(ctx, after)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if err := tt.recv(sub); !errors.Is(err, tt.want) {
				t.Fatalf("Recv = %v, want %v", err, tt.want)
			}
			// An ended Recv leaves the subscription usable.
			e := newEvent(fmt.Sprint("after ", tt.name))
			mustAppend(t, ctx, store, stream, expectedBefore(i), e)
			checkEvents(t, "Recv after the ended one", s.newReceiver(t, sub, after, stream).until(ctx, 1), []domain.EventData{e})
		})
	}
}

func (s *suite) testSubscriptionClose(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	sub, err := store.SubscribeAll(ctx, mustLast(t, ctx, store))
	if err != nil {
		t.Fatal(err)
	}
	errc := recvErr(ctx, sub)
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := waitErr(t, errc); !errors.Is(err, domain.ErrSubscriptionClosed) {
		t.Fatalf("blocked Recv after Close = %v, want ErrSubscriptionClosed", err)
	}
	mustAppend(t, ctx, store, newStream("closed"), domain.NoStream(), newEvent("after close"))
	if _, err := sub.Recv(ctx); !errors.Is(err, domain.ErrSubscriptionClosed) {
		t.Fatalf("Recv after Close = %v, want ErrSubscriptionClosed", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func (s *suite) testStoreCloseEndsSubscription(t *testing.T) {
	store := s.open(t)
	ctx := testContext(t)
	sub, err := store.SubscribeAll(ctx, mustLast(t, ctx, store))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	errc := recvErr(ctx, sub)
	if err := store.Close(); err != nil {
		t.Fatalf("store Close: %v", err)
	}
	if err := waitErr(t, errc); !errors.Is(err, domain.ErrSubscriptionClosed) {
		t.Fatalf("Recv after the store closed = %v, want ErrSubscriptionClosed", err)
	}
}
