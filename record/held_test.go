package record_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/record"
)

// receiveForTest receives one proxied delivery on rec and returns its
// command and the wait for its record.
func receiveForTest(t *testing.T, rec *record.Recorder, id string) (domain.ForwardCommand, record.Queued) {
	t.Helper()
	req := domain.CapturedRequest{Method: "POST", Target: "/hook", Host: "ep.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
		Headers: []domain.Header{{Name: "Content-Type", Value: "text/plain"}}, Body: []byte("hi"), BodySize: 2, Complete: true}
	cmd, q, err := rec.ReceiveForward(t.Context(), record.Receipt{DeliveryID: id, Address: "ep", Kind: domain.AddressEndpoint, AccountID: "acc", Request: req},
		record.Forward{Method: req.Method, Target: req.Target, Headers: req.Headers, Body: req.Body, Timeout: time.Second, CaptureResponse: true})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return cmd, q
}

// newQueueingRecorder is a Recorder on the embedded log itself, which
// queues appends (domain.AppendQueuer) and so holds proxied receipts.
func newQueueingRecorder(t *testing.T) (*record.Recorder, *sqlite.Store) {
	t.Helper()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return record.New(record.Config{Store: store}), store
}

func streamOf(t *testing.T, store domain.EventStore, id string) []domain.Event {
	t.Helper()
	_, events, err := domain.LoadStream(t.Context(), store, domain.NewCodec(), domain.DeliveryStream(id))
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return events
}

// TestAnswerWithinTheHoldIsRecordedInTheReceipt: an answer that comes
// within ReceiptHold is recorded in the receipt, one event and one append;
// the receipt is in the log only once it is, and both waits agree.
func TestAnswerWithinTheHoldIsRecordedInTheReceipt(t *testing.T) {
	rec, store := newQueueingRecorder(t)
	cmd, q := receiveForTest(t, rec, "d1")
	if recs, err := store.ReadStream(t.Context(), domain.DeliveryStream("d1"), 0, 1); err == nil && len(recs) > 0 {
		t.Fatalf("the receipt was appended before its answer: %+v", recs)
	}
	out := domain.ForwardOutcome{AttemptID: cmd.AttemptID, AgentID: "ag", Status: 201, Body: []byte("made"), DurationMs: 2,
		Headers: []domain.Header{{Name: "X-Made", Value: "yes"}}}
	pos, err := rec.RecordOutcome(t.Context(), cmd, out)
	if err != nil || pos == 0 {
		t.Fatalf("record outcome: %d, %v", pos, err)
	}
	if err := q.Wait(); err != nil {
		t.Fatalf("wait for the receipt: %v", err)
	}
	events := streamOf(t, store, "d1")
	r, ok := events[0].(domain.DeliveryReceived)
	if len(events) != 1 || !ok || r.Forward == nil || r.Forward.Responded == nil {
		t.Fatalf("stream = %+v, want one receipt recording its answer", events)
	}
	if a := r.Forward.Responded; a.Status != 201 || string(a.Body) != "made" || a.AttemptID != cmd.AttemptID || a.DeliveryID != "d1" || a.AgentID != "ag" {
		t.Errorf("answer recorded as %+v", a)
	}
	got, err := rec.RecordedOutcome(t.Context(), "d1", cmd.AttemptID)
	if err != nil || got.Status != 201 || got.Position != pos {
		t.Errorf("recorded outcome %+v, %v; want 201 at %d", got, err, pos)
	}
	// The attempt is answered: a second outcome is not recorded.
	if again, err := rec.RecordOutcome(t.Context(), cmd, out); err != nil || again != 0 {
		t.Errorf("second outcome: %d, %v", again, err)
	}
	if n := len(streamOf(t, store, "d1")); n != 1 {
		t.Errorf("stream has %d events after a second outcome", n)
	}
	if n := record.HeldReceipts(rec); n != 0 {
		t.Errorf("the recorder still keeps %d receipts", n)
	}
}

