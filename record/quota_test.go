package record_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/record"
)

// TestAnswersOverTheQuotaKeepNoBody: while an account may store no more
// (record.Config.WhyNotStored), the answers to its retries, queued attempts
// and copies are recorded without their bodies, saying why; under the
// quota they keep them. A delivery's first attempt keeps its answer (its
// receipt was admitted under the quota), and an Endpoint that does not
// capture responses gives no reason.
func TestAnswersOverTheQuotaKeepNoBody(t *testing.T) {
	var over atomic.Bool
	var asked atomic.Int64
	rec, store := newRecorderWith(t, record.Config{WhyNotStored: func(_ context.Context, accountID string) string {
		asked.Add(1)
		if accountID != "acc" {
			t.Errorf("asked about account %q", accountID)
		}
		if over.Load() {
			return domain.NotCapturedStorageQuota
		}
		return ""
	}})
	ctx := t.Context()
	body := bytes.Repeat([]byte("b"), 4<<10)
	answer := func(cmd domain.ForwardCommand) domain.ForwardOutcome {
		return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 200, Body: body, DurationMs: 1}
	}
	first, queued := receiveForTest(t, rec, "d1")
	if err := queued.Wait(); err != nil {
		t.Fatal(err)
	}
	retry := func(t *testing.T, capture bool) domain.ForwardCommand {
		t.Helper()
		cmd, err := rec.RequestRetry(ctx, "d1", record.RetryTarget{AccountID: "acc", EndpointID: "ep", CaptureResponse: capture, Timeout: time.Second,
			Endpoint: domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}})
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	req := domain.CapturedRequest{Method: "POST", Target: "/q", Host: "ep.localhost", Proto: "HTTP/1.1", Body: []byte("q"), BodySize: 1, Complete: true}
	if err := rec.ReceiveQueued(ctx, record.Receipt{DeliveryID: "q1", Address: "ep", Kind: domain.AddressEndpoint, AccountID: "acc", Request: req}, 202, ""); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		over   bool
		record func(t *testing.T) (delivery, attempt string)
		stored bool   // the body kept
		why    string // NotCaptured
	}{
		{"first attempt over the quota", true, func(t *testing.T) (string, string) {
			_, err := rec.RecordOutcome(ctx, first, answer(first))
			must(t, err)
			return "d1", first.AttemptID
		}, true, ""},
		{"retry under the quota", false, func(t *testing.T) (string, string) {
			cmd := retry(t, true)
			_, err := rec.RecordOutcome(ctx, cmd, answer(cmd))
			must(t, err)
			return "d1", cmd.AttemptID
		}, true, ""},
		{"retry over the quota", true, func(t *testing.T) (string, string) {
			cmd := retry(t, true)
			_, err := rec.RecordOutcome(ctx, cmd, answer(cmd))
			must(t, err)
			return "d1", cmd.AttemptID
		}, false, domain.NotCapturedStorageQuota},
		{"retry over the quota, capture off", true, func(t *testing.T) (string, string) {
			cmd := retry(t, false)
			_, err := rec.RecordOutcome(ctx, cmd, answer(cmd))
			must(t, err)
			return "d1", cmd.AttemptID
		}, false, ""},
		{"queued attempt over the quota", true, func(t *testing.T) (string, string) {
			cmd, err := rec.RequestQueued(ctx, "q1", record.QueuedTarget{AccountID: "acc", EndpointID: "ep", CaptureResponse: true, Timeout: time.Second})
			must(t, err)
			_, err = rec.RecordOutcome(ctx, cmd, answer(cmd))
			must(t, err)
			return "q1", cmd.AttemptID
		}, false, domain.NotCapturedStorageQuota},
		{"copy under the quota", false, func(t *testing.T) (string, string) {
			cp := copyOf(first, "copy-1", "agent-2")
			_, err := rec.RecordCopy(ctx, cp, "agent-2", answer(cp))
			must(t, err)
			return "d1", cp.AttemptID
		}, true, ""},
		{"copy over the quota", true, func(t *testing.T) (string, string) {
			cp := copyOf(first, "copy-2", "agent-2")
			_, err := rec.RecordCopy(ctx, cp, "agent-2", answer(cp))
			must(t, err)
			return "d1", cp.AttemptID
		}, false, domain.NotCapturedStorageQuota},
	} {
		t.Run(tc.name, func(t *testing.T) {
			over.Store(tc.over)
			delivery, attempt := tc.record(t)
			var got *domain.ForwardResponded
			for _, e := range streamOf(t, store, delivery) {
				for _, x := range domain.Expand(e) {
					if fr, ok := x.(domain.ForwardResponded); ok && fr.AttemptID == attempt {
						got = &fr
					}
				}
			}
			switch {
			case got == nil:
				t.Fatalf("no answer recorded for %s", attempt)
			case got.Captured != tc.stored || bytes.Equal(got.Body, body) != tc.stored || got.NotCaptured != tc.why:
				t.Fatalf("answer recorded captured=%v with %d bytes of body, not captured %q; want the body kept %v, reason %q",
					got.Captured, len(got.Body), got.NotCaptured, tc.stored, tc.why)
			case got.BodySize != int64(len(body)) || got.Status != 200:
				t.Fatalf("answer recorded %d with body size %d, want 200 and %d", got.Status, got.BodySize, len(body))
			}
		})
	}
	if asked.Load() == 0 {
		t.Fatal("the quota was never asked")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
