package tunnel

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/relayhq/relay/domain"
)

// The primary rule (domain.PrimaryIndex): of an Endpoint's live sessions,
// in the order the log holds their starts, the newest that asked to be
// primary (relay listen --primary) answers the senders; when none asked,
// the first connected does. Every other session gets a copy. With several
// nodes the rule is applied to the sessions of every node (HubConfig.
// Roster, read from the log's views), so every node picks the same
// primary. For one delivery the rule is applied to the sessions whose
// filters match it: the primary's filters not matching, the next session
// in the rule's order that matches answers.

// sessionQueue is how many forwards a session holds before its agent
// reads them; a copy that finds it full is dropped, not waited for.
const sessionQueue = 16

// RemoteSession is an open agent session of an Endpoint as the log shows
// it, on any live node: what the rule, the filters and Listeners read for
// the sessions this process does not hold.
type RemoteSession struct {
	AgentID     string
	Node        string
	Target      string
	Asked       bool // started with --primary
	Filters     []domain.Filter
	Position    uint64 // of its agent.connected.v1: the rule's order
	ConnectedAt time.Time
	// Ending: its node's lease lapsed, and the log does not hold its end
	// yet (a live node's reaper records it, CloseStale). It takes no work
	// and no copy; a command no other session takes waits until the
	// Roster no longer shows it (awaitEnds), so the 503 no agent connected
	// it is answered comes after that end in the log.
	Ending bool
}

// lapsedPoll is how often a command that waits for the end of a lost
// node's session (RemoteSession.Ending) reads the Roster again: the
// reaper records the end within a fraction of a lease of the lapse.
const lapsedPoll = 100 * time.Millisecond

// member is one session of an Endpoint, held here (local) or by another
// node (remote), in the rule's terms.
type member struct {
	local  *session      // held by this process
	remote RemoteSession // the session, when another node holds it
	pos    uint64
	asked  bool
}

func (m member) filters() []domain.Filter {
	if m.local != nil {
		return m.local.info.Filters
	}
	return m.remote.Filters
}

// primaryOf applies the rule to members in the rule's order.
func primaryOf(ms []member) int {
	return domain.PrimaryIndex(len(ms), func(i int) bool { return ms[i].asked })
}

// roster reads the sessions of an Endpoint on every node (nil without a
// Roster). It is read before h.mu is taken: it reads the views.
func (h *Hub) roster(endpointID string) []RemoteSession {
	if h.rosterOf == nil {
		return nil
	}
	return h.rosterOf(endpointID)
}

// members merges the sessions of an Endpoint this process holds (those of
// accountID; any account when it is "") with remote, the sessions of every
// node the log shows, in the rule's order. A session the log places on
// this node that this process does not hold has ended: it is left out.
// h.mu held.
func (h *Hub) members(endpointID, accountID string, remote []RemoteSession) []member {
	local := h.byEndpoint[endpointID]
	out := make([]member, 0, len(local)+len(remote))
	for _, s := range local {
		if accountID == "" || s.info.AccountID == accountID {
			out = append(out, member{local: s, pos: s.pos, asked: s.info.Primary})
		}
	}
	for _, r := range remote {
		if r.Node == h.node {
			continue
		}
		out = append(out, member{remote: r, pos: r.Position, asked: r.Asked})
	}
	slices.SortStableFunc(out, func(a, b member) int { return cmp.Compare(a.pos, b.pos) })
	return out
}

// reconcilePrimary records the Endpoint's new primary when a session's
// start or end changed it (the log decides once across nodes).
func (h *Hub) reconcilePrimary(ctx context.Context, endpointID string) {
	c, changed, err := h.rec.ReconcilePrimary(ctx, endpointID)
	if err != nil {
		h.logger.Error("record primary change", "endpoint_id", endpointID, "error", err)
		return
	}
	if changed {
		h.logger.Info("primary changed", "endpoint_id", endpointID, "agent_id", c.AgentID, "previous", c.Previous, "reason", c.Reason)
	}
}

// Listeners lists the live sessions of an Endpoint on every node (this
// process's and, with a Roster, those the log shows on other live nodes),
// in the rule's order, the primary marked. Every node answers the same
// once its views have the sessions' starts.
func (h *Hub) Listeners(endpointID string) []Listener {
	remote := h.roster(endpointID)
	recordedAt := map[string]time.Time{}
	for _, r := range remote {
		if r.Node == h.node {
			recordedAt[r.AgentID] = r.ConnectedAt
		}
	}
	h.mu.Lock()
	ms := h.members(endpointID, "", remote)
	h.mu.Unlock()
	p := primaryOf(ms)
	out := make([]Listener, 0, len(ms))
	for i, m := range ms {
		l := Listener{IsPrimary: i == p}
		if m.local != nil {
			l.SessionInfo, l.ConnectedAt, l.Node = m.local.info, m.local.at, h.node
			// The time the log holds, when the views have it, so that
			// every node shows the same.
			if at, ok := recordedAt[m.local.info.AgentID]; ok {
				l.ConnectedAt = at
			}
		} else {
			r := m.remote
			l.SessionInfo = SessionInfo{AgentID: r.AgentID, EndpointID: endpointID, Target: r.Target, Primary: r.Asked, Filters: r.Filters}
			l.ConnectedAt, l.Node = r.ConnectedAt, r.Node
		}
		out = append(out, l)
	}
	return out
}