// TestReceiptOutlivingItsHoldComesFirst: an answer slower than the hold
// finds the receipt appended alone (live history shows the delivery
// pending), and follows it as an event of its own; so does a failure, and
// so does anything recorded after someone waited for the receipt.
func TestReceiptOutlivingItsHoldComesFirst(t *testing.T) {
	ok200 := func(cmd domain.ForwardCommand) domain.ForwardOutcome {
		return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 200, DurationMs: 1}
	}
	tests := []struct {
		name   string
		before func(t *testing.T, store domain.EventStore, id string, q record.Queued)
		out    func(domain.ForwardCommand) domain.ForwardOutcome
		want   []string
	}{
		{"slow answer", func(t *testing.T, store domain.EventStore, id string, _ record.Queued) {
			testwait.CheckFor(t, 10*time.Second, record.ReceiptHold/5, func() error {
				if recs, err := store.ReadStream(t.Context(), domain.DeliveryStream(id), 0, 1); err != nil || len(recs) != 1 {
					return fmt.Errorf("the held receipt is not appended alone: %d events, %v", len(recs), err)
				}
				return nil
			})
		}, ok200, []string{domain.TypeDeliveryReceived, domain.TypeForwardResponded}},
		{"waited for first", func(t *testing.T, _ domain.EventStore, _ string, q record.Queued) {
			if err := q.Wait(); err != nil {
				t.Fatal(err)
			}
		}, ok200, []string{domain.TypeDeliveryReceived, domain.TypeForwardResponded}},
		{"failure", func(*testing.T, domain.EventStore, string, record.Queued) {}, func(cmd domain.ForwardCommand) domain.ForwardOutcome {
			return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 504, Error: domain.FailureTimeout + "1s"}
		}, []string{domain.TypeDeliveryReceived, domain.TypeForwardFailed}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, store := newQueueingRecorder(t)
			id := "d" + string(rune('a'+i))
			cmd, q := receiveForTest(t, rec, id)
			tt.before(t, store, id, q)
			if _, err := rec.RecordOutcome(t.Context(), cmd, tt.out(cmd)); err != nil {
				t.Fatal(err)
			}
			if err := q.Wait(); err != nil {
				t.Fatal(err)
			}
			recs, err := store.ReadStream(t.Context(), domain.DeliveryStream(id), 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, r := range recs {
				types = append(types, r.Type)
			}
			if len(types) != len(tt.want) || types[0] != tt.want[0] || types[1] != tt.want[1] {
				t.Fatalf("stream = %v, want %v", types, tt.want)
			}
			if r := streamOf(t, store, id)[0].(domain.DeliveryReceived); r.Forward == nil || r.Forward.Responded != nil {
				t.Errorf("receipt %+v: want its request without an answer", r.Forward)
			}
			if n := record.HeldReceipts(rec); n != 0 {
				t.Errorf("the recorder still keeps %d receipts", n)
			}
		})
	}
}

// TestClosedStoreRefusesBeforeTheForward: a proxied delivery is not held
// (nor forwarded) when the log already refuses appends.
func TestClosedStoreRefusesBeforeTheForward(t *testing.T) {
	rec, store := newQueueingRecorder(t)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, err := rec.ReceiveForward(t.Context(), record.Receipt{DeliveryID: "d1", Address: "ep", Kind: domain.AddressEndpoint,
		Request: domain.CapturedRequest{Method: "POST", Target: "/", Proto: "HTTP/1.1"}}, record.Forward{})
	if err == nil || errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("receive on a closed log: %v, want its refusal", err)
	}
}

// TestHeldReceiptsEndWithTheirForwards: however a forward ends (answered,
// failed, or given up by the sender's side with no outcome), once the
// sender's side has waited for its record the recorder keeps nothing of
// it, so 1 000 forwards leave no receipt held.
func TestHeldReceiptsEndWithTheirForwards(t *testing.T) {
	rec, _ := newQueueingRecorder(t)
	for i := range 1000 {
		cmd, q := receiveForTest(t, rec, fmt.Sprintf("d-%d", i))
		switch i % 3 {
		case 0: // answered
			if _, err := rec.RecordOutcome(t.Context(), cmd, domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 200}); err != nil {
				t.Fatal(err)
			}
		case 1: // failed
			if _, err := rec.RecordOutcome(t.Context(), cmd, domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 503, Error: domain.FailureNoAgent}); err != nil {
				t.Fatal(err)
			}
		case 2: // the sender's side gave up: no outcome is recorded here
		}
		if err := q.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if n := record.HeldReceipts(rec); n != 0 {
		t.Fatalf("%d receipts still held after 1 000 forwards ended", n)
	}
}

// TestOutcomeRecordedAfterItsContextEnded: the sender's context may have
// ended (it hung up, the relay is stopping) by the time its answer is
// recorded; the outcome is recorded all the same, merged into the held
// receipt or, for a failure, as an event of its own.
func TestOutcomeRecordedAfterItsContextEnded(t *testing.T) {
	for _, tt := range []struct {
		name   string
		out    func(domain.ForwardCommand) domain.ForwardOutcome
		events int
	}{
		{"answered within the hold", func(c domain.ForwardCommand) domain.ForwardOutcome {
			return domain.ForwardOutcome{AttemptID: c.AttemptID, Status: 200}
		}, 1},
		{"failed", func(c domain.ForwardCommand) domain.ForwardOutcome {
			return domain.ForwardOutcome{AttemptID: c.AttemptID, Status: 503, Error: domain.FailureNoAgent}
		}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec, store := newQueueingRecorder(t)
			cmd, q := receiveForTest(t, rec, "d1")
			ended, cancel := context.WithCancel(t.Context())
			cancel()
			if pos, err := rec.RecordOutcome(ended, cmd, tt.out(cmd)); err != nil || pos == 0 {
				t.Fatalf("record outcome on an ended context: %d, %v", pos, err)
			}
			if err := q.Wait(); err != nil {
				t.Fatalf("wait for the receipt: %v", err)
			}
			if events := streamOf(t, store, "d1"); len(events) != tt.events {
				t.Fatalf("stream = %+v, want %d events", events, tt.events)
			}
			got, err := rec.RecordedOutcome(t.Context(), "d1", cmd.AttemptID)
			if err != nil || got.Status != tt.out(cmd).Status {
				t.Errorf("recorded outcome %+v, %v", got, err)
			}
		})
	}
}
