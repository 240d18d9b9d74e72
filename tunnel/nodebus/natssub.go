package nodebus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
)

// PendingBytes is how much each of a node's bus subscriptions may hold
// that its handler has not taken yet, for a node whose body budget
// (--proxy-body-budget) is bodyBudget: every body a node sends on the bus
// is counted in its own budget until acknowledged or answered (nodes run
// with the same one), and the bus holds as much again for what the budget
// does not count (a message's headers and fields, and commands sent again
// while unacknowledged). nats.go's default, 64 MiB, was one account's
// share of the default budget.
func PendingBytes(bodyBudget int64) int64 { return 2 * bodyBudget }

// natsSubscriber is Watermill's subscriber on NATS core (watermill-nats's,
// without JetStream), which also sets each subscription's pending limits:
// watermill-nats leaves nats.go's defaults and hides the subscription.
// A message is handed on only once the one before was acknowledged, so
// what a slow handler has not taken waits in the subscription, within
// pendingBytes, not in goroutines.
type natsSubscriber struct {
	conn         *nats.Conn
	pendingBytes int
	marshaler    wmnats.NATSMarshaler

	mu      sync.Mutex
	closed  bool
	subs    []*nats.Subscription
	closing chan struct{}
	outputs sync.WaitGroup
}

func newNATSSubscriber(conn *nats.Conn, pendingBytes int64) *natsSubscriber {
	return &natsSubscriber{conn: conn, pendingBytes: int(pendingBytes), closing: make(chan struct{})}
}

// Subscribe subscribes to topic's subject; the channel closes once ctx is
// done or the subscriber closed.
func (s *natsSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("subscribe: subscriber closed")
	}
	out := make(chan *message.Message)
	var sending sync.RWMutex // held while a message is handed on; closing out takes it
	finished := false        // out is closed
	sub, err := s.conn.Subscribe(topic, func(m *nats.Msg) {
		sending.RLock()
		defer sending.RUnlock()
		if !finished {
			s.deliver(ctx, m, out)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", topic, err)
	}
	// The count is left unlimited: memory is bounded by the bytes, and a
	// count would only add a second way to drop messages.
	if err := sub.SetPendingLimits(-1, s.pendingBytes); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("set pending limits of %s: %w", topic, err)
	}
	s.subs = append(s.subs, sub)
	s.outputs.Add(1)
	go func() {
		defer s.outputs.Done()
		select {
		case <-s.closing:
		case <-ctx.Done():
		}
		_ = sub.Unsubscribe()
		// deliver gives up on s.closing or ctx: out is closed once no
		// message is being handed on.
		sending.Lock()
		finished = true
		close(out)
		sending.Unlock()
	}()
	return out, nil
}

// deliver hands m on and waits until it is acknowledged (or refused: NATS
// core sends nothing again).
func (s *natsSubscriber) deliver(ctx context.Context, m *nats.Msg, out chan<- *message.Message) {
	msg, err := s.marshaler.Unmarshal(m)
	if err != nil {
		return // not a Watermill message: nobody on the bus sent it
	}
	msg.SetContext(ctx)
	select {
	case out <- msg:
	case <-s.closing:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-msg.Acked():
	case <-msg.Nacked():
	case <-s.closing:
	case <-ctx.Done():
	}
}

// Close ends every subscription, then drains the connection.
func (s *natsSubscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	s.outputs.Wait()
	if err := s.conn.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("drain bus connection: %w", err)
	}
	return nil
}

// dropped is how many messages the subscriptions dropped for want of
// room (nats.ErrSlowConsumer), for tests.
func (s *natsSubscriber) dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sub := range s.subs {
		if d, err := sub.Dropped(); err == nil {
			n += d
		}
	}
	return n
}

// slowConsumerLogger reports a subscription that dropped messages: a
// command is sent again until acknowledged, but a dropped reply leaves its
// caller waiting until its timeout.
func slowConsumerLogger(logger *slog.Logger) nats.ErrHandler {
	return func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if !errors.Is(err, nats.ErrSlowConsumer) || sub == nil {
			logger.Error("bus connection error", "error", err)
			return
		}
		msgs, bytes, _ := sub.Pending()
		dropped, _ := sub.Dropped()
		logger.Error("bus subscription full: messages dropped", "subject", sub.Subject,
			"pending_msgs", msgs, "pending_bytes", bytes, "dropped", dropped)
	}
}
