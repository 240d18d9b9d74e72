package nodebus

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// A Hub whose Endpoint's sessions are on another node sends the command
// to that node's topic; the reply comes back on the sender's own topic.
func TestHubForwardCrossesToTheNodeHoldingTheSession(t *testing.T) {
	e := newEnv(t) // its Hub is the DefaultNode's and holds the agent
	e.agent(t, tunnel.SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	located := 0
	front := tunnel.NewHub(tunnel.HubConfig{
		Recorder: record.New(record.Config{Store: e.Store, Codec: e.Codec}), Node: "front",
		Remote: NewClient(e.bus),
		Locate: func(endpointID string) (string, bool) { located++; return tunnel.DefaultNode, endpointID == "ep" },
	})
	t.Cleanup(front.Close)

	cmd := e.Receive(t, "ep", "acc")
	out, err := front.Forward(t.Context(), cmd)
	if err != nil || out.Status != 200 || string(out.Body) != "pong "+cmd.AttemptID {
		t.Fatalf("forward through the other node = %+v, %v", out, err)
	}
	if located != 1 {
		t.Errorf("Locate called %d times, want 1", located)
	}
	if out.Position == 0 {
		t.Error("the outcome's log position did not cross back")
	}
}

// A command sent to a node whose lease lapses before it replies is settled
// by the sender's node: 503 "relay node lost", recorded once, answered.
func TestForwardToALostNodeIsSettledHere(t *testing.T) {
	e := newEnv(t)
	front := tunnel.NewHub(tunnel.HubConfig{
		Recorder: record.New(record.Config{Store: e.Store, Codec: e.Codec}), Node: "front",
		Remote: NewClient(e.bus),
		Locate: func(string) (string, bool) { return "gone", true }, // no Hub takes its commands
	})
	t.Cleanup(front.Close)

	cmd := e.Receive(t, "ep", "acc")
	out, err := forwardToLost(t, front, cmd)
	if err != nil || out.Status != 503 || !strings.HasPrefix(out.Error, tunnel.NodeLost) || out.Position == 0 {
		t.Fatalf("forward to a lost node = %+v, %v; want a recorded 503 %q", out, err, tunnel.NodeLost)
	}
	if _, ev := e.Last(t, domain.DeliveryStream(cmd.DeliveryID)); ev.(domain.ForwardFailed).Status != 503 {
		t.Errorf("last event %+v", ev)
	}

	// A settlement the log does not take is an outcome not recorded: the
	// sender is told the relay could not record it, not that no answer came.
	ghost := domain.ForwardCommand{DeliveryID: "ghost", AttemptID: "ghost-1", EndpointID: "ep", AccountID: "acc", Method: "GET", Target: "/"}
	if _, err := forwardToLost(t, front, ghost); !errors.Is(err, domain.ErrOutcomeNotRecorded) {
		t.Errorf("forward to a lost node, its settlement refused = %v, want an outcome not recorded", err)
	}
}

// forwardToLost forwards cmd through front to node "gone", declares that
// node lost once the forward waits for it, and returns what the forward got.
func forwardToLost(t *testing.T, front *tunnel.Hub, cmd domain.ForwardCommand) (domain.ForwardOutcome, error) {
	t.Helper()
	type result struct {
		out domain.ForwardOutcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := front.Forward(t.Context(), cmd)
		done <- result{out, err}
	}()
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if front.NodeLost("gone") == 0 {
			return errors.New("the forward is not waiting for node gone yet")
		}
		return nil
	})
	r := <-done
	return r.out, r.err
}

// lossyBus is the bus's Pub/Sub with commands lost or doubled on the way,
// as NATS core may lose one while a node's connection moves to another
// server: the first dropFirst commands are dropped, every one is sent
// twice when twice.
type lossyBus struct {
	pubSub
	mu        sync.Mutex
	dropFirst int
	twice     bool
	dropped   int
}

func (l *lossyBus) Publish(topic string, msgs ...*message.Message) error {
	if !strings.HasPrefix(topic, commandsTopicPrefix) {
		return l.pubSub.Publish(topic, msgs...)
	}
	l.mu.Lock()
	drop := l.dropped < l.dropFirst
	if drop {
		l.dropped++
	}
	l.mu.Unlock()
	if drop {
		return nil
	}
	if l.twice {
		for _, m := range msgs {
			if err := l.pubSub.Publish(topic, m.Copy()); err != nil {
				return err
			}
		}
	}
	return l.pubSub.Publish(topic, msgs...)
}

// A command lost on the bus is sent again until the node holding the
// session acknowledges it, and a command that arrives twice runs once: the
// local process sees each attempt once, and the sender gets its answer
// instead of waiting out the forward timeout.
func TestLostOrDoubledCommandsRunOnce(t *testing.T) {
	for _, tt := range []struct {
		name      string
		dropFirst int
		twice     bool
	}{
		{"the first two sends lost", 2, false},
		{"every send doubled", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			var calls atomic.Int32
			e.agent(t, tunnel.SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
				calls.Add(1)
				return okAnswer(cmd)
			})
			lossy := &lossyBus{pubSub: e.bus.pubsub, dropFirst: tt.dropFirst, twice: tt.twice}
			e.bus.pubsub = lossy
			front := tunnel.NewHub(tunnel.HubConfig{
				Recorder: record.New(record.Config{Store: e.Store, Codec: e.Codec}), Node: "front",
				Remote: NewClient(e.bus),
				Locate: func(string) (string, bool) { return tunnel.DefaultNode, true },
			})
			t.Cleanup(front.Close)

			cmd := e.Receive(t, "ep", "acc")
			out, err := front.Forward(t.Context(), cmd)
			if err != nil || out.Status != 200 || string(out.Body) != "pong "+cmd.AttemptID {
				t.Fatalf("forward = %+v, %v", out, err)
			}
			if lossy.dropped != tt.dropFirst {
				t.Errorf("%d sends dropped, want %d", lossy.dropped, tt.dropFirst)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("the local process got the attempt %d times, want once", n)
			}
		})
	}
}

// An attempt whose delivery the log does not hold cannot be recorded: the
// other node answers a *ReplyError, not an outcome, marked as such.
func TestForwardOfUnrecordedDeliveryFails(t *testing.T) {
	e := newEnv(t)
	cmd := domain.ForwardCommand{DeliveryID: "ghost", AttemptID: "ghost-1", EndpointID: "ep", AccountID: "acc", Method: "GET", Target: "/"}
	_, err := e.client.Forward(t.Context(), cmd)
	var re *tunnel.ReplyError
	if !errors.As(err, &re) || re.AttemptID != "ghost-1" {
		t.Fatalf("forward = %v, want a *ReplyError for ghost-1", err)
	}
	// The mark crosses the bus: the sending node answers its sender that
	// the outcome could not be recorded.
	if !errors.Is(err, domain.ErrOutcomeNotRecorded) {
		t.Errorf("forward = %v, want it marked as an outcome not recorded", err)
	}
}
