package tunnel

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/internal/logtest"
	"github.com/relayhq/relay/record"
)

// env is a running tunnel over a real SQLite store.
type env struct {
	*logtest.Log
	hub *Hub
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { store.Close() })
	return newEnvWithStore(tb, store)
}

func newEnvWithStore(tb testing.TB, store domain.EventStore) *env {
	tb.Helper()
	logger := slog.New(slog.DiscardHandler)
	e := &env{Log: &logtest.Log{Store: store, Codec: domain.NewCodec()}}
	e.hub = NewHub(HubConfig{Recorder: record.New(record.Config{Store: store, Codec: e.Codec, Logger: logger}), Logger: logger})
	tb.Cleanup(e.hub.Close)
	return e
}

// agent attaches a session and answers every command with answer until
// the returned stop is called. Commands it received are sent on got.
func (e *env) agent(tb testing.TB, info SessionInfo, answer func(domain.ForwardCommand) (domain.ForwardOutcome, bool)) (got <-chan domain.ForwardCommand, stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	work, err := e.hub.Attach(ctx, info)
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
			// A session being stopped may lose the race with its detach
			// (a copy still in flight when a test ends): only a live
			// session's answer must be taken.
			if err := e.hub.Complete(context.Background(), info.AccountID, info.AgentID, out); err != nil && ctx.Err() == nil {
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

func never(domain.ForwardCommand) (domain.ForwardOutcome, bool) {
	return domain.ForwardOutcome{}, false
}

// checkNoLeak fails when goroutines started during a test outlive it.
func checkNoLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for runtime.NumGoroutine() > before {
		select {
		case <-deadline:
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		case <-tick.C:
		}
	}
}

func recv(tb testing.TB, ch <-chan domain.ForwardCommand) domain.ForwardCommand {
	tb.Helper()
	select {
	case cmd := <-ch:
		return cmd
	case <-time.After(10 * time.Second):
		tb.Fatal("the agent got no work")
		return domain.ForwardCommand{}
	}
}

// forwardInBackground forwards cmd on a goroutine of its own and hands its
// outcome over; an error fails the test.
func (e *env) forwardInBackground(t *testing.T, cmd domain.ForwardCommand) <-chan domain.ForwardOutcome {
	t.Helper()
	res := make(chan domain.ForwardOutcome, 1)
	go func() {
		out, err := e.hub.Forward(context.Background(), cmd)
		if err != nil {
			t.Errorf("forward %s: %v", cmd.AttemptID, err)
		}
		res <- out
	}()
	return res
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
