package sqlite

import (
	"context"
	"fmt"
	"sync"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/closing"
)

// SubscriptionBatch is the most events one Recv returns. A subscription
// holds only its position, never the events behind it, so its memory is
// this batch however long the log grows.
const SubscriptionBatch = domain.SubscriptionBatch

// SubscribeAll returns a subscription to every event after position after.
// Catch-up and live delivery are one loop: Recv reads from the database
// after the last position it returned (or from the tail of recent commits
// kept in memory, when it holds that position), and when nothing is there it
// waits for the writer's next commit. Events from the tail share their Data
// with every other subscriber: callers must not modify it. Because positions are assigned in commit
// order by a single writer, everything at or below the last committed
// position is visible, so there is no gap and no duplicate at the seam.
func (s *Store) SubscribeAll(ctx context.Context, after uint64) (domain.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("subscribe after %d: %w", after, err)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("subscribe after %d: %w", after, ErrClosed)
	}
	return &subscription{store: s, after: after, closed: make(chan struct{})}, nil
}

type subscription struct {
	store *Store

	mu    sync.Mutex // serialises Recv calls
	after uint64     // position of the last event returned

	closed    chan struct{}
	closeOnce sync.Once
}

// Recv returns the next events in position order, waiting until there is at
// least one. It returns ctx's error when ctx ends first, and
// domain.ErrSubscriptionClosed once the subscription or the store is closed.
func (sub *subscription) Recv(ctx context.Context) ([]domain.RecordedEvent, error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for {
		if err := sub.ended(); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("receive events after %d: %w", sub.after, err)
		}
		changed := sub.store.changed()
		if sub.store.last.Load() > sub.after {
			if evs, ok := sub.store.tail.after(sub.after, SubscriptionBatch); ok {
				sub.after = evs[len(evs)-1].Position
				return evs, nil
			}
			evs, err := sub.store.readAllForSubscription(ctx, sub.after, SubscriptionBatch)
			if err != nil {
				if endErr := sub.ended(); endErr != nil {
					return nil, endErr
				}
				return nil, fmt.Errorf("receive events after %d: %w", sub.after, err)
			}
			if len(evs) > 0 {
				sub.after = evs[len(evs)-1].Position
				return evs, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("receive events after %d: %w", sub.after, ctx.Err())
		case <-sub.closed:
		case <-sub.store.done:
		}
	}
}

func (sub *subscription) ended() error {
	return closing.Err(sub.closed, sub.store.done)
}

// Close ends the subscription: a Recv waiting now or called later returns
// domain.ErrSubscriptionClosed. It is safe to call more than once.
func (sub *subscription) Close() error {
	sub.closeOnce.Do(func() { close(sub.closed) })
	return nil
}
