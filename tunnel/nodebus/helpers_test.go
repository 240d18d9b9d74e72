package nodebus

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/internal/logtest"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// env is two ends of the bus in one process over a real SQLite store: a
// Hub serving the default node's commands, and a Client sending them.
type env struct {
	*logtest.Log
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
	e := &env{Log: &logtest.Log{Store: store, Codec: domain.NewCodec()}, bus: bus}
	e.hub = tunnel.NewHub(tunnel.HubConfig{Recorder: record.New(record.Config{Store: store, Codec: e.Codec, Logger: logger}), Logger: logger, Bodies: bodies})
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
