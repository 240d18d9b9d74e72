package esdb

import (
	"context"
	"fmt"
	"sync"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/closing"
)

// SubscriptionBatch is the most events one Recv returns, and the most a
// subscription buffers: gRPC flow control holds back the server beyond it.
const SubscriptionBatch = domain.SubscriptionBatch

// SubscribeAll subscribes to $all after position after, without system
// events. The server does the catch-up and the switch to live events, with
// no gap and no duplicate. ctx bounds the setup; the subscription lasts
// until it or the store is closed.
func (s *Store) SubscribeAll(ctx context.Context, after uint64) (domain.Subscription, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("subscribe after %d: %w", after, err)
	}
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel) // ctx may still abort the setup
	inner, err := s.client.SubscribeToAll(life, esdb.SubscribeToAllOptions{
		From:   allPosition(after),
		Filter: esdb.ExcludeSystemEventsFilter(),
	})
	if !stop() {
		if err == nil {
			inner.Close()
		}
		return nil, fmt.Errorf("subscribe after %d: %w", after, ctx.Err())
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("subscribe after %d: %w", after, translate(ctx, err))
	}
	sub := &subscription{
		store:  s,
		inner:  inner,
		cancel: cancel,
		after:  after,
		events: make(chan domain.RecordedEvent, SubscriptionBatch),
		ended:  make(chan struct{}),
		closed: make(chan struct{}),
	}
	go sub.pump()
	return sub, nil
}

type subscription struct {
	store  *Store
	inner  *esdb.Subscription
	cancel context.CancelFunc
	after  uint64     // the start: the server begins at the append that holds it
	place  positioner // used by pump only

	events chan domain.RecordedEvent // filled by pump
	ended  chan struct{}             // closed when pump stops
	endErr error                     // why pump stopped; read after ended

	mu        sync.Mutex // serialises Recv calls
	closed    chan struct{}
	closeOnce sync.Once
}

// pump turns the client's blocking Recv into a channel, so Recv can also
// wait on its ctx and on Close.
func (sub *subscription) pump() {
	defer close(sub.ended)
	for {
		ev := sub.inner.Recv()
		switch {
		case ev.SubscriptionDropped != nil:
			sub.endErr = ev.SubscriptionDropped.Error
			return
		case ev.EventAppeared == nil:
			continue // checkpoints and caught-up notices carry no event
		}
		rec := ev.EventAppeared.OriginalEvent()
		if isSystem(rec) {
			continue
		}
		pos, err := sub.place.place(rec.Position.Commit)
		if err != nil {
			sub.endErr = err
			return
		}
		if pos <= sub.after {
			continue
		}
		e, err := toRecorded(rec, pos)
		if err != nil {
			sub.endErr = err
			return
		}
		select {
		case sub.events <- e:
		case <-sub.closed:
			return
		case <-sub.store.done:
			return
		}
	}
}

// Recv returns the next events in $all order, waiting for at least one.
func (sub *subscription) Recv(ctx context.Context) ([]domain.RecordedEvent, error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if err := sub.closedErr(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("receive events: %w", err)
	}
	var first domain.RecordedEvent
	select {
	case first = <-sub.events:
	case <-sub.ended:
		select {
		case first = <-sub.events: // sent before the end
		default:
			return nil, sub.endError(ctx)
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("receive events: %w", ctx.Err())
	case <-sub.closed:
		return nil, domain.ErrSubscriptionClosed
	case <-sub.store.done:
		return nil, sub.closedErr()
	}
	batch := []domain.RecordedEvent{first}
	for len(batch) < SubscriptionBatch {
		select {
		case e := <-sub.events:
			batch = append(batch, e)
		default:
			return batch, nil
		}
	}
	return batch, nil
}

func (sub *subscription) closedErr() error {
	return closing.Err(sub.closed, sub.store.done)
}

func (sub *subscription) endError(ctx context.Context) error {
	if err := sub.closedErr(); err != nil {
		return err
	}
	return fmt.Errorf("subscription dropped: %w", translate(ctx, sub.endErr))
}

// Close drops the subscription; a waiting or later Recv returns
// domain.ErrSubscriptionClosed. It is safe to call more than once.
func (sub *subscription) Close() error {
	sub.closeOnce.Do(func() {
		close(sub.closed)
		sub.inner.Close()
		sub.cancel()
		<-sub.ended
	})
	return nil
}
