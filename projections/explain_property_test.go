package projections

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/explain"
)

// explainRuns is how many random deliveries the property test records,
// drawn from explainSeed (fixed, so a failure replays).
const (
	explainRuns = 150
	explainSeed = 20261128
)

// TestExplanationTellsTheSenderAndTheShownStatusApart: for random
// sequences of a receipt (answered at once, or forwarded), the forward's
// outcome (in time, after the relay's 504, lost with the relay, or none
// yet), copies, retries and edited retries, recorded in the real store and
// read back from the real history view, the explanation's sender answer is
// what the sender's connection received (the model below, which plays
// ingress), its shown status is the history's responseStatus, and the
// summary never tells a retry or a copy as the sender's answer.
func TestExplanationTellsTheSenderAndTheShownStatusApart(t *testing.T) {
	e := newEnv(t, Options{})
	rng := rand.New(rand.NewPCG(explainSeed, 0x5eed))
	for run := range explainRuns {
		id := fmt.Sprintf("d-%03d", run)
		c := generateDelivery(rng, id)
		e := e.with(t)
		for _, s := range c.steps {
			e.do(e.save(e.ctx, domain.DeliveryStream(id), s.expected, t0.Add(s.at), s.events...))
		}
		d := e.delivery(id)
		x, err := explain.Delivery(e.ctx, d, e.views)
		if err != nil {
			t.Fatal(err)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Errorf("run %d (%s):\n%s\n"+format+"\nexplanation:\n%s", append([]any{run, id, c.story()}, append(args, x.Text())...)...)
		}
		switch got := x.Sender; {
		case c.sender == nil && got != nil:
			fail("sender answer %+v, want none (lost %v)", *got, c.lost)
		case c.sender != nil && (got == nil || got.Status != c.sender.Status || got.Attempt != c.sender.Attempt || !got.At.Equal(c.sender.At)):
			fail("sender answer %+v, want %+v", got, *c.sender)
		case x.SenderLost != c.lost:
			fail("SenderLost %v, want %v", x.SenderLost, c.lost)
		}
		switch {
		case (x.Shown == nil) != (d.ResponseStatus == nil):
			fail("shown %+v, history's responseStatus %v", x.Shown, d.ResponseStatus)
		case x.Shown != nil && x.Shown.Status != *d.ResponseStatus:
			fail("shown %+v, history's responseStatus %d", *x.Shown, *d.ResponseStatus)
		case x.Shown != nil && x.Shown.Attempt > 0:
			a := d.Attempts[x.Shown.Attempt-1]
			want := explain.ShownForward
			if a.Retry && a.Edit != nil {
				want = explain.ShownEditedRetry
			} else if a.Retry {
				want = explain.ShownRetry
			}
			if a.Copy || x.Shown.Kind != want {
				fail("shown %+v from attempt %+v, want kind %s and no copy", *x.Shown, a, want)
			}
		}
		// A retry's outcome shown is never the sender's answer; nothing
		// else is shown apart from it.
		shownApart := x.Shown != nil && (x.Shown.Kind == explain.ShownRetry || x.Shown.Kind == explain.ShownEditedRetry)
		switch {
		case shownApart && x.SameAsSender():
			fail("a retry's outcome is told as the sender's answer")
		case shownApart && x.Sender != nil && !strings.HasPrefix(x.Summary, fmt.Sprintf("The sender was answered %d ", x.Sender.Status)):
			fail("the summary does not begin with what the sender got")
		case shownApart && !strings.Contains(x.Summary, fmt.Sprintf("Shown now: %d, from attempt %d", x.Shown.Status, x.Shown.Attempt)):
			fail("the summary does not tell apart the status shown now")
		case !shownApart && strings.Contains(x.Summary, "Shown now"):
			fail("the summary tells a shown status apart from the sender's answer, which it is not")
		}
		for _, f := range x.Facts {
			if strings.Contains(f.Text, "the sender waited") && !strings.Contains(f.Text, "(attempt 1)") {
				fail("a fact says the sender waited for an attempt other than its own: %q", f.Text)
			}
		}
	}
}

// explainCase is one generated delivery: its appends, and what its sender
// got as ingress would have answered it.
type explainCase struct {
	steps  []explainStep
	sender *explain.SenderAnswer // nil: none (yet, or lost)
	lost   bool
}

type explainStep struct {
	at       time.Duration // after t0
	expected domain.ExpectedRevision
	events   []domain.Event
	note     string
}

func (c explainCase) story() string {
	var b strings.Builder
	for _, s := range c.steps {
		fmt.Fprintf(&b, "  +%s %s\n", s.at, s.note)
	}
	return b.String()
}

