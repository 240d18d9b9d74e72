package commands_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// testTimeout bounds every command a test runs, so a hang fails the test
// instead of the whole run.
const testTimeout = 20 * time.Second

// env is the service over the real log, the real views and the real
// tunnel, wired as relay serve wires them.
type env struct {
	dir   string
	cfg   commands.Config
	store domain.EventStore
	codec *domain.Codec
	views *projections.Runner
	hub   *tunnel.Hub
	rec   *record.Recorder
	svc   *commands.Service
}

func defaultConfig() commands.Config {
	return commands.Config{InspectorTTL: time.Hour, ForwardTimeout: 10 * time.Second, SignupOpen: true}
}

func newEnv(t *testing.T, cfg commands.Config) *env {
	t.Helper()
	dir := t.TempDir()
	// The app's long-running parts get their own context: t.Context() ends
	// before the cleanups that wait for them. The tests sweep themselves.
	a, err := app.New(context.Background(), app.Config{Data: dir, NoSweeps: true, Commands: cfg})
	if err != nil {
		t.Fatalf("open app: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("close app: %v", err)
		}
	})
	return &env{dir: dir, cfg: cfg, store: a.Store(), codec: a.Codec(), views: a.Views(), hub: a.Hub(), rec: a.Recorder(), svc: a.Service()}
}

// ctx is a test's context for one command.
func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return c
}

// lastPosition is the position of the newest event in the log.
func (e *env) lastPosition(t *testing.T) uint64 {
	t.Helper()
	pos, err := e.store.LastPosition(ctx(t))
	if err != nil {
		t.Fatalf("last position: %v", err)
	}
	return pos
}

// allEvents reads the whole log.
// appended checks that what appended exactly want events since before.
func (e *env) appended(t *testing.T, before uint64, want int, what string) {
	t.Helper()
	if after := e.lastPosition(t); after != before+uint64(want) {
		t.Errorf("%s appended %d events, want %d", what, after-before, want)
	}
}

func (e *env) allEvents(t *testing.T) []domain.RecordedEvent {
	t.Helper()
	var out []domain.RecordedEvent
	for {
		var after uint64
		if len(out) > 0 {
			after = out[len(out)-1].Position
		}
		batch, err := e.store.ReadAll(ctx(t), after, 1000)
		if err != nil {
			t.Fatalf("read log: %v", err)
		}
		if len(batch) == 0 {
			return out
		}
		out = append(out, batch...)
	}
}

