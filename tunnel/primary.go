package tunnel

import (
	"context"
	"sort"

	"github.com/relayhq/relay/domain"
)

// The primary rule: of an Endpoint's live sessions, the newest that asked
// to be primary (relay listen --primary) answers the senders; when none
// asked, the first connected does. It is decided again whenever a session
// comes or goes, so when the primary leaves the oldest remaining session
// takes over (or the newest remaining one that asked). Every other session
// gets a copy. For one delivery the rule is applied to the sessions whose
// filters match it: the primary's filters not matching, the next session
// in the rule's order that matches answers.

// sessionQueue is how many forwards a session holds before its agent
// reads them; a copy that finds it full is dropped, not waited for.
const sessionQueue = 16

// primaryOf applies the rule to sessions in attach order.
func primaryOf(sessions []*session) *session {
	for i := len(sessions) - 1; i >= 0; i-- {
		if sessions[i].info.Primary {
			return sessions[i]
		}
	}
	if len(sessions) == 0 {
		return nil
	}
	return sessions[0]
}

// primaryChange is a new primary of an Endpoint, to record.
type primaryChange struct {
	endpointID string
	was, now   *session
	reason     string
}

// elect applies the rule to an Endpoint's sessions and remembers the
// result; it returns the change to record (now == was when none). h.mu held.
func (h *Hub) elect(endpointID string) primaryChange {
	was := h.primary[endpointID]
	now := primaryOf(h.byEndpoint[endpointID])
	c := primaryChange{endpointID: endpointID, was: was, now: now}
	if now == was {
		return c
	}
	if now == nil {
		delete(h.primary, endpointID)
	} else {
		h.primary[endpointID] = now
	}
	stillHere := false
	for _, s := range h.byEndpoint[endpointID] {
		stillHere = stillHere || s == was
	}
	switch {
	case now == nil:
		c.reason = domain.PrimaryNone
	case was == nil:
		c.reason = domain.PrimaryFirst
		if now.info.Primary {
			c.reason = domain.PrimaryAsked
		}
	case stillHere:
		c.reason = domain.PrimaryAsked
	default:
		c.reason = domain.PrimaryLeft
	}
	return c
}

func (h *Hub) recordPrimary(ctx context.Context, c primaryChange) {
	if c.now == c.was {
		return
	}
	id, prev := "", ""
	if c.now != nil {
		id = c.now.info.AgentID
	}
	if c.was != nil {
		prev = c.was.info.AgentID
	}
	if err := h.rec.PrimaryChanged(ctx, c.endpointID, id, prev, c.reason); err != nil {
		h.logger.Error("record primary change", "endpoint_id", c.endpointID, "agent_id", id, "error", err)
	}
	h.logger.Info("primary changed", "endpoint_id", c.endpointID, "agent_id", id, "previous", prev, "reason", c.reason)
}

// Listeners lists the live sessions of an Endpoint this process holds, in
// the order they connected, the primary marked.
func (h *Hub) Listeners(endpointID string) []Listener {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.primary[endpointID]
	var out []Listener
	for _, s := range h.byEndpoint[endpointID] {
		out = append(out, Listener{SessionInfo: s.info, IsPrimary: s == p, ConnectedAt: s.at, Node: h.node})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ConnectedAt.Before(out[j].ConnectedAt) })
	return out
}
