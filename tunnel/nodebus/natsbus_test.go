package nodebus

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/logtest"
	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// natsNode is one node's Hub on a NATS bus over a shared store; locate
// names where the sessions of any Endpoint are.
func natsNode(t *testing.T, url, node string, store domain.EventStore, locate string) *env {
	t.Helper()
	bus, err := NewNATSBus(nil, []string{url}, "test "+node, PendingBytes(ingress.DefaultProxyBodyBudget))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{Log: &logtest.Log{Store: store, Codec: domain.NewCodec()}, bus: bus}
	cfg := tunnel.HubConfig{Recorder: record.New(record.Config{Store: store, Codec: e.Codec, Node: node}), Node: node}
	if locate != "" {
		cfg.Remote = NewClient(bus)
		cfg.Locate = func(string) (string, bool) { return locate, true }
	}
	e.hub = tunnel.NewHub(cfg)
	Serve(bus, e.hub)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bus.Run(ctx) }()
	<-bus.Running()
	t.Cleanup(func() {
		e.hub.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bus run: %v", err)
		}
		if err := bus.Close(); err != nil {
			t.Errorf("bus close: %v", err)
		}
	})
	return e
}

// On the NATS bus a node's command reaches the node holding the session,
// several at once (a slow forward does not hold up the next), and each
// outcome comes back to its caller.
func TestNATSBusCarriesForwardsBetweenNodes(t *testing.T) {
	url := natstest.Start(t).URL()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	back := natsNode(t, url, "back", store, "")
	front := natsNode(t, url, "front", store, "back")

	release := make(chan struct{})
	slowAnswer := func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
		if cmd.Method == "POST" {
			go func() {
				<-release
				out, _ := okAnswer(cmd)
				out.AttemptID = cmd.AttemptID
				_ = back.hub.Complete(context.Background(), "acc", "a", out)
			}()
			return domain.ForwardOutcome{}, false
		}
		return okAnswer(cmd)
	}
	back.agent(t, tunnel.SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, slowAnswer)

	slow := back.Receive(t, "ep", "acc") // POST: held until released
	slowDone := make(chan domain.ForwardOutcome, 1)
	go func() {
		out, err := front.hub.Forward(t.Context(), slow)
		if err != nil {
			t.Errorf("slow forward: %v", err)
		}
		slowDone <- out
	}()
	fast := back.Receive(t, "ep", "acc")
	fast.Method = "GET"
	out, err := front.hub.Forward(t.Context(), fast)
	if err != nil || out.Status != 200 || string(out.Body) != "pong "+fast.AttemptID || out.Position == 0 {
		t.Fatalf("forward over NATS while another is in flight = %+v, %v", out, err)
	}
	close(release)
	if out := <-slowDone; out.Status != 200 || string(out.Body) != "pong "+slow.AttemptID {
		t.Fatalf("slow forward = %+v", out)
	}
	if n := front.hub.Connected("ep"); n != 0 {
		t.Errorf("front counts %d sessions without a directory of the others", n)
	}
}

// A command larger than the NATS servers carry never leaves the node: the
// attempt is settled 503 "relay node unreachable" and recorded, and the
// node holding the session never sees it.
func TestNATSBusCommandTooLarge(t *testing.T) {
	url := natstest.Start(t).URL()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	back := natsNode(t, url, "back", store, "")
	front := natsNode(t, url, "front", store, "back")
	got, _ := back.agent(t, tunnel.SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)

	cmd := back.Receive(t, "ep", "acc")
	cmd.Body = make([]byte, front.bus.MaxPayload()+1)
	out, err := front.hub.Forward(t.Context(), cmd)
	if err != nil || out.Status != 503 || !strings.HasPrefix(out.Error, tunnel.NodeUnreachable) || out.Position == 0 {
		t.Fatalf("forward of a command larger than the bus carries = %+v, %v; want a recorded 503 %q", out, err, tunnel.NodeUnreachable)
	}
	if _, ev := back.Last(t, domain.DeliveryStream(cmd.DeliveryID)); ev.(domain.ForwardFailed).Status != 503 {
		t.Errorf("last event %+v", ev)
	}
	select {
	case c := <-got:
		t.Errorf("the agent got the command %s", c.AttemptID)
	default:
	}
}

// A burst of commands the body budget admits (64 accounts', each within
// its share and its small share of the reserve, the whole budget in all)
// fits in the subscription of a node whose
// handler is stalled: none is dropped, and the next body is refused by
// the budget, before it reaches NATS. nats.go's default pending limit
// (64 MiB) dropped the part of such a burst past it.
func TestNATSBusKeepsABurstTheBudgetAdmits(t *testing.T) {
	const budget, body = 72 << 20, 1020 << 10 // a 1 MiB message carries the body and its command
	url := natstest.Start(t).URL()
	newBus := func(name string) *Bus {
		t.Helper()
		bus, err := NewNATSBus(nil, []string{url}, name, PendingBytes(budget))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bus.Close() })
		return bus
	}
	back, front := newBus("back"), newBus("front")

	release := make(chan struct{})
	var got atomic.Int64
	back.addHandler("stalled", commandsTopic("back"), "", func(*message.Message) ([]*message.Message, error) {
		<-release // the first holds up every other in the subscription
		got.Add(1)
		return nil, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- back.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-back.Running()

	bodies := ingress.NewBodyBudget(budget, body)
	cmd := domain.ForwardCommand{AttemptID: "a", Method: "POST", Target: "/", Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}},
		Body: make([]byte, body), Timeout: 10 * time.Second}
	payload := encodeCommand(cmd)
	sent := 0
	for i := 0; ; i++ {
		if !bodies.Reserve(fmt.Sprintf("acc-%d", i%64), body) {
			break // the budget refuses it: it never reaches NATS
		}
		msg := message.NewMessage(watermill.NewUUID(), payload)
		msg.Metadata.Set(replyToKey, "nobody")
		if err := front.pubsub.Publish(commandsTopic("back"), msg); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	if sent*body <= 64<<20 {
		t.Fatalf("the burst is %d bytes, within nats.go's default pending limit: it shows nothing", sent*body)
	}
	// A marker after the burst, on the same connection: once back reads
	// it, it has read (kept or dropped) every command before it.
	marker := make(chan struct{})
	sub, err := back.Conn().Subscribe("test.marker", func(*nats.Msg) { close(marker) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := back.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	if err := front.Conn().Publish("test.marker", nil); err != nil {
		t.Fatal(err)
	}
	<-marker
	close(release)
	testwait.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if n := got.Load(); n != int64(sent) {
			return fmt.Errorf("the handler took %d of %d commands", n, sent)
		}
		return nil
	})
	if d := back.pubsub.(natsPubSub).dropped(); d != 0 {
		t.Errorf("%d commands dropped", d)
	}
	t.Logf("burst of %d commands, %d MiB, admitted by a %d MiB budget", sent, sent*body>>20, budget>>20)
}
