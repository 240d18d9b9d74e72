package agentcli

import "sync"

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
