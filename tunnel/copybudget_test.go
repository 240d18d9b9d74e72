package tunnel

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/record"
)

// TestCopiesHoldAtMostTheirBudget: copies to listeners that do not read
// hold their bytes until their frames are written; a session holds one
// large copy at a time, an account a quarter of the budget (or one copy),
// and one account's silent listeners leave another's copies room. Written
// and the session's end give the bytes back.
func TestCopiesHoldAtMostTheirBudget(t *testing.T) {
	e := newEnv(t)
	e.hub.copyBytes = newCopyBudget(ingress.NewBodyBudget(16<<20, 1)) // 4 MiB per account
	big := bytes.Repeat([]byte("x"), 3<<20)
	e.agent(t, SessionInfo{AgentID: "a-primary", EndpointID: "ep-a", AccountID: "acc-a"}, okAnswer)
	e.agent(t, SessionInfo{AgentID: "b-primary", EndpointID: "ep-b", AccountID: "acc-b"}, okAnswer)
	var stuckA []<-chan domain.ForwardCommand
	for _, id := range []string{"a-1", "a-2", "a-3"} {
		work, err := e.hub.Attach(t.Context(), SessionInfo{AgentID: id, EndpointID: "ep-a", AccountID: "acc-a"})
		if err != nil {
			t.Fatal(err)
		}
		stuckA = append(stuckA, work) // never read
	}
	bCtx, bEnd := context.WithCancel(t.Context())
	if _, err := e.hub.Attach(bCtx, SessionInfo{AgentID: "b-1", EndpointID: "ep-b", AccountID: "acc-b"}); err != nil {
		t.Fatal(err)
	}
	forward := func(ep, acc string) {
		cmd := e.Receive(t, ep, acc)
		cmd.Body, cmd.Timeout = big, time.Hour
		if out, err := e.hub.Forward(t.Context(), cmd); err != nil || out.Status != 200 {
			t.Fatalf("forward: %+v, %v", out, err)
		}
	}
	one := copySize(domain.ForwardCommand{Body: big}) + 200
	for range 5 {
		forward("ep-a", "acc-a")
	}
	if held := e.hub.copyBytes.inFlight(); held == 0 || held > one {
		t.Fatalf("5 copies to 3 silent sessions of one account hold %d bytes, want one copy (%d at most)", held, one)
	}
	forward("ep-b", "acc-b")
	if held := e.hub.copyBytes.inFlight(); held <= one || held > 2*one {
		t.Fatalf("another account's copy: %d bytes held in all, want two copies", held)
	}
	// The copy a silent session of A holds is written: its bytes are back.
	var got domain.ForwardCommand
	for i, w := range stuckA {
		select {
		case got = <-w:
			e.hub.Written([]string{"a-1", "a-2", "a-3"}[i], got.AttemptID)
		default:
		}
	}
	if got.AttemptID == "" {
		t.Fatal("no silent session of A was given a copy")
	}
	if held := e.hub.copyBytes.inFlight(); held == 0 || held > one {
		t.Fatalf("after A's copy was written %d bytes held, want B's copy only", held)
	}
	bEnd() // B's silent session ends: its copy is no longer held
	testwait.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if held := e.hub.copyBytes.inFlight(); held != 0 {
			return fmt.Errorf("%d bytes held after the session ended", held)
		}
		return nil
	})
}

