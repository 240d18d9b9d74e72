package tunnel

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/testwait"
)

// A copy's outcome is recorded after the primary's, so its answer waits
// for the primary. While the primary is silent, the copies' answers are
// held only as counted in the body budget (their account's share): the
// rest wait without their bodies and are recorded saying why. Every copy
// is still recorded, with the size its listener answered.
func TestCopiesAnswersWaitingForThePrimaryAreCounted(t *testing.T) {
	e := newEnv(t)
	bodies := ingress.NewBodyBudget(16<<20, 1) // 4 MiB per account
	e.hub.bodies, e.hub.copyBytes = bodies, newCopyBudget(bodies)
	const copies, size = 24, 1 << 20
	release := make(chan struct{})
	e.agent(t, SessionInfo{AgentID: "primary", EndpointID: "ep", AccountID: "acc", Primary: true},
		func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
			<-release // silent until the copies' answers are measured
			return okAnswer(cmd)
		})
	for i := range copies {
		e.agent(t, SessionInfo{AgentID: fmt.Sprintf("copy-%d", i), EndpointID: "ep", AccountID: "acc"},
			func(domain.ForwardCommand) (domain.ForwardOutcome, bool) {
				return domain.ForwardOutcome{Status: 200, Body: bytes.Repeat([]byte("y"), size)}, true
			})
	}
	cmd := e.Receive(t, "ep", "acc")
	cmd.CaptureResponse, cmd.Timeout = true, time.Hour
	before := heapInUse()
	res := e.forwardInBackground(t, cmd)
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if n := e.hub.answersWaiting.Load(); n != copies {
			return fmt.Errorf("%d copies' answers back, want %d", n, copies)
		}
		return nil
	})
	held := heapInUse() - before
	t.Logf("%d copies answering %d KiB while the primary is silent: the heap %d MiB larger", copies, size>>10, held>>20)
	if limit := bodies.Share() + 4<<20; held > limit {
		t.Errorf("copies' answers waiting for the primary hold %d MiB, want at most their account's share (%d MiB) and a little",
			held>>20, bodies.Share()>>20)
	}
	close(release)
	if out := <-res; out.Status != 200 || out.AgentID != "primary" {
		t.Fatalf("forward = %d from %q, want 200 from the primary", out.Status, out.AgentID)
	}

	var captured, notCaptured int
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		captured, notCaptured = 0, 0
		for _, r := range e.Events(t, domain.DeliveryStream(cmd.DeliveryID)) {
			a, ok := e.Decode(t, r).(domain.ForwardResponded)
			if !ok || !a.Copy {
				continue
			}
			if a.BodySize != size {
				return fmt.Errorf("copy %s recorded with a body of %d bytes, want %d", a.AttemptID, a.BodySize, size)
			}
			switch {
			case a.Captured && len(a.Body) == size && a.NotCaptured == "":
				captured++
			case !a.Captured && a.Body == nil && a.NotCaptured == domain.NotCapturedBodyBudget:
				notCaptured++
			default:
				return fmt.Errorf("copy %s recorded captured=%v with %d bytes, not captured %q", a.AttemptID, a.Captured, len(a.Body), a.NotCaptured)
			}
		}
		if captured+notCaptured != copies {
			return fmt.Errorf("%d copies recorded, want %d", captured+notCaptured, copies)
		}
		return nil
	})
	t.Logf("%d copies recorded with their answer's body, %d without", captured, notCaptured)
	if captured == 0 || notCaptured == 0 {
		t.Errorf("%d copies' bodies recorded, %d not: want those within the share recorded, the rest not", captured, notCaptured)
	}
	// What the budget still holds is the copies' requests, whose frames
	// the agents here never report written.
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n, reqs := bodies.InUse(), e.hub.copyBytes.inFlight(); n != reqs || e.hub.answersWaiting.Load() != 0 {
			return fmt.Errorf("%d bytes of the body budget held, %d of them copies' requests, %d answers waiting; want the requests' alone",
				n, reqs, e.hub.answersWaiting.Load())
		}
		return nil
	})
}
