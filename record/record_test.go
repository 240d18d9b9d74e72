package record_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/record"
)

// countingStore counts the reads of streams, and the events and bytes
// they returned.
type countingStore struct {
	domain.EventStore
	reads, events, bytes atomic.Int64
}

func (s *countingStore) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	s.reads.Add(1)
	recs, err := s.EventStore.ReadStream(ctx, stream, from, max)
	s.events.Add(int64(len(recs)))
	for _, r := range recs {
		s.bytes.Add(int64(len(r.Data)))
	}
	return recs, err
}

func (s *countingStore) LastEvent(ctx context.Context, stream string) (domain.RecordedEvent, error) {
	s.reads.Add(1)
	e, err := s.EventStore.LastEvent(ctx, stream)
	if err == nil {
		s.events.Add(1)
		s.bytes.Add(int64(len(e.Data)))
	}
	return e, err
}

func newRecorder(t *testing.T) (*record.Recorder, *countingStore) {
	t.Helper()
	return newRecorderWith(t, record.Config{})
}

// newRecorderWith is newRecorder with cfg's other settings.
func newRecorderWith(t *testing.T, cfg record.Config) (*record.Recorder, *countingStore) {
	t.Helper()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	counting := &countingStore{EventStore: store}
	cfg.Store = counting
	return record.New(cfg), counting
}

// A retry's command names its forward.requested event, so its outcome is
// appended right after it without reading the stream back, as a first
// attempt's is; the retry itself reads the stream once.
func TestRetryOutcomeTakesTheFastPath(t *testing.T) {
	rec, store := newRecorder(t)
	ctx := t.Context()
	body := []byte(`{"n":1}`)
	req := domain.CapturedRequest{
		Method: "POST", Target: "/hooks?x=1", Host: "ep.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
		Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Connection", Value: "close"}},
		Body:    body, BodySize: int64(len(body)), Complete: true,
	}
	first, queued, err := rec.ReceiveForward(ctx, record.Receipt{DeliveryID: "d1", Address: "ep", Kind: domain.AddressEndpoint, AccountID: "acc", Request: req},
		record.Forward{Method: req.Method, Target: req.Target, Headers: req.Headers, Body: body, Timeout: time.Second})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if err := queued.Wait(); err != nil {
		t.Fatalf("record receipt: %v", err)
	}

	tests := []struct {
		name string
		cmd  func(t *testing.T) domain.ForwardCommand
	}{
		{"first attempt", func(*testing.T) domain.ForwardCommand { return first }},
		{"retry", func(t *testing.T) domain.ForwardCommand {
			store.reads.Store(0)
			cmd, err := rec.RequestRetry(ctx, "d1", record.RetryTarget{
				AccountID: "acc", EndpointID: "ep", Timeout: time.Second,
				Endpoint: domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true},
			})
			if err != nil {
				t.Fatalf("request retry: %v", err)
			}
			if n := store.reads.Load(); n != 1 {
				t.Errorf("retry read streams %d times, want 1", n)
			}
			if cmd.Method != first.Method || cmd.Target != first.Target || string(cmd.Body) != string(body) || len(cmd.Headers) != len(first.Headers) {
				t.Errorf("retry command %+v differs from the first %+v", cmd, first)
			}
			return cmd
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := tt.cmd(t)
			if cmd.RequestEventID == "" {
				t.Fatal("the command does not name its request event")
			}
			store.reads.Store(0)
			pos, err := rec.RecordOutcome(ctx, cmd, domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 200})
			if err != nil || pos == 0 {
				t.Fatalf("record outcome: %d, %v", pos, err)
			}
			if n := store.reads.Load(); n != 0 {
				t.Errorf("recording the outcome read streams %d times, want 0 (fast path)", n)
			}
			recs, err := store.EventStore.ReadStream(ctx, domain.DeliveryStream("d1"), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			last := recs[len(recs)-1]
			if last.Type != domain.TypeForwardResponded || last.Metadata.CausationID != cmd.RequestEventID || last.Position != pos {
				t.Errorf("last event %s caused by %q at %d; want %s caused by %q at %d",
					last.Type, last.Metadata.CausationID, last.Position, domain.TypeForwardResponded, cmd.RequestEventID, pos)
			}
		})
	}
}

