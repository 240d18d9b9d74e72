package tunnel

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/record"
)

// goroutines is every goroutine's stack, one entry each.
func goroutines() []string {
	buf := make([]byte, 4<<20)
	return strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
}

// A Hub without a bus serves the sessions it holds: nothing is encoded,
// and the outcome is recorded before Forward returns.
func TestHubForwardWithoutBus(t *testing.T) {
	e := newEnv(t)
	e.hub = NewHub(HubConfig{Recorder: record.New(record.Config{Store: e.store, Codec: e.codec})})
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

// stuckStore takes appends to one stream but never makes one durable, as
// a store whose disk stopped answering would: such an append, or a queued
// append's wait, ends only with its context. Other streams' appends land.
type stuckStore struct {
	*sqlite.Store
	stream string
}

func (s stuckStore) Append(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (domain.AppendResult, error) {
	if stream != s.stream {
		return s.Store.Append(ctx, stream, expected, events...)
	}
	<-ctx.Done()
	return domain.AppendResult{}, ctx.Err()
}

func (s stuckStore) QueueAppend(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (func() (domain.AppendResult, error), error) {
	if stream != s.stream {
		return s.Store.QueueAppend(ctx, stream, expected, events...)
	}
	return func() (domain.AppendResult, error) {
		<-ctx.Done()
		return domain.AppendResult{}, ctx.Err()
	}, nil
}

// Forward bounds its own wait, whatever its caller's context: ingress
// hands it the sender's request context without a deadline of its own.
// The command's timeout bounds the attempt and, with the embedded log,
// the recorder's bound on a write (record.WriteTimeout, shortened here)
// the record: an outcome the store does not take within it ends the wait
// with domain.ErrOutcomeNotRecorded.
func TestForwardBoundsItsWaitForTheRecord(t *testing.T) {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := newEnvWithStore(t, store)
	cmd := e.receive(t, "ep", "acc")
	stuck := stuckStore{Store: store, stream: domain.DeliveryStream(cmd.DeliveryID)}
	e.hub = NewHub(HubConfig{Recorder: record.New(record.Config{Store: stuck, Codec: e.codec, WriteTimeout: 50 * time.Millisecond})})
	t.Cleanup(e.hub.Close)
	e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)

	errs := make(chan error, 1)
	go func() {
		_, err := e.hub.Forward(context.Background(), cmd)
		errs <- err
	}()
	select {
	case err := <-errs:
		if !errors.Is(err, domain.ErrOutcomeNotRecorded) {
			t.Fatalf("forward whose outcome the store never takes = %v, want domain.ErrOutcomeNotRecorded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Forward still waiting for an unrecorded outcome after 10 s")
	}
}

// appendingStore appends on its caller's call (no domain.AppendQueuer, as
// JetStream and EventStoreDB), and an append to stream ends only with its
// context.
type appendingStore struct {
	domain.EventStore
	stream string
}

func (s appendingStore) Append(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (domain.AppendResult, error) {
	if stream != s.stream {
		return s.EventStore.Append(ctx, stream, expected, events...)
	}
	<-ctx.Done()
	return domain.AppendResult{}, ctx.Err()
}

// With a store that appends on the caller's call, Forward waits for the
// record at most the attempt's timeout and RecordGrace (shortened here),
// then ends with a *TimeoutError while the record goes on.
func TestForwardAsideBoundsItsWaitForTheRecord(t *testing.T) {
	e := newEnv(t)
	cmd := e.receive(t, "ep", "acc")
	cmd.Timeout = 50 * time.Millisecond
	stuck := appendingStore{EventStore: e.store, stream: domain.DeliveryStream(cmd.DeliveryID)}
	e.hub = NewHub(HubConfig{Recorder: record.New(record.Config{Store: stuck, Codec: e.codec, WriteTimeout: time.Second})})
	t.Cleanup(e.hub.Close)
	e.hub.recordGrace = 50 * time.Millisecond
	e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)

	errs := make(chan error, 1)
	go func() {
		_, err := e.hub.Forward(context.Background(), cmd)
		errs <- err
	}()
	select {
	case err := <-errs:
		var te *TimeoutError
		if !errors.As(err, &te) || te.AttemptID != cmd.AttemptID || te.Waited >= time.Second {
			t.Fatalf("forward whose outcome is not recorded = %v, want *TimeoutError for %s before the write's bound", err, cmd.AttemptID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Forward still waiting for an unrecorded outcome after 10 s")
	}
}

// The attempt runs on the goroutine that called Forward, not on one it
// hands the attempt to (two more wake-ups per forward).
func TestForwardRunsOnTheCallersGoroutine(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	got, _ := e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
		<-release
		return okAnswer(cmd)
	})
	cmd := e.receive(t, "ep", "acc")
	done := make(chan error, 1)
	go func() { // this literal is the caller, TestForwardRunsOnTheCallersGoroutine.func2
		_, err := e.hub.Forward(t.Context(), cmd)
		done <- err
	}()
	recv(t, got)
	var serving []string
	for _, g := range goroutines() {
		if strings.Contains(g, "(*Hub).serve(") {
			serving = append(serving, g)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(serving) != 1 || !strings.Contains(serving[0], "TestForwardRunsOnTheCallersGoroutine.func2") {
		t.Errorf("the attempt in flight runs on %d goroutines, want 1, the caller's:\n%s", len(serving), strings.Join(serving, "\n\n"))
	}
}

// A caller that leaves (the sender hung up) gets its error at once; the
// attempt goes on without it, and its outcome is recorded.
func TestForwardWhoseCallerLeaves(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	got, _ := e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
		<-release
		return okAnswer(cmd)
	})
	cmd := e.receive(t, "ep", "acc")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := e.hub.Forward(ctx, cmd)
		done <- err
	}()
	recv(t, got)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("forward whose caller left = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Forward still waiting 10 s after its caller left")
	}
	close(release)
	stream := domain.DeliveryStream(cmd.DeliveryID)
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if _, ev := e.last(t, stream); ev.EventType() != domain.TypeForwardResponded || ev.(domain.ForwardResponded).Status != 200 {
			return fmt.Errorf("last event %T %+v, want the agent's answer", ev, ev)
		}
		return nil
	})
}
