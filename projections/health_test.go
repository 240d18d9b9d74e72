package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/internal/testwait"
)

// logBuffer collects a logger's output for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// faultyStore is the real store whose subscriptions fail while broken is
// set: a fault Run must survive and recover from.
type faultyStore struct {
	domain.EventStore
	broken atomic.Bool
}

var errFault = errors.New("injected read fault")

func (f *faultyStore) SubscribeAll(ctx context.Context, after uint64) (domain.Subscription, error) {
	if f.broken.Load() {
		return nil, errFault
	}
	sub, err := f.EventStore.SubscribeAll(ctx, after)
	if err != nil {
		return nil, err
	}
	return faultySub{Subscription: sub, f: f}, nil
}

type faultySub struct {
	domain.Subscription
	f *faultyStore
}

func (s faultySub) Recv(ctx context.Context) ([]domain.RecordedEvent, error) {
	evs, err := s.Subscription.Recv(ctx)
	if s.f.broken.Load() {
		return nil, errFault
	}
	return evs, err
}

// TestRunRetriesUntilTheFaultClears: a failing batch does not stop Run. The
// failure is logged once and shown by Health; WaitFor keeps waiting and
// CatchUp gives up with the cause; once the fault clears the views catch
// up by themselves and the recovery is logged.
func TestRunRetriesUntilTheFaultClears(t *testing.T) {
	e := newEnv(t, Options{})
	faulty := &faultyStore{EventStore: e.store}
	var logs logBuffer
	v, err := Open(e.ctx, filepath.Join(e.dir, "faulty.db"), faulty, Options{Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	e.run(v)
	e.waitFor(v, e.do(e.newInspector(e.ctx, "before", time.Hour, t0)))

	faulty.broken.Store(true)
	pos := e.do(e.newInspector(e.ctx, "during", time.Hour, t0))
	testwait.CheckFor(t, waitTimeout, 5*time.Millisecond, func() error {
		h := v.Health()
		if !errors.Is(h.Err, errFault) || h.Retries < 3 || h.FailingSince.IsZero() {
			return fmt.Errorf("health %+v, want a few failed tries", h)
		}
		return nil
	})
	if err := v.CatchUp(e.ctx, pos); !errors.Is(err, errFault) {
		t.Errorf("CatchUp while failing: %v, want the fault", err)
	}
	short, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
	defer cancel()
	if err := v.WaitFor(short, pos); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFor while failing: %v, want its deadline", err)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d error lines for one fault, want 1:\n%s", n, logs.String())
	}

	faulty.broken.Store(false)
	e.waitFor(v, pos)
	if _, err := v.Inspector(e.ctx, "during"); err != nil {
		t.Errorf("the event appended during the fault: %v", err)
	}
	// The batch that applies again is visible (its position) a moment
	// before the runner clears the failure and logs the recovery.
	testwait.CheckFor(t, waitTimeout, 5*time.Millisecond, func() error {
		if h := v.Health(); h.Err != nil || h.Retries != 0 {
			return fmt.Errorf("health after recovery: %+v", h)
		}
		if !strings.Contains(logs.String(), "projections recovered") {
			return fmt.Errorf("no recovery logged:\n%s", logs.String())
		}
		return nil
	})
}