// Exactly one outcome per attempt: a node settling an attempt another node
// already answered records nothing and adopts the recorded outcome.
func TestSettleOutcomeAdoptsTheRecordedOne(t *testing.T) {
	rec, store := newRecorder(t)
	ctx := t.Context()
	req := domain.CapturedRequest{Method: "POST", Target: "/", Host: "ep.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1", Complete: true}
	cmd, queued, err := rec.ReceiveForward(ctx, record.Receipt{DeliveryID: "d1", Address: "ep", Kind: domain.AddressEndpoint, AccountID: "acc", Request: req},
		record.Forward{Method: "POST", Target: "/", Timeout: time.Second, CaptureResponse: true})
	if err != nil || queued.Wait() != nil {
		t.Fatalf("receive: %v", err)
	}
	answered := domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 201, Headers: []domain.Header{{Name: "X-A", Value: "1"}}, Body: []byte("made"), AgentID: "ag"}
	pos, err := rec.RecordOutcome(ctx, cmd, answered)
	if err != nil || pos == 0 {
		t.Fatalf("record the answer: %d, %v", pos, err)
	}
	lost := domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 503, Error: "relay node lost"}
	got, err := rec.SettleOutcome(ctx, cmd, lost)
	if err != nil || got.Status != 201 || string(got.Body) != "made" || got.Position != pos || got.Failed() {
		t.Fatalf("settle after the answer = %+v, %v; want the recorded 201 at %d", got, err, pos)
	}
	recs, _, err := domain.LoadStream(ctx, store, rec.Codec(), domain.DeliveryStream("d1"))
	if err != nil || len(recs) != 2 {
		t.Fatalf("delivery stream holds %d events (%v), want received (with its first attempt's request), responded", len(recs), err)
	}

	// The first to settle wins.
	cmd2, err := rec.RequestRetry(ctx, "d1", record.RetryTarget{AccountID: "acc", EndpointID: "ep",
		Endpoint: domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first, err := rec.SettleOutcome(ctx, cmd2, domain.ForwardOutcome{AttemptID: cmd2.AttemptID, Status: 503, Error: "relay node lost"})
	if err != nil || first.Status != 503 || first.Position == 0 {
		t.Fatalf("first settle = %+v, %v", first, err)
	}
	late, err := rec.SettleOutcome(ctx, cmd2, domain.ForwardOutcome{AttemptID: cmd2.AttemptID, Status: 200})
	if err != nil || late.Status != 503 || late.Position != first.Position {
		t.Fatalf("late answer = %+v, %v; want the recorded 503", late, err)
	}
}

// TestReconcilePrimaryFoldsWhatOthersAppended: a Recorder keeps an
// Endpoint's sessions folded between decisions, yet sees what another node
// appended meanwhile: its next decision follows the whole stream.
func TestReconcilePrimaryFoldsWhatOthersAppended(t *testing.T) {
	a, store := newRecorder(t)
	b := record.New(record.Config{Store: store}) // another node on the same log
	ctx := t.Context()
	const ep = "ep"
	decide := func(rec *record.Recorder, wantAgent string, wantChanged bool) {
		t.Helper()
		c, changed, err := rec.ReconcilePrimary(ctx, ep)
		if err != nil || changed != wantChanged || (changed && c.AgentID != wantAgent) {
			t.Fatalf("ReconcilePrimary: %+v changed=%v err=%v, want changed=%v to %q", c, changed, err, wantChanged, wantAgent)
		}
	}
	if _, err := a.AgentConnected(ctx, ep, "s1/ep", "127.0.0.1:1", false, nil); err != nil {
		t.Fatal(err)
	}
	decide(a, "s1/ep", true)
	decide(a, "", false) // folded: nothing new, nothing to change
	// Node B: a session that asks to be primary takes over.
	if _, err := b.AgentConnected(ctx, ep, "s2/ep", "127.0.0.1:2", true, nil); err != nil {
		t.Fatal(err)
	}
	decide(b, "s2/ep", true)
	// A folds B's events: the primary B recorded is the rule's; nothing to do.
	decide(a, "", false)
	// The asking session ends (recorded by A): the first one is primary again.
	if err := a.AgentDisconnected(ctx, ep, "s2/ep", "agent disconnected"); err != nil {
		t.Fatal(err)
	}
	decide(a, "s1/ep", true)
	decide(b, "", false)

	_, events, err := domain.LoadStream(ctx, store, domain.NewCodec(), domain.AgentStream(ep))
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, e := range events {
		if c, ok := e.(domain.PrimaryChanged); ok {
			changes = append(changes, c.AgentID)
		}
	}
	if strings.Join(changes, " ") != "s1/ep s2/ep s1/ep" {
		t.Errorf("primary changes recorded %q, want s1 s2 s1 once each", changes)
	}
}

// The relay's own late answer quotes an error (a store's, another node's):
// the log keeps it bounded as every error text it keeps, however long.
func TestLateAnswerReasonIsBounded(t *testing.T) {
	rec, store := newRecorder(t)
	ctx := t.Context()
	req := domain.CapturedRequest{Method: "POST", Target: "/", Host: "ep.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1", Complete: true}
	_, queued, err := rec.ReceiveForward(ctx, record.Receipt{DeliveryID: "d1", Address: "ep", Kind: domain.AddressEndpoint, AccountID: "acc", Request: req},
		record.Forward{Method: req.Method, Target: req.Target, Timeout: time.Second})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if err := queued.Wait(); err != nil {
		t.Fatalf("record receipt: %v", err)
	}
	reason := domain.ReasonOutcomeNotRecorded + strings.Repeat("x", 10<<20)
	if err := rec.RecordLateAnswer(ctx, "d1", 503, reason); err != nil {
		t.Fatalf("record late answer: %v", err)
	}
	recs, err := store.EventStore.ReadStream(ctx, domain.DeliveryStream("d1"), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	ev, err := domain.NewCodec().Decode(last.Type, last.Data)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := ev.(domain.DeliveryAnswered)
	if !ok || a.Status != 503 || !strings.HasPrefix(a.Reason, domain.ReasonOutcomeNotRecorded) || len(a.Reason) > evidence.MaxEventText+len("…") {
		t.Fatalf("last event %s: the answer's reason is %d bytes, want it bounded", last.Type, len(a.Reason))
	}
}

// An outcome the store does not take comes back marked, from recording and
// from settling alike, so that whoever waits for the attempt tells it from
// an attempt that got no answer.
func TestOutcomeNotRecordedIsMarked(t *testing.T) {
	rec, _ := newRecorder(t)
	cmd := record.NewForward(record.Forward{DeliveryID: "ghost", AttemptID: "ghost-1", Method: "GET", Target: "/"}, "", 0)
	out := domain.ForwardOutcome{AttemptID: "ghost-1", Status: 200}
	_, err := rec.RecordOutcome(t.Context(), cmd, out)
	if !errors.Is(err, domain.ErrOutcomeNotRecorded) || !errors.Is(err, domain.ErrStreamNotFound) {
		t.Errorf("RecordOutcome of an unknown delivery = %v, want the store's refusal marked as an outcome not recorded", err)
	}
	_, err = rec.SettleOutcome(t.Context(), cmd, out)
	if !errors.Is(err, domain.ErrOutcomeNotRecorded) || !errors.Is(err, domain.ErrStreamNotFound) {
		t.Errorf("SettleOutcome of an unknown delivery = %v, want the store's refusal marked as an outcome not recorded", err)
	}
}
