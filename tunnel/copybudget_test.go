package tunnel

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/testwait"
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
		cmd := e.receive(t, ep, acc)
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
		cmd := e.receive(t, "ep", "acc")
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
