package tunnel

import (
	"context"
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
)

// A Hub without a bus serves the sessions it holds: nothing is encoded,
// and the outcome is recorded before Forward returns.
func TestHubForwardWithoutBus(t *testing.T) {
	e := newEnv(t)
	e.hub = NewHub(HubConfig{Recorder: record.New(record.Config{Store: e.store, Codec: e.codec})}, nil)
	t.Cleanup(e.hub.Close)
	e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc", Target: "localhost:3000"}, okAnswer)

	cmd := e.receive(t, "ep", "acc")
	out, err := e.hub.Forward(t.Context(), cmd)
	if err != nil || out.Status != 200 {
		t.Fatalf("forward = %+v, %v; want 200", out, err)
	}
	rec, ev := e.last(t, domain.DeliveryStream(cmd.DeliveryID))
	if _, ok := ev.(domain.ForwardResponded); !ok || out.Position != rec.Position {
		t.Errorf("last event %T at %d, outcome position %d", ev, rec.Position, out.Position)
	}

	out, err = e.hub.Forward(t.Context(), e.receive(t, "other", "acc"))
	if err != nil || out.Status != 503 || out.Error != "no agent connected" {
		t.Errorf("forward without agent = %+v, %v; want 503", out, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	e.agent(t, SessionInfo{AgentID: "slow", EndpointID: "slow", AccountID: "acc"}, never)
	var te *TimeoutError
	if _, err := e.hub.Forward(ctx, e.receive(t, "slow", "acc")); !errors.As(err, &te) {
		t.Errorf("forward past its deadline = %v, want *TimeoutError", err)
	}
}

// Close ends attempts in flight with 503, recorded.
func TestHubCloseFailsAttemptsInFlight(t *testing.T) {
	e := newEnv(t)
	got, _ := e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, never)
	cmd := e.receive(t, "ep", "acc")
	res := make(chan domain.ForwardOutcome, 1)
	go func() {
		out, _ := e.hub.Forward(context.Background(), cmd)
		res <- out
	}()
	recv(t, got)
	e.hub.Close()
	if out := <-res; out.Status != 503 || out.Error != "relay shutting down" {
		t.Fatalf("outcome %+v, want 503 relay shutting down", out)
	}
	if _, ev := e.last(t, domain.DeliveryStream(cmd.DeliveryID)); ev.(domain.ForwardFailed).Status != 503 {
		t.Errorf("last event %+v", ev)
	}
}

// A Hub whose Endpoint's sessions are on another node sends the command
// to that node's topic; the reply comes back on the sender's own topic.
func TestHubForwardCrossesToTheNodeHoldingTheSession(t *testing.T) {
	e := newEnv(t) // its Hub is the DefaultNode's and holds the agent
	e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	located := 0
	front := NewHub(HubConfig{
		Recorder: record.New(record.Config{Store: e.store, Codec: e.codec}), Node: "front",
		Remote: NewClient(e.bus),
		Locate: func(endpointID string) (string, bool) { located++; return DefaultNode, endpointID == "ep" },
	}, e.bus)
	t.Cleanup(front.Close)

	cmd := e.receive(t, "ep", "acc")
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
	front := NewHub(HubConfig{
		Recorder: record.New(record.Config{Store: e.store, Codec: e.codec}), Node: "front",
		Remote: NewClient(e.bus),
		Locate: func(string) (string, bool) { return "gone", true }, // no Hub takes its commands
	}, e.bus)
	t.Cleanup(front.Close)

	cmd := e.receive(t, "ep", "acc")
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
	if r.err != nil || r.out.Status != 503 || !strings.HasPrefix(r.out.Error, NodeLost) || r.out.Position == 0 {
		t.Fatalf("forward to a lost node = %+v, %v; want a recorded 503 %q", r.out, r.err, NodeLost)
	}
	if _, ev := e.last(t, domain.DeliveryStream(cmd.DeliveryID)); ev.(domain.ForwardFailed).Status != 503 {
		t.Errorf("last event %+v", ev)
	}
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
			e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
				calls.Add(1)
				return okAnswer(cmd)
			})
			lossy := &lossyBus{pubSub: e.bus.pubsub, dropFirst: tt.dropFirst, twice: tt.twice}
			e.bus.pubsub = lossy
			front := NewHub(HubConfig{
				Recorder: record.New(record.Config{Store: e.store, Codec: e.codec}), Node: "front",
				Remote: NewClient(e.bus),
				Locate: func(string) (string, bool) { return DefaultNode, true },
			}, e.bus)
			t.Cleanup(front.Close)

			cmd := e.receive(t, "ep", "acc")
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
