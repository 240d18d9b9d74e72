package nodebus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/tunnel"
)

// replyGrace is how long past the command's own timeout a Client waits for
// the reply: the Hub answers 504 at the timeout, then records the outcome.
const replyGrace = tunnel.ReplyGrace

var clientSeq atomic.Int64

// replyWire is what a Client's commands announce it reads (replyWireKey).
var replyWire = strconv.Itoa(wireReplyV4)

// Client sends forward commands to another node's Hub over the Bus and
// waits for their replies, which come on its own topic.
type Client struct {
	bus     *Bus
	replyTo string

	mu      sync.Mutex
	waiters map[string]waiter // attempt ID → the caller waiting for it
}

// waiter is a caller waiting for a reply from node.
type waiter struct {
	ch    chan reply // capacity 1
	acked chan struct{}
	once  *sync.Once // closes acked
	node  string
}

// Resending a command: NATS core delivers at most once, and a command
// published while the receiving node's connection moves to another server
// (one died) is lost. A Client sends it again until the node acknowledges
// it, first after ackWait, then at longer intervals up to ackWaitMost; the
// node runs each attempt once (Hub.receivedAgain).
const (
	ackWait     = 500 * time.Millisecond
	ackWaitMost = 2 * time.Second
)

// NewClient subscribes a reply dispatcher on a topic of the Client's own;
// replies are matched to waiting callers by correlation ID (the attempt ID).
func NewClient(bus *Bus) *Client {
	id := fmt.Sprintf("%d.%s", clientSeq.Add(1), watermill.NewShortUUID())
	c := &Client{bus: bus, replyTo: repliesTopicPrefix + id, waiters: map[string]waiter{}}
	bus.addHandler("tunnel.replies."+id, c.replyTo, "", c.dispatch)
	return c
}

// Forward is ForwardTo the tunnel.DefaultNode.
func (c *Client) Forward(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error) {
	return c.ForwardTo(ctx, tunnel.DefaultNode, cmd, nil)
}

// ForwardTo runs one attempt on the Hub of node and returns its outcome
// once that Hub recorded it.
// A failed attempt (502, 503, 504) is an outcome, not an error; errors mean
// the outcome is unknown: ctx ended (*tunnel.TimeoutError on its deadline), no reply
// came in time (*tunnel.TimeoutError), or the Hub failed (*tunnel.ReplyError).
// The encoded command is kept only until node acknowledges it (then taken
// is called, when not nil): past that it is never sent again, and what
// waits for the reply holds nothing of the request.
func (c *Client) ForwardTo(ctx context.Context, node string, cmd domain.ForwardCommand, taken func()) (domain.ForwardOutcome, error) {
	attemptID := cmd.AttemptID
	if attemptID == "" {
		return domain.ForwardOutcome{}, &domain.InvalidInputError{Field: "attempt id", Reason: "empty"}
	}
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = tunnel.DefaultForwardTimeout
	}
	// Past this, cmd is not used (no closure below holds it): its request
	// lives on in payload alone, which is let go once acknowledged.
	payload := encodeCommand(cmd)
	ch := make(chan reply, 1)
	acked := make(chan struct{})
	c.mu.Lock()
	if _, dup := c.waiters[attemptID]; dup {
		c.mu.Unlock()
		return domain.ForwardOutcome{}, fmt.Errorf("forward %s: attempt already in flight", attemptID)
	}
	c.waiters[attemptID] = waiter{ch: ch, acked: acked, once: &sync.Once{}, node: node}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, attemptID)
		c.mu.Unlock()
	}()

	start := time.Now()
	wait := time.NewTimer(timeout + replyGrace)
	defer wait.Stop()
	timedOut := func() error { return &tunnel.TimeoutError{AttemptID: attemptID, Waited: time.Since(start)} }
	ctxErr := func() error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return timedOut()
		}
		return fmt.Errorf("forward %s: %w", attemptID, ctx.Err())
	}

	// A bus drops messages nobody subscribed to yet.
	select {
	case <-c.bus.Running():
	case <-ctx.Done():
		return domain.ForwardOutcome{}, ctxErr()
	case <-wait.C:
		return domain.ForwardOutcome{}, timedOut()
	}
	send := func() error {
		msg := message.NewMessage(watermill.NewUUID(), payload)
		middleware.SetCorrelationID(attemptID, msg)
		msg.Metadata.Set(replyToKey, c.replyTo)
		msg.Metadata.Set(replyWireKey, replyWire)
		return c.bus.pubsub.Publish(commandsTopic(node), msg)
	}
	if err := send(); err != nil {
		return domain.ForwardOutcome{}, &tunnel.PublishError{AttemptID: attemptID, Err: err}
	}

	interval := ackWait
	resend := time.NewTimer(interval)
	defer resend.Stop()
	for {
		select {
		case r := <-ch:
			if r.lost {
				return domain.ForwardOutcome{}, &tunnel.NodeLostError{AttemptID: attemptID, Node: node}
			}
			if r.Error != "" {
				return domain.ForwardOutcome{}, &tunnel.ReplyError{AttemptID: attemptID, Reason: r.Error,
					NotRecorded: r.Outcome.Failure == failureNotRecorded}
			}
			return r.Outcome, nil
		case <-acked:
			resend.Stop()
			acked = nil // heard: no more resends, wait for the outcome
			// The other node holds the command now (and counts it).
			payload = nil
			if taken != nil {
				taken()
			}
		case <-resend.C:
			if payload == nil {
				continue // the timer fired as the acknowledgement came
			}
			// Unheard: lost on the way, or the node is slow to say so;
			// sending again is safe either way.
			if err := send(); err != nil {
				return domain.ForwardOutcome{}, &tunnel.PublishError{AttemptID: attemptID, Err: err}
			}
			interval = min(2*interval, ackWaitMost)
			resend.Reset(interval)
		case <-ctx.Done():
			return domain.ForwardOutcome{}, ctxErr()
		case <-wait.C:
			return domain.ForwardOutcome{}, timedOut()
		}
	}
}

// dispatch hands a reply to the caller waiting for its correlation ID; one
// nobody waits for any more (the caller gave up) is dropped.
func (c *Client) dispatch(msg *message.Message) ([]*message.Message, error) {
	id := middleware.MessageCorrelationID(msg)
	if msg.Metadata.Get(ackKey) != "" {
		c.mu.Lock()
		w, ok := c.waiters[id]
		c.mu.Unlock()
		if ok {
			w.once.Do(func() { close(w.acked) })
		}
		return nil, nil
	}
	c.mu.Lock()
	w, ok := c.waiters[id]
	delete(c.waiters, id)
	c.mu.Unlock()
	if !ok {
		return nil, nil
	}
	r, err := decodeReply(msg.Payload)
	if err != nil {
		r = reply{Error: err.Error()}
	}
	w.ch <- r // buffered, and the waiter was removed: never blocks
	return nil, nil
}

// NodeLost ends the forwards waiting for a reply from node with a
// *tunnel.NodeLostError (its lease lapsed: no reply will come) and returns how
// many it ended. A reply that still comes is dropped.
func (c *Client) NodeLost(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id, w := range c.waiters {
		if w.node == node {
			delete(c.waiters, id)
			w.ch <- reply{lost: true}
			n++
		}
	}
	return n
}
