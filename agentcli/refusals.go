package agentcli

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// maxSentAnswers bounds sentAnswers: at several thousand forwards a second
// it spans a fifth of a second or more, while a refusal comes as soon as
// the relay has read the Complete it refuses.
const maxSentAnswers = 1024

// sentAnswers remembers the forwards whose answers went to a relay that
// replies only to refuse one (agentwire.Acknowledges is false), so that a
// refusal, which the reader takes apart from the worker that told the
// Observer of the forward, can name the request. It holds the last maxSentAnswers, the
// request's headers and body left out: memory stays bounded whatever the
// relay answers, and a refusal of an answer already forgotten is reported
// by its attempt ID alone.
type sentAnswers struct {
	mu   sync.Mutex
	byID map[string]ForwardEvent
	ring []string // attempt IDs in the order sent; next is the oldest
	next int
}

// add remembers ev's forward, forgetting the oldest when full.
func (r *sentAnswers) add(ev ForwardEvent) {
	ev.RequestHeaders, ev.RequestBody = nil, nil
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ring == nil {
		r.byID = make(map[string]ForwardEvent, maxSentAnswers)
		r.ring = make([]string, maxSentAnswers)
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.byID, old)
	}
	r.ring[r.next] = ev.AttemptID
	r.next = (r.next + 1) % len(r.ring)
	r.byID[ev.AttemptID] = ev
}

// take returns and forgets the forward of attempt id, if remembered.
func (r *sentAnswers) take(id string) (ForwardEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev, ok := r.byID[id]
	delete(r.byID, id)
	return ev, ok
}

// refused tells the Observer that the relay refused the answer of attempt
// id: an event of its own beside the one that tells of the forward
// (usually after it; ForwardEvent.ReportOnly).
func (s *session) refused(id string, why error) {
	ev, ok := s.sent.take(id)
	if !ok {
		ev = ForwardEvent{Method: "answer", Path: "of attempt " + id, AttemptID: id}
	}
	ev.ReportError, ev.ReportOnly = why.Error(), true
	s.a.obs.Forwarded(ev)
}

// A forward the agent does not run (past MaxBytesInFlight, or a request it
// could not read) is reported failed by one of at most maxRefusing workers
// at a time, each taking the refusals from a queue of maxRefusalsQueued;
// past those the forward is not reported and the Observer is told so (the
// relay answers the attempt at its own timeout). Before, each got a worker
// of its own: a relay sending forwards past the bound, and not answering
// their reports (which a worker waits for on the acknowledged
// subprotocols and on plain GraphQL), started a goroutine for each.
const (
	maxRefusing       = 4
	maxRefusalsQueued = 256
)

// A queued refusal keeps at most maxRefusalText bytes of each of the
// request's method, path and IDs (what a report and the Observer name):
// the queue holds no more than its count of them whatever the relay sent.
const maxRefusalText = 1 << 10

// ErrRefusalsQueued is the report error of a forward refused while
// maxRefusalsQueued others waited to be reported: it is not reported.
var ErrRefusalsQueued = errors.New("not reported: the agent was reporting too many refused forwards already")

// refusal is a forward the agent does not run, to report.
type refusal struct {
	sv *served
	w  work
}

// refuse reports w, a forward not run, from a refusal worker, starting one
// when fewer than maxRefusing run; past the queue it tells the Observer
// only. Only the reading goroutine calls it.
func (s *session) refuse(ctx context.Context, sv *served, w work) {
	w.req = localRequest{}
	w.attemptID, w.deliveryID = clip(w.attemptID), clip(w.deliveryID)
	w.method, w.path = clip(w.method), clip(w.path)
	if s.refusals == nil {
		s.refusals = make(chan refusal, maxRefusalsQueued)
	}
	select {
	case s.refusals <- refusal{sv: sv, w: w}:
	default:
		ev := ForwardEvent{Time: time.Now(), EndpointID: sv.info.ID, DeliveryID: w.deliveryID, AttemptID: w.attemptID, Method: w.method, Path: w.path,
			Copy: s.receivesCopies(sv), Status: 502, Error: w.err.Error(), ReportError: ErrRefusalsQueued.Error()}
		s.a.obs.Forwarded(ev)
		return
	}
	if s.startRefusing() {
		refusals := s.refusals
		s.workers.Go(func(wk *worker) { s.reportRefusals(ctx, wk, refusals) })
	}
}

// startRefusing counts one more refusal worker unless maxRefusing run.
func (s *session) startRefusing() bool {
	for {
		n := s.refusing.Load()
		if n >= maxRefusing {
			return false
		}
		if s.refusing.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// reportRefusals reports the queued refusals until none is left. A
// refusal queued while every worker was counted is seen by the last to
// stop: each looks at the queue again once it is no longer counted.
func (s *session) reportRefusals(ctx context.Context, wk *worker, refusals chan refusal) {
	for {
		select {
		case r := <-refusals:
			s.handle(ctx, wk, r.sv, r.w)
			continue
		default:
		}
		s.refusing.Add(-1)
		if len(refusals) == 0 || !s.startRefusing() {
			return
		}
	}
}

// clip is at most maxRefusalText bytes of t, apart from what t held.
func clip(t string) string {
	if len(t) <= maxRefusalText {
		return t
	}
	return strings.Clone(t[:maxRefusalText])
}
