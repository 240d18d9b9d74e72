package jetstream

import (
	"context"
	"fmt"
	"sync"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/closing"
)

// SubscriptionBatch is about the most events one Recv returns (a message's
// events are never split across two), and bounds, in messages, what a
// subscription buffers ahead of its reader.
const SubscriptionBatch = domain.SubscriptionBatch

// orderedResets is how many times the ordered consumer behind a
// subscription tries to recreate itself (after a reconnect, a missed
// heartbeat or a gap) before the subscription ends.
const orderedResets = 2

// SubscribeAll delivers the events after position after through an ordered
// consumer that starts at the message whose slot holds after: JetStream
// sends the stored messages and then the new ones in sequence order, with
// no gap and no repeat (the client recreates the consumer from its last
// sequence if it ever sees one). Events of the first message at or before
// after are dropped here. ctx bounds the setup; the subscription lasts
// until it or the store is closed.
func (s *Store) SubscribeAll(ctx context.Context, after uint64) (domain.Subscription, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("subscribe after %d: %w", after, err)
	}
	cons, err := s.js.OrderedConsumer(ctx, s.name, natsjs.OrderedConsumerConfig{
		DeliverPolicy: natsjs.DeliverByStartSequencePolicy,
		OptStartSeq:   firstSeq(after),
		// Bounded, so the subscription ends with an error (and its reader
		// subscribes again) rather than recreating the same consumer
		// forever: after a server of the cluster is killed, the others may
		// place that consumer on the dead server until they notice it is
		// gone (nats-server 2.9: three 30 s system heartbeats), and every
		// reset asks for the same name. A new subscription is a new name.
		MaxResetAttempts: orderedResets,
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe after %d: %w", after, translate(ctx, err))
	}
	it, err := cons.Messages(natsjs.PullMaxMessages(SubscriptionBatch))
	if err != nil {
		return nil, fmt.Errorf("subscribe after %d: %w", after, translate(ctx, err))
	}
	life, cancel := context.WithCancel(s.life)
	sub := &subscription{
		store:   s,
		it:      it,
		cancel:  cancel,
		last:    after,
		batches: make(chan []domain.RecordedEvent, SubscriptionBatch),
		ended:   make(chan struct{}),
		closed:  make(chan struct{}),
	}
	go sub.pump(life)
	return sub, nil
}

type subscription struct {
	store  *Store
	it     natsjs.MessagesContext
	cancel context.CancelFunc
	last   uint64 // position of the last event passed on; owned by pump

	batches chan []domain.RecordedEvent // one per message, filled by pump
	ended   chan struct{}               // closed when pump stops
	endErr  error                       // why pump stopped; read after ended

	mu        sync.Mutex // serialises Recv calls
	closed    chan struct{}
	closeOnce sync.Once
}

// pump turns the consumer's blocking Next into a channel, so Recv can also
// wait on its ctx and on Close.
func (sub *subscription) pump(ctx context.Context) {
	defer close(sub.ended)
	for {
		msg, err := sub.it.Next(natsjs.NextContext(ctx))
		if err != nil {
			sub.endErr = err
			return
		}
		meta, err := msg.Metadata()
		if err != nil {
			sub.endErr = err
			return
		}
		m, err := decodeStored(&natsjs.RawStreamMsg{Subject: msg.Subject(), Sequence: meta.Sequence.Stream, Data: msg.Data()})
		if err != nil {
			sub.endErr = err
			return
		}
		var batch []domain.RecordedEvent
		for _, e := range m.recorded() {
			if e.Position > sub.last {
				batch = append(batch, e)
				sub.last = e.Position
			}
		}
		if len(batch) == 0 {
			continue
		}
		select {
		case sub.batches <- batch:
		case <-sub.closed:
			return
		case <-sub.store.done:
			return
		}
	}
}

// Recv returns the next events in log order, waiting for at least one.
func (sub *subscription) Recv(ctx context.Context) ([]domain.RecordedEvent, error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if err := sub.closedErr(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("receive events: %w", err)
	}
	var out []domain.RecordedEvent
	select {
	case out = <-sub.batches:
	case <-sub.ended:
		select {
		case out = <-sub.batches: // sent before the end
		default:
			return nil, sub.endError()
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("receive events: %w", ctx.Err())
	case <-sub.closed:
		return nil, domain.ErrSubscriptionClosed
	case <-sub.store.done:
		return nil, sub.closedErr()
	}
	for len(out) < SubscriptionBatch {
		select {
		case more := <-sub.batches:
			out = append(out, more...)
		default:
			return out, nil
		}
	}
	return out, nil
}

func (sub *subscription) closedErr() error {
	return closing.Err(sub.closed, sub.store.done)
}

func (sub *subscription) endError() error {
	if err := sub.closedErr(); err != nil {
		return err
	}
	return fmt.Errorf("subscription ended: %w", translate(context.Background(), sub.endErr))
}

// Close ends the subscription; a waiting or later Recv returns
// domain.ErrSubscriptionClosed. It is safe to call more than once.
func (sub *subscription) Close() error {
	sub.closeOnce.Do(func() {
		close(sub.closed)
		sub.cancel()
		sub.it.Stop()
		<-sub.ended
	})
	return nil
}