// TestReconcileRebuildsViewsOfAnotherLog opens views written from one log
// against another: a shorter one (an older backup) or one as long with
// other events. Reconcile notices and rebuilds; views of the same log are
// kept as they are.
func TestReconcileRebuildsViewsOfAnotherLog(t *testing.T) {
	newLog := func(t *testing.T, inspectors ...string) domain.EventStore {
		store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		w := writer{store: store, codec: domain.NewCodec()}
		for _, id := range inspectors {
			if _, err := w.newInspector(t.Context(), id, time.Hour, t0); err != nil {
				t.Fatal(err)
			}
		}
		return store
	}
	tests := []struct {
		name        string
		log         []string // inspectors of the log the views meet again
		wantRebuilt bool
	}{
		{"same log", nil, false},
		{"older backup", []string{"a"}, true},
		{"another log as long", []string{"x", "y"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			first := newLog(t, "a", "b")
			path := filepath.Join(t.TempDir(), "views.db")
			v, err := Open(ctx, path, first, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Rebuild(ctx); err != nil { // applies the whole log
				t.Fatal(err)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}

			again := first
			if tc.log != nil {
				again = newLog(t, tc.log...)
			}
			var logs logBuffer
			v, err = Open(ctx, path, again, Options{Logger: logs.logger()})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if err := v.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			rebuilt := strings.Contains(logs.String(), "views do not match the event log")
			if rebuilt != tc.wantRebuilt {
				t.Fatalf("rebuilt %v, want %v:\n%s", rebuilt, tc.wantRebuilt, logs.String())
			}
			want := []string{"a", "b"}
			if tc.log != nil {
				want = tc.log
			}
			for _, id := range want {
				if _, err := v.Inspector(ctx, id); err != nil {
					t.Errorf("inspector %s of the log: %v", id, err)
				}
			}
			if reason, err := v.MatchLog(ctx); reason != "" || err != nil {
				t.Errorf("after Reconcile the views still differ: %q %v", reason, err)
			}
		})
	}
}

// TestOpenReplacesADamagedFile: a views file with a bad header, or one
// whose pages fail quick_check, is logged, removed and opened empty, so
// Run rebuilds it; nothing of the damage survives.
func TestOpenReplacesADamagedFile(t *testing.T) {
	e := newEnv(t, Options{})
	e.stories(1)
	e.sync(e.views)
	want := dump(t, e.views)
	for _, damage := range []struct {
		name string
		at   int64 // offset of the garbage
	}{{"bad header", 0}, {"noisy page", 4096 * 3}} {
		t.Run(damage.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "views.db")
			v, err := Open(e.ctx, path, e.store, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Rebuild(e.ctx); err != nil {
				t.Fatal(err)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, 4096), damage.at); err != nil {
				t.Fatal(err)
			}
			f.Close()

			var logs logBuffer
			v, err = Open(e.ctx, path, e.store, Options{Logger: logs.logger()})
			if err != nil {
				t.Fatalf("Open of a damaged file: %v", err)
			}
			defer v.Close()
			if !strings.Contains(logs.String(), "views file damaged") || v.Position() != 0 {
				t.Fatalf("damage not handled: position %d\n%s", v.Position(), logs.String())
			}
			e.with(t).run(v)
			e.with(t).sync(v)
			compareDumps(t, "views rebuilt after "+damage.name, want, dump(t, v))
		})
	}
}

// quietStore is the real store whose current subscription goes quiet on
// demand: it delivers nothing more and reports nothing, as a NATS consumer
// on a killed server does until the cluster notices.
type quietStore struct {
	domain.EventStore
	mu   sync.Mutex
	last *quietSub
	subs atomic.Int32
}

func (q *quietStore) SubscribeAll(ctx context.Context, after uint64) (domain.Subscription, error) {
	sub, err := q.EventStore.SubscribeAll(ctx, after)
	if err != nil {
		return nil, err
	}
	s := &quietSub{Subscription: sub}
	q.mu.Lock()
	q.last = s
	q.mu.Unlock()
	q.subs.Add(1)
	return s, nil
}

// silence makes the current subscription quiet.
func (q *quietStore) silence() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.last.quiet.Store(true)
}

type quietSub struct {
	domain.Subscription
	quiet atomic.Bool
}

func (s *quietSub) Recv(ctx context.Context) ([]domain.RecordedEvent, error) {
	if !s.quiet.Load() {
		evs, err := s.Subscription.Recv(ctx)
		if !s.quiet.Load() {
			return evs, err
		}
		// Gone quiet while waiting: what came is lost with the consumer.
	}
	<-ctx.Done()
	return nil, fmt.Errorf("receive events: %w", ctx.Err())
}

// TestRunLeavesAQuietSubscription: with StallAfter, a subscription that
// delivers nothing while the log holds more is given up and Run
// subscribes anew, so the views catch up; an idle log keeps its one
// subscription.
func TestRunLeavesAQuietSubscription(t *testing.T) {
	e := newEnv(t, Options{})
	quiet := &quietStore{EventStore: e.store}
	const stallAfter = 50 * time.Millisecond
	v, err := Open(e.ctx, filepath.Join(e.dir, "quiet.db"), quiet, Options{StallAfter: stallAfter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	e.run(v)
	e.waitFor(v, e.do(e.newInspector(e.ctx, "before", time.Hour, t0)))

	// Idle: nothing past the views, so the subscription is kept.
	time.Sleep(5 * stallAfter) // idle time the check must let pass, not synchronisation
	if n := quiet.subs.Load(); n != 1 {
		t.Fatalf("%d subscriptions while the log was idle, want 1", n)
	}

	quiet.silence()
	pos := e.do(e.newInspector(e.ctx, "after", time.Hour, t0))
	e.waitFor(v, pos)
	if _, err := v.Inspector(e.ctx, "after"); err != nil {
		t.Errorf("the event appended while the subscription was quiet: %v", err)
	}
	if n := quiet.subs.Load(); n != 2 {
		t.Errorf("%d subscriptions, want 2 (the quiet one left once)", n)
	}
}