// generateDelivery draws one delivery's history.
func generateDelivery(rng *rand.Rand, id string) explainCase {
	const ep = "ep-1"
	var c explainCase
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	add := func(at int, note string, events ...domain.Event) {
		for i, ev := range events {
			events[i] = withDelivery(ev, id)
		}
		c.steps = append(c.steps, explainStep{at: sec(at), expected: domain.Any(), events: events, note: note})
	}
	req := request("/hook", `{"n":1}`)
	statuses := []int{200, 201, 204, 400, 404, 500}
	outcome := func(attempt, agent string, copyOf bool) (domain.Event, int, string) {
		switch rng.IntN(4) {
		case 0:
			if copyOf {
				return domain.ForwardFailed{AttemptID: attempt, AgentID: agent, Status: 503, Error: domain.FailureCopyDropped, Copy: true}, 503, "fails: copy dropped"
			}
			return domain.ForwardFailed{AttemptID: attempt, AgentID: agent, Status: 502, Error: "nothing listening on 127.0.0.1:9"}, 502, "fails 502"
		case 1:
			if !copyOf && agent == "" {
				return domain.ForwardFailed{AttemptID: attempt, Status: 503, Error: domain.FailureNoAgent}, 503, "fails 503 no agent"
			}
		}
		s := statuses[rng.IntN(len(statuses))]
		return domain.ForwardResponded{AttemptID: attempt, AgentID: agent, Status: s, DurationMs: 3, Copy: copyOf}, s, fmt.Sprintf("answered %d", s)
	}

	proxied := rng.IntN(4) != 0
	if !proxied {
		status, reason := 204, ""
		if rng.IntN(2) == 0 {
			status, reason = 202, domain.ReasonConfiguredAnswer
		}
		d, err := domain.ReceiveAndAnswer(id, ep, domain.AddressEndpoint, "acct-1", req, status, reason)
		if err != nil {
			panic(err)
		}
		c.steps = append(c.steps, explainStep{expected: d.Expected(), events: d.Changes(), note: fmt.Sprintf("received, answered %d by the relay", status)})
		c.sender = &explain.SenderAnswer{Status: status, At: t0}
	} else {
		d, err := domain.ReceiveDelivery(id, ep, domain.AddressEndpoint, "acct-1", req)
		if err != nil {
			panic(err)
		}
		events := append(d.Changes(), withDelivery(domain.ForwardRequested{AttemptID: "a1", EndpointID: ep, Node: "node-a"}, id))
		c.steps = append(c.steps, explainStep{expected: d.Expected(), events: events, note: "received, forward a1 requested"})
	}

	// What becomes of the sender's forward, as a step among the others.
	type op func(at int)
	var ops []op
	var lateOutcome op
	if proxied {
		switch fate := rng.IntN(4); fate {
		case 0: // answered in time
			ops = append(ops, func(at int) {
				ev, s, note := outcome("a1", "ag-1", false)
				add(at, "a1 "+note, ev)
				c.sender = &explain.SenderAnswer{Status: s, Attempt: 1, At: t0.Add(sec(at))}
			})
		case 1: // no outcome in time: the relay answers 504; the outcome may land later
			ops = append(ops, func(at int) {
				add(at, "the relay answers 504 (no outcome in time)", domain.DeliveryAnswered{Status: 504, Reason: domain.ReasonNoOutcome + "forward a1: timeout"})
				c.sender = &explain.SenderAnswer{Status: 504, At: t0.Add(sec(at))}
			})
			if rng.IntN(2) == 0 {
				lateOutcome = func(at int) {
					ev, _, note := outcome("a1", "ag-1", false)
					add(at, "a1 late: "+note, ev)
				}
			}
		case 2: // the relay restarted while the sender waited
			ops = append(ops, func(at int) {
				add(at, "a1 closed at restart", domain.ForwardFailed{AttemptID: "a1", Status: 503, Error: domain.FailureRestarted})
				c.lost = true
			})
		}
	}
	for n := range rng.IntN(4) {
		switch {
		case proxied && rng.IntN(3) == 0:
			att, agent := fmt.Sprintf("c%d", n), fmt.Sprintf("ag-copy-%d", n)
			ops = append(ops, func(at int) {
				ev, _, note := outcome(att, agent, true)
				add(at, att+" copy for "+agent+", "+note,
					domain.ForwardRequested{AttemptID: att, EndpointID: ep, Copy: true, AgentID: agent, Node: "node-a"}, ev)
			})
		default:
			att := fmt.Sprintf("r%d", n)
			var edit *domain.RequestEdit
			if rng.IntN(2) == 0 {
				edit = &domain.RequestEdit{Method: "PUT"}
			}
			pending := rng.IntN(5) == 0
			ops = append(ops, func(at int) {
				events := []domain.Event{domain.RetryRequested{AttemptID: att, AccountID: "acct-1"},
					domain.ForwardRequested{AttemptID: att, EndpointID: ep, Retry: true, Edit: edit, Node: "node-b"}}
				note := att + " retry"
				if edit != nil {
					note += " (edited)"
				}
				if !pending {
					ev, _, what := outcome(att, "ag-1", false)
					events, note = append(events, ev), note+", "+what
				}
				add(at, note, events...)
			})
		}
	}
	// Any order of the sender's outcome and the other ops (a retry may
	// run while the sender still waits), then the late outcome, if any.
	rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	if lateOutcome != nil {
		ops = append(ops, lateOutcome)
	}
	for i, o := range ops {
		o(i + 1)
	}
	return c
}