// stream reads and decodes a whole stream; a missing stream reads as empty.
func (e *env) stream(t *testing.T, name string) ([]domain.RecordedEvent, []domain.Event) {
	t.Helper()
	recs, events, err := domain.LoadStream(ctx(t), e.store, e.codec, name)
	if errors.Is(err, domain.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return recs, events
}

// appendChanges appends an aggregate's changes the way the relay's other
// writers do, and waits until the views show them.
func (e *env) appendChanges(t *testing.T, stream string, expected domain.ExpectedRevision, changes []domain.Event, correlationID string) {
	t.Helper()
	data, _, err := e.codec.EncodeAll(nil, commands.NewEventID, changes, time.Now(), domain.Trace{CorrelationID: correlationID})
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	res, err := e.store.Append(ctx(t), stream, expected, data...)
	if err != nil {
		t.Fatalf("append to %s: %v", stream, err)
	}
	if err := e.views.WaitFor(ctx(t), res.Position); err != nil {
		t.Fatalf("wait for views: %v", err)
	}
}

// account creates an account and returns it with its token.
func (e *env) account(t *testing.T, name string) (readmodel.Account, string) {
	t.Helper()
	acc, token, err := e.svc.CreateAccount(ctx(t), name)
	if err != nil {
		t.Fatalf("create account %q: %v", name, err)
	}
	return acc, token
}

// endpoint creates an Endpoint for accountID.
func (e *env) endpoint(t *testing.T, accountID string, set domain.EndpointSettings) readmodel.Endpoint {
	t.Helper()
	ep, err := e.svc.CreateEndpoint(ctx(t), accountID, "", set)
	if err != nil {
		t.Fatalf("create endpoint %+v: %v", set, err)
	}
	return ep
}

// named is set with another name: an account's Endpoint names are unique.
func named(set domain.EndpointSettings, name string) domain.EndpointSettings {
	set.Name = name
	return set
}

// request is a captured webhook: a raw target, repeated and hop-by-hop
// headers, and a body of which only stored bytes are kept.
func request(target string, body []byte, stored int) domain.CapturedRequest {
	return domain.CapturedRequest{
		Method: "POST", Target: target, Host: "x.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:40000",
		Headers: []domain.Header{
			{Name: "Content-Type", Value: "application/json"},
			{Name: "X-Multi", Value: "a"},
			{Name: "Connection", Value: "keep-alive, X-Hop"},
			{Name: "X-Hop", Value: "dropped"},
			{Name: "X-Multi", Value: "b"},
			{Name: "Keep-Alive", Value: "timeout=5"},
			{Name: "X-Signature", Value: "sha256=abc"},
		},
		Body: body[:stored], BodySize: int64(len(body)), Complete: stored == len(body),
	}
}

// receive records a delivery as ingress does: one DeliveryReceived, carrying
// the relay's own answer when status is not 0.
func (e *env) receive(t *testing.T, address string, kind domain.AddressKind, accountID string, req domain.CapturedRequest, status int) string {
	t.Helper()
	id := commands.NewDeliveryID()
	var (
		d   *domain.Delivery
		err error
	)
	if status == 0 {
		d, err = domain.ReceiveDelivery(id, address, kind, accountID, req)
	} else {
		d, err = domain.ReceiveAndAnswer(id, address, kind, accountID, req, status, "answered by the relay")
	}
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	e.appendChanges(t, domain.DeliveryStream(id), d.Expected(), d.Changes(), id)
	return id
}

var agentSeq atomic.Int64

// agent attaches an agent session to an Endpoint that answers every
// command with answer, and reports each command it got on the returned
// channel. The session ends at cleanup.
func (e *env) agent(t *testing.T, endpointID, accountID string, answer func(domain.ForwardCommand) domain.ForwardOutcome) <-chan domain.ForwardCommand {
	t.Helper()
	agentID := fmt.Sprintf("agent-%d", agentSeq.Add(1))
	sessCtx, cancel := context.WithCancel(context.Background())
	work, err := e.hub.Attach(sessCtx, tunnel.SessionInfo{AgentID: agentID, EndpointID: endpointID, AccountID: accountID, Target: "127.0.0.1:9"})
	if err != nil {
		cancel()
		t.Fatalf("attach agent: %v", err)
	}
	got := make(chan domain.ForwardCommand, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cmd := range work {
			got <- cmd
			out := answer(cmd)
			out.AttemptID = cmd.AttemptID
			if err := e.hub.Complete(sessCtx, accountID, agentID, out); err != nil {
				t.Errorf("complete %s: %v", cmd.AttemptID, err)
			}
		}
	}()
	// Registered after newEnv's cleanup, so it runs first: the session's
	// end is recorded while the store is still open.
	t.Cleanup(func() {
		cancel()
		<-done // work is closed once the detach is recorded
	})
	return got
}

// listenersCountingCopies connects n agents of endpointID that answer
// every command with answerPong, and counts the copies they are given.
func (e *env) listenersCountingCopies(t *testing.T, endpointID, accountID string, n int) *atomic.Int64 {
	t.Helper()
	given := new(atomic.Int64)
	for range n {
		got := e.agent(t, endpointID, accountID, func(cmd domain.ForwardCommand) domain.ForwardOutcome {
			if cmd.Copy {
				given.Add(1)
			}
			return answerPong(cmd)
		})
		go func() {
			for range got {
			}
		}()
	}
	return given
}

// waitStill waits, up to 10 s, until ready holds and then until the log
// has taken no append for 300 ms, and then for the views to apply it
// all: what is recorded after a command's answer (its copies) is then
// recorded.
func (e *env) waitStill(t *testing.T, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ready() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for last := uint64(0); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		now := e.lastPosition(t)
		if now == last {
			break
		}
		last = now
	}
	if err := e.views.WaitFor(ctx(t), e.lastPosition(t)); err != nil {
		t.Fatal(err)
	}
}

// noWork fails if the agent was given any command.
func noWork(t *testing.T, got <-chan domain.ForwardCommand) {
	t.Helper()
	select {
	case cmd := <-got:
		t.Fatalf("the agent was given work: %+v", cmd)
	default:
	}
}

func ptr[T any](v T) *T { return &v }