// A copy's request is held while counted, until its frame is written, and
// no longer: a listener that reads its copies and never answers left each
// delivery's body held until its copy's timeout, past the budget's count
// (32 deliveries of 1 MiB: 32 MiB).
func TestWrittenCopiesHoldNothingOfTheirRequest(t *testing.T) {
	e := newEnv(t)
	e.hub.copyBytes = newCopyBudget(ingress.NewBodyBudget(64<<20, 1))
	answering := func(id string, primary bool) {
		ctx, cancel := context.WithCancel(context.Background())
		work, err := e.hub.Attach(ctx, SessionInfo{AgentID: id, EndpointID: "ep", AccountID: "acc", Primary: primary})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for cmd := range work {
				if primary {
					_ = e.hub.Complete(context.Background(), "acc", id, domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 200})
				} else {
					e.hub.Written(id, cmd.AttemptID) // read, never answered
				}
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	answering("reader", false)
	answering("primary", true)

	const deliveries = 32
	before := heapInUse()
	for range deliveries {
		cmd := e.Receive(t, "ep", "acc")
		cmd.Body, cmd.Timeout = bytes.Repeat([]byte("x"), 1<<20), time.Hour
		if out, err := e.hub.Forward(t.Context(), cmd); err != nil || out.Status != 200 {
			t.Fatalf("forward: %+v, %v", out, err)
		}
	}
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if n := e.hub.copyBytes.inFlight(); n != 0 {
			return fmt.Errorf("%d bytes of copies not written yet", n)
		}
		return nil
	})
	held := heapInUse() - before
	t.Logf("%d copies of 1 MiB written and unanswered hold %d MiB", deliveries, held>>20)
	if held > deliveries<<20/4 {
		t.Errorf("copies written and unanswered hold %d MiB, want nothing of their requests", held>>20)
	}
}

// spyRecorder keeps the commands whose outcomes and copies it records.
type spyRecorder struct {
	Recorder
	mu       sync.Mutex
	outcomes []domain.ForwardCommand
	copies   []domain.ForwardCommand
}

func (r *spyRecorder) RecordOutcome(ctx context.Context, cmd domain.ForwardCommand, out domain.ForwardOutcome) (uint64, error) {
	r.mu.Lock()
	r.outcomes = append(r.outcomes, cmd)
	r.mu.Unlock()
	return r.Recorder.RecordOutcome(ctx, cmd, out)
}

func (r *spyRecorder) RecordCopy(ctx context.Context, cmd domain.ForwardCommand, agentID string, out domain.ForwardOutcome) (uint64, error) {
	r.mu.Lock()
	r.copies = append(r.copies, cmd)
	r.mu.Unlock()
	return r.Recorder.RecordCopy(ctx, cmd, agentID, out)
}

// A copy waits to be recorded with the digests of its request and nothing
// else of it: no headers, no body, and one digests value for all copies of
// a delivery, which the primary's outcome is recorded with too (digested
// once). So what a copy keeps for its fidelity is a pointer, whatever the
// request's size.
func TestCopiesKeepOnlyTheDigestsOfTheirRequest(t *testing.T) {
	e := newEnv(t)
	spy := &spyRecorder{Recorder: record.New(record.Config{Store: e.Store, Codec: e.Codec})}
	e.hub = NewHub(HubConfig{Recorder: spy})
	t.Cleanup(e.hub.Close)
	const copies = 3
	e.agent(t, SessionInfo{AgentID: "primary", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	for i := range copies {
		e.agent(t, SessionInfo{AgentID: fmt.Sprintf("copy-%d", i), EndpointID: "ep", AccountID: "acc"}, okAnswer)
	}
	cmd := e.Receive(t, "ep", "acc")
	cmd.Body = bytes.Repeat([]byte("x"), 1<<20)
	if out, err := e.hub.Forward(t.Context(), cmd); err != nil || out.AgentID != "primary" {
		t.Fatalf("forward: %+v, %v", out, err)
	}
	var outcomes, recorded []domain.ForwardCommand
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		spy.mu.Lock()
		defer spy.mu.Unlock()
		if len(spy.copies) < copies {
			return fmt.Errorf("%d copies recorded, want %d", len(spy.copies), copies)
		}
		outcomes, recorded = slices.Clone(spy.outcomes), slices.Clone(spy.copies)
		return nil
	})
	sent := domain.DigestRequest(cmd.Method, cmd.Target, cmd.Headers, cmd.Body)
	if len(outcomes) != 1 || outcomes[0].Sent == nil || *outcomes[0].Sent != sent {
		t.Fatalf("primary recorded with %+v, want the request's digests", outcomes)
	}
	for _, cp := range recorded {
		if cp.Headers != nil || cp.Body != nil {
			t.Errorf("copy %s recorded holding %d headers and %d bytes of body, want none", cp.AttemptID, len(cp.Headers), len(cp.Body))
		}
		if cp.Sent != outcomes[0].Sent {
			t.Errorf("copy %s keeps digests %p, want the delivery's one value %p", cp.AttemptID, cp.Sent, outcomes[0].Sent)
		}
	}
}
