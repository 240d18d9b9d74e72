package nodebus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// env is two ends of the bus in one process over a real SQLite store: a
// Hub serving the default node's commands, and a Client sending them.
type env struct {
	store  domain.EventStore
	codec  *domain.Codec
	bus    *Bus
	hub    *tunnel.Hub
	client *Client
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	return newEnvWith(tb, nil)
}

// newEnvWith is newEnv whose Hub counts the requests it holds in bodies.
func newEnvWith(tb testing.TB, bodies tunnel.Bodies) *env {
	tb.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { store.Close() })
	logger := slog.New(slog.DiscardHandler)
	bus, err := NewBus(logger)
	if err != nil {
		tb.Fatalf("new bus: %v", err)
	}
	e := &env{store: store, codec: domain.NewCodec(), bus: bus}
	e.hub = tunnel.NewHub(tunnel.HubConfig{Recorder: record.New(record.Config{Store: store, Codec: e.codec, Logger: logger}), Logger: logger, Bodies: bodies})
	Serve(bus, e.hub)
	e.client = NewClient(bus)
	runBus(tb, bus)
	tb.Cleanup(e.hub.Close) // before the bus stops
	return e
}

// runBus runs bus until the test ends, then closes it.
func runBus(tb testing.TB, bus *Bus) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bus.Run(ctx) }()
	<-bus.Running()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("bus run: %v", err)
		}
		if err := bus.Close(); err != nil {
			tb.Errorf("bus close: %v", err)
		}
	})
}

var seq atomic.Int64

// receive records a delivery to an Endpoint and its first attempt, as
// ingress does before forwarding, and returns the command to forward.
func (e *env) receive(tb testing.TB, endpointID, accountID string) domain.ForwardCommand {
	tb.Helper()
	n := seq.Add(1)
	deliveryID, attemptID := fmt.Sprintf("del-%d", n), fmt.Sprintf("att-%d", n)
	body := []byte("{\"n\":" + fmt.Sprint(n) + "}")
	headers := []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Multi", Value: "a"}, {Name: "X-Multi", Value: "b"}}
	d, err := domain.ReceiveDelivery(deliveryID, endpointID, domain.AddressEndpoint, accountID, domain.CapturedRequest{
		Method: "POST", Target: "/hooks//x?y=%2F", Host: endpointID + ".localhost", Proto: "HTTP/1.1",
		RemoteAddr: "127.0.0.1:1", Headers: headers, Body: body, BodySize: int64(len(body)), Complete: true,
	})
	if err != nil {
		tb.Fatalf("receive: %v", err)
	}
	if err := d.RequestForward(attemptID, endpointID, false); err != nil {
		tb.Fatalf("request forward: %v", err)
	}
	e.appendChanges(tb, domain.DeliveryStream(deliveryID), d.Expected(), d.Changes(), "corr-"+deliveryID)
	return domain.ForwardCommand{
		DeliveryID: deliveryID, AttemptID: attemptID, EndpointID: endpointID, AccountID: accountID,
		Method: "POST", Target: "/hooks//x?y=%2F", Headers: headers, Body: body,
		Timeout: 10 * time.Second, CorrelationID: "corr-" + deliveryID,
	}
}

func (e *env) appendChanges(tb testing.TB, stream string, expected domain.ExpectedRevision, changes []domain.Event, correlation string) {
	tb.Helper()
	data := make([]domain.EventData, len(changes))
	for i, ev := range changes {
		var err error
		if data[i], err = e.codec.Encode(uuid.NewString(), ev, time.Now(), domain.Trace{CorrelationID: correlation}); err != nil {
			tb.Fatalf("encode: %v", err)
		}
	}
	if _, err := e.store.Append(context.Background(), stream, expected, data...); err != nil {
		tb.Fatalf("append to %s: %v", stream, err)
	}
}

// events reads a whole stream; a missing stream reads as empty.
func (e *env) events(tb testing.TB, stream string) []domain.RecordedEvent {
	tb.Helper()
	recs, err := e.store.ReadStream(context.Background(), stream, 0, 1000)
	if errors.Is(err, domain.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		tb.Fatalf("read %s: %v", stream, err)
	}
	return recs
}

func (e *env) decode(tb testing.TB, r domain.RecordedEvent) domain.Event {
	tb.Helper()
	ev, err := e.codec.Decode(r.Type, r.Data)
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	return ev
}

// last returns the newest event of a stream, decoded.
func (e *env) last(tb testing.TB, stream string) (domain.RecordedEvent, domain.Event) {
	tb.Helper()
	recs := e.events(tb, stream)
	if len(recs) == 0 {
		tb.Fatalf("stream %s is empty", stream)
	}
	r := recs[len(recs)-1]
	return r, e.decode(tb, r)
}

// agent attaches a session and answers every command with answer until
// the returned stop is called. Commands it received are sent on got.
func (e *env) agent(tb testing.TB, info tunnel.SessionInfo, answer func(domain.ForwardCommand) (domain.ForwardOutcome, bool)) (got <-chan domain.ForwardCommand, stop func()) {
	tb.Helper()
	return agentOn(tb, e.hub, info, answer)
}

// agentOn is agent on any Hub.
func agentOn(tb testing.TB, hub *tunnel.Hub, info tunnel.SessionInfo, answer func(domain.ForwardCommand) (domain.ForwardOutcome, bool)) (got <-chan domain.ForwardCommand, stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	work, err := hub.Attach(ctx, info)
	if err != nil {
		cancel()
		tb.Fatalf("attach: %v", err)
	}
	seen := make(chan domain.ForwardCommand, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cmd := range work {
			select {
			case seen <- cmd:
			default: // a benchmark's agent: nobody reads what it saw
			}
			out, ok := answer(cmd)
			if !ok {
				continue
			}
			out.AttemptID = cmd.AttemptID
			// A session being stopped may lose the race with its detach.
			if err := hub.Complete(context.Background(), info.AccountID, info.AgentID, out); err != nil && ctx.Err() == nil {
				tb.Errorf("complete %s: %v", cmd.AttemptID, err)
			}
		}
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done // the work channel closes once the session is detached
	}
	tb.Cleanup(stop)
	return seen, stop
}

func okAnswer(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
	return domain.ForwardOutcome{
		Status:     200,
		Headers:    []domain.Header{{Name: "Set-Cookie", Value: "a=1"}, {Name: "Set-Cookie", Value: "b=2"}},
		Body:       []byte("pong " + cmd.AttemptID),
		DurationMs: 7,
	}, true
}
