package tunnel

import (
	"sync"

	"github.com/relayhq/relay/domain"
)

// What copies to listeners other than the primary may hold. A copy's
// bytes are held from the moment it is offered to its session until its
// frame is written to the agent's socket or dropped with it (Written, or
// the session's end), however long the agent takes to read: they are
// counted outside the senders' body budget, which the primary's answer
// releases, so they have bounds of their own. A copy beyond any of them is
// dropped (domain.FailureCopyDropped), as one that finds its session's
// queue full is.
const (
	// DefaultCopyBudget is the bytes all copies in flight may hold at
	// once when HubConfig.CopyBudget is zero. One account may hold a
	// quarter of it, or one copy of any size when it holds none.
	DefaultCopyBudget = 256 << 20
	// SessionCopyBytes is what one session's copies in flight may hold,
	// or one copy of any size when it holds none: a listener that does
	// not read its socket holds one copy, not a queue of them.
	SessionCopyBytes = 4 << 20
)

// copyBudget counts the bytes of copies in flight, per session, per
// account and in all.
type copyBudget struct {
	total, perAccount int64

	mu        sync.Mutex
	used      int64
	byAccount map[string]int64
	bySession map[string]*sessionCopies // by agent ID
}

// sessionCopies is one session's copies in flight.
type sessionCopies struct {
	accountID string
	held      int64
	attempts  map[string]int64 // attempt ID → bytes
}

func newCopyBudget(total int64) *copyBudget {
	if total <= 0 {
		total = DefaultCopyBudget
	}
	return &copyBudget{total: total, perAccount: total / 4, byAccount: map[string]int64{}, bySession: map[string]*sessionCopies{}}
}

// copySize is about the bytes a copy's frame takes: its body, headers and
// request target.
func copySize(cmd domain.ForwardCommand) int64 {
	n := int64(len(cmd.Body) + len(cmd.Target) + len(cmd.Host) + len(cmd.RemoteAddr))
	for _, h := range cmd.Headers {
		n += int64(len(h.Name) + len(h.Value) + 8)
	}
	return n
}

// take counts cp's bytes against session s, its account and the whole, or
// nothing and false when any of them has no room.
func (b *copyBudget) take(s SessionInfo, cp domain.ForwardCommand) bool {
	n := copySize(cp)
	b.mu.Lock()
	defer b.mu.Unlock()
	sc, inAccount := b.bySession[s.AgentID], b.byAccount[s.AccountID]
	switch {
	case b.used+n > b.total,
		inAccount > 0 && inAccount+n > b.perAccount,
		sc != nil && sc.held > 0 && sc.held+n > SessionCopyBytes:
		return false
	}
	if sc == nil {
		sc = &sessionCopies{accountID: s.AccountID, attempts: map[string]int64{}}
		b.bySession[s.AgentID] = sc
	}
	sc.attempts[cp.AttemptID] = n
	sc.held += n
	b.byAccount[s.AccountID] += n
	b.used += n
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

// release takes n bytes off accountID's and the whole's counts. b.mu held.
func (b *copyBudget) release(accountID string, n int64) {
	b.used -= n
	if b.byAccount[accountID] -= n; b.byAccount[accountID] <= 0 {
		delete(b.byAccount, accountID)
	}
}

// held is the bytes copies in flight hold now, in all (for tests).
func (b *copyBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Written tells that the frame of attempt attemptID was written to the
// socket of session agentID, or dropped with it: a copy's bytes are no
// longer held. Any other attempt is ignored.
func (h *Hub) Written(agentID, attemptID string) {
	h.copyBytes.give(agentID, attemptID)
}
