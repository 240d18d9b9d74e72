package tunnel

import (
	"sync"

	"github.com/relayhq/relay/domain"
)

// What copies to listeners other than the primary may hold. A copy's
// bytes are held from the moment it is offered to its session until its
// frame is written to the agent's socket or dropped with it (Written, or
// the session's end), however long the agent takes to read: the sender's
// reservation ends with the primary's answer, so a copy takes its own from
// the same body budget (HubConfig.Bodies) under its account's key. A copy
// beyond the budget, or beyond its session's bound, is dropped
// (domain.FailureCopyDropped), as one that finds its session's queue full
// is.

// SessionCopyBytes is what one session's copies in flight may hold, or
// one copy of any size when it holds none: a listener that does not read
// its socket holds one copy, not a queue of them.
const SessionCopyBytes = 4 << 20

// Bodies is the memory budget forwarded bodies share (ingress.BodyBudget,
// --proxy-body-budget): PROXY bodies, the queue's attempts and copies.
type Bodies interface {
	Reserve(key string, n int64) bool
	Release(key string, n int64)
	// Share is the most one key may hold at once.
	Share() int64
}

// copyBudget counts the bytes of copies in flight per session, and takes
// them from the body budget per account.
type copyBudget struct {
	bodies Bodies // nil: copies are bounded per session only

	mu        sync.Mutex
	held      int64
	bySession map[string]*sessionCopies // by agent ID
}

// sessionCopies is one session's copies in flight.
type sessionCopies struct {
	accountID string
	held      int64
	attempts  map[string]int64 // attempt ID → bytes
}

func newCopyBudget(bodies Bodies) *copyBudget {
	return &copyBudget{bodies: bodies, bySession: map[string]*sessionCopies{}}
}

// copyKey is an account's copies' key in the body budget.
func copyKey(accountID string) string { return "copies " + accountID }

// copySize is about the bytes a copy's frame takes: its body, headers and
// request target.
func copySize(cmd domain.ForwardCommand) int64 {
	n := int64(len(cmd.Body) + len(cmd.Target) + len(cmd.Host) + len(cmd.RemoteAddr))
	for _, h := range cmd.Headers {
		n += int64(len(h.Name) + len(h.Value) + 8)
	}
	return n
}

// take counts cp's bytes against session s and the body budget, or
// nothing and false when either has no room. A copy is counted at most at
// one key's share, so that an account that holds none may always have one.
func (b *copyBudget) take(s SessionInfo, cp domain.ForwardCommand) bool {
	n := copySize(cp)
	if b.bodies != nil {
		n = min(n, b.bodies.Share())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	sc := b.bySession[s.AgentID]
	if sc != nil && sc.held > 0 && sc.held+n > SessionCopyBytes {
		return false
	}
	if b.bodies != nil && !b.bodies.Reserve(copyKey(s.AccountID), n) {
		return false
	}
	if sc == nil {
		sc = &sessionCopies{accountID: s.AccountID, attempts: map[string]int64{}}
		b.bySession[s.AgentID] = sc
	}
	sc.attempts[cp.AttemptID] = n
	sc.held += n
	b.held += n
	return true
}

// give returns the bytes of session agentID's copy attemptID, if it still
// holds them.
func (b *copyBudget) give(agentID, attemptID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sc := b.bySession[agentID]
	if sc == nil {
		return
	}
	n, ok := sc.attempts[attemptID]
	if !ok {
		return
	}
	delete(sc.attempts, attemptID)
	sc.held -= n
	b.release(sc.accountID, n)
	if len(sc.attempts) == 0 {
		delete(b.bySession, agentID)
	}
}

// giveAll returns the bytes of every copy session agentID holds: it ended.
func (b *copyBudget) giveAll(agentID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if sc := b.bySession[agentID]; sc != nil {
		b.release(sc.accountID, sc.held)
		delete(b.bySession, agentID)
	}
}

// release gives n bytes of accountID's copies back. b.mu held.
func (b *copyBudget) release(accountID string, n int64) {
	b.held -= n
	if b.bodies != nil {
		b.bodies.Release(copyKey(accountID), n)
	}
}

// inFlight is the bytes copies in flight hold now, in all (for tests).
func (b *copyBudget) inFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// Written tells that the frame of attempt attemptID was written to the
// socket of session agentID, or dropped with it: a copy's bytes are no
// longer held. Any other attempt is ignored.
func (h *Hub) Written(agentID, attemptID string) {
	h.copyBytes.give(agentID, attemptID)
}

// uncountedAnswerHeaders is what a copy's answer with no room in the body
// budget keeps of its headers, uncounted, while it waits to be recorded:
// its leading headers within this many bytes of names and values.
const uncountedAnswerHeaders = 4 << 10

// holdAnswer counts out, a copy's answer (of accountID; to be recorded
// with its body when capture is set), in the body budget under the
// account's copies key, and returns it with what gives the bytes back
// once it is recorded. A copy's outcome waits for the primary's (up to
// --forward-timeout) and for its delivery's other copies to be recorded:
// before, every copy's answer (its body up to --max-body) waited so,
// counted nowhere, and one delivery to 24 listeners answering 1 MiB
// while its primary was silent held 24 MiB. An answer with no room is
// returned without its body (its size kept, NotCapturedBodyBudget) and
// with its leading headers only; a body the log would not store is let
// go of at once.
func (h *Hub) holdAnswer(accountID string, capture bool, out domain.ForwardOutcome) (domain.ForwardOutcome, func()) {
	h.answersWaiting.Add(1)
	done := func() { h.answersWaiting.Add(-1) }
	if !capture && out.Body != nil {
		out.BodySize, out.Body = int64(len(out.Body)), nil
	}
	if h.bodies == nil || out.Failed() {
		return out, done
	}
	key, n := copyKey(accountID), min(answerSize(out), h.bodies.Share())
	if h.bodies.Reserve(key, n) {
		return out, func() { h.bodies.Release(key, n); done() }
	}
	if out.Body != nil {
		out.BodySize, out.Body, out.NotCaptured = int64(len(out.Body)), nil, domain.NotCapturedBodyBudget
	}
	size := 0
	for i, hd := range out.Headers {
		if size += len(hd.Name) + len(hd.Value); size > uncountedAnswerHeaders {
			out.Headers, out.DroppedHeaders = out.Headers[:i:i], len(out.Headers)-i
			break
		}
	}
	h.logger.Warn("copy's answer held without its body: body budget", "attempt_id", out.AttemptID, "account_id", accountID, "bytes", n)
	return out, done
}

// CopyAnswersWaiting is how many copies' answers this node holds, back
// from their listeners (here or on other nodes) and not yet recorded.
func (h *Hub) CopyAnswersWaiting() int64 { return h.answersWaiting.Load() }
