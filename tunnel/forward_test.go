package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/record"
)

// A Hub without a bus serves the sessions it holds: nothing is encoded,
// and the outcome is recorded before Forward returns.
func TestHubForwardWithoutBus(t *testing.T) {
	e := newEnv(t)
	e.hub = NewHub(HubConfig{Recorder: record.New(record.Config{Store: e.Store, Codec: e.Codec})})
	t.Cleanup(e.hub.Close)
	e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc", Target: "localhost:3000"}, okAnswer)

	cmd := e.Receive(t, "ep", "acc")
	out, err := e.hub.Forward(t.Context(), cmd)
	if err != nil || out.Status != 200 {
		t.Fatalf("forward = %+v, %v; want 200", out, err)
	}
	rec, ev := e.Last(t, domain.DeliveryStream(cmd.DeliveryID))
	if _, ok := ev.(domain.ForwardResponded); !ok || out.Position != rec.Position {
		t.Errorf("last event %T at %d, outcome position %d", ev, rec.Position, out.Position)
	}

	out, err = e.hub.Forward(t.Context(), e.Receive(t, "other", "acc"))
	if err != nil || out.Status != 503 || out.Error != "no agent connected" {
		t.Errorf("forward without agent = %+v, %v; want 503", out, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	e.agent(t, SessionInfo{AgentID: "slow", EndpointID: "slow", AccountID: "acc"}, never)
	var te *TimeoutError
	if _, err := e.hub.Forward(ctx, e.Receive(t, "slow", "acc")); !errors.As(err, &te) {
		t.Errorf("forward past its deadline = %v, want *TimeoutError", err)
	}
}

// Close ends attempts in flight with 503, recorded.
func TestHubCloseFailsAttemptsInFlight(t *testing.T) {
	e := newEnv(t)
	got, _ := e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, never)
	cmd := e.Receive(t, "ep", "acc")
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
	if _, ev := e.Last(t, domain.DeliveryStream(cmd.DeliveryID)); ev.(domain.ForwardFailed).Status != 503 {
		t.Errorf("last event %+v", ev)
	}
}

// stuckRecorder holds every outcome's recording until release is closed,
// as a store that stopped answering would.
type stuckRecorder struct {
	Recorder
	release chan struct{}
}

func (r stuckRecorder) RecordOutcome(ctx context.Context, cmd domain.ForwardCommand, out domain.ForwardOutcome) (uint64, error) {
	<-r.release
	return r.Recorder.RecordOutcome(ctx, cmd, out)
}

// Forward bounds its own wait, whatever its caller's context: ingress
// hands it the sender's request context without a deadline of its own. An
// outcome that is not recorded within the attempt's timeout and the grace
// for recording ends the wait with a *TimeoutError.
func TestForwardBoundsItsWaitForTheRecord(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	e.hub = NewHub(HubConfig{Recorder: stuckRecorder{Recorder: record.New(record.Config{Store: e.Store, Codec: e.Codec}), release: release}})
	t.Cleanup(e.hub.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the recording
	e.hub.recordGrace = 50 * time.Millisecond
	e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	cmd := e.Receive(t, "ep", "acc")
	cmd.Timeout = 50 * time.Millisecond

	errs := make(chan error, 1)
	go func() {
		_, err := e.hub.Forward(context.Background(), cmd)
		errs <- err
	}()
	select {
	case err := <-errs:
		var te *TimeoutError
		if !errors.As(err, &te) || te.AttemptID != cmd.AttemptID {
			t.Fatalf("forward whose outcome is never recorded = %v, want *TimeoutError for %s", err, cmd.AttemptID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Forward still waiting for an unrecorded outcome after 10 s")
	}
}

// Every listener's copy of a delivery is recorded. The copies all wait for
// the primary's outcome and are then recorded together, each append to the
// delivery's stream at its next revision: recorded at once, they refused
// one another's appends until their tries ran out, and 8 of 40 listeners'
// answers reached the log.
func TestEveryCopyOfADeliveryIsRecorded(t *testing.T) {
	e := newEnv(t)
	const listeners = 40
	for i := range listeners {
		e.agent(t, SessionInfo{AgentID: fmt.Sprintf("l%d", i), EndpointID: "ep", AccountID: "acc"}, okAnswer)
	}
	cmd := e.Receive(t, "ep", "acc")
	if out, err := e.hub.Forward(t.Context(), cmd); err != nil || out.Status != 200 {
		t.Fatalf("forward = %+v, %v", out, err)
	}
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		answered := map[string]bool{}
		for _, r := range e.Events(t, domain.DeliveryStream(cmd.DeliveryID)) {
			if a, ok := e.Decode(t, r).(domain.ForwardResponded); ok {
				answered[a.AgentID] = true
			}
		}
		if len(answered) != listeners {
			return fmt.Errorf("%d listeners' answers recorded, want %d", len(answered), listeners)
		}
		if n := e.hub.rec.(*record.Recorder).TurnsHeld(); n != 0 {
			return fmt.Errorf("%d deliveries' locks kept once their copies are recorded", n)
		}
		return nil
	})
}

// A copy another node sent here is answered again with the answer kept
// for it when its sender asks again (it heard neither the acknowledgement
// nor the reply). Those answers are kept as counted in the body budget,
// within their account's share, and only while the sender may ask: 32
// answers of 1 MiB were kept whole, five minutes. One not kept is answered
// again as lost, never as another answer.
func TestKeptCopyAnswersAreBounded(t *testing.T) {
	e := newEnv(t)
	budget := ingress.NewBodyBudget(16<<20, 1) // 4 MiB per key
	e.hub.bodies, e.hub.copyBytes = budget, newCopyBudget(budget)
	answerWith := func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
		return domain.ForwardOutcome{Status: 200, Body: bytes.Repeat([]byte("y"), 1<<20)}, true
	}
	e.agent(t, SessionInfo{AgentID: "b1", EndpointID: "ep", AccountID: "acc"}, answerWith)
	e.agent(t, SessionInfo{AgentID: "o1", EndpointID: "ep-o", AccountID: "other"}, answerWith)
	copyFor := func(i int) domain.ForwardCommand {
		return domain.ForwardCommand{DeliveryID: "d", AttemptID: fmt.Sprintf("copy-%d", i), EndpointID: "ep", AccountID: "acc",
			Method: "POST", Target: "/", Timeout: 10 * time.Second, Agent: "b1", Copy: true}
	}
	receive := func(cmd domain.ForwardCommand) domain.ForwardOutcome {
		got := make(chan domain.ForwardOutcome, 1)
		e.hub.Receive(cmd, func() {}, func(out domain.ForwardOutcome, err error) {
			if err != nil {
				t.Errorf("copy %s: %v", cmd.AttemptID, err)
			}
			got <- out
		})
		return <-got
	}
	const copies = 32
	before := heapInUse()
	for i := range copies {
		if out := receive(copyFor(i)); out.Status != 200 || len(out.Body) != 1<<20 {
			t.Fatalf("copy %d answered %d with %d bytes", i, out.Status, len(out.Body))
		}
	}
	kept := func() (n int64, done int) {
		e.hub.mu.Lock()
		defer e.hub.mu.Unlock()
		for _, r := range e.hub.received {
			if r.done {
				done++
			}
			if r.out != nil {
				n += int64(len(r.out.Body))
			}
		}
		return n, done
	}
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if _, done := kept(); done != copies {
			return fmt.Errorf("%d copies done of %d", done, copies)
		}
		return nil
	})
	n, _ := kept()
	t.Logf("%d copies' answers of 1 MiB: %d MiB kept, the heap %d MiB larger", copies, n>>20, (heapInUse()-before)>>20)
	if n > budget.Share() {
		t.Errorf("%d MiB of one account's copies' answers kept, want at most its share of the body budget, %d MiB", n>>20, budget.Share()>>20)
	}

	// Asked again, the first copy is answered what its listener answered,
	// the last, whose answer was not kept, as lost.
	if out := receive(copyFor(0)); out.Status != 200 || len(out.Body) != 1<<20 {
		t.Errorf("the first copy asked again: %d with %d bytes, want its answer", out.Status, len(out.Body))
	}
	if out := receive(copyFor(copies - 1)); out.Status != 503 || out.Error != domain.FailureCopyAnswerLost || len(out.Body) != 0 {
		t.Errorf("the last copy asked again: %+v, want 503 %q", out.Status, domain.FailureCopyAnswerLost)
	}
	// Another account's answers are kept beside them.
	other := copyFor(copies)
	other.EndpointID, other.AccountID, other.Agent = "ep-o", "other", "o1"
	receive(other)
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if _, done := kept(); done != copies+1 {
			return fmt.Errorf("%d copies done of %d", done, copies+1)
		}
		return nil
	})
	if again := receive(other); again.Status != 200 || len(again.Body) != 1<<20 {
		t.Errorf("another account's copy asked again: %d with %d bytes, want its answer", again.Status, len(again.Body))
	}
	// Past the senders' wait, nothing is kept.
	keptBytes, _ := kept()
	inUse := budget.InUse()
	e.hub.mu.Lock()
	e.hub.letGoKept(time.Now().Add(10*time.Second + ReplyGrace + time.Second))
	e.hub.mu.Unlock()
	if n, _ := kept(); n != 0 || budget.InUse() > inUse-keptBytes {
		t.Errorf("past the senders' wait %d bytes kept; the budget holds %d bytes, want at most %d", n, budget.InUse(), inUse-keptBytes)
	}
}
