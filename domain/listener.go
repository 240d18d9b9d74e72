package domain

// Why another session became an Endpoint's primary (PrimaryChanged.Reason).
const (
	// PrimaryFirst: the first session to connect answers senders.
	PrimaryFirst = "first listener"
	// PrimaryAsked: the session asked to be primary (relay listen --primary).
	PrimaryAsked = "asked to be primary"
	// PrimaryLeft: the primary ended; the oldest session left takes over.
	PrimaryLeft = "primary left"
	// PrimaryNone: the last session ended.
	PrimaryNone = "no listener left"
)

// PrimaryIndex applies the primary rule to n live sessions of an Endpoint
// given in the order the log holds their starts (agent.connected.v1):
// the newest that asked to be primary answers the senders, else the first.
// It returns the index of that session, -1 when n is 0. Every relay node
// computes it from the same log, so all agree on one primary.
func PrimaryIndex(n int, asked func(i int) bool) int {
	for i := n - 1; i >= 0; i-- {
		if asked(i) {
			return i
		}
	}
	if n == 0 {
		return -1
	}
	return 0
}

// ListenerSession is a live session of an Endpoint as its agent stream
// tells it.
type ListenerSession struct {
	AgentID string `json:"agent_id"`
	Asked   bool   `json:"asked,omitempty"` // started with --primary
}

// SnapshotAfter is how many events, plus one per open session, may follow
// an agent stream's newest snapshot (or its start) before a decision
// appends another: a node with nothing folded reads about that many. A
// snapshot holds a session in fewer bytes than any event between two takes,
// so snapshots take less of the log than the events between them.
const SnapshotAfter = 256

// MaxSnapshotSessions bounds the open sessions one snapshot holds (about
// 80 bytes each: some 330 KB, within every store's largest append). An
// Endpoint with more open at once gets no new snapshot until fewer are.
const MaxSnapshotSessions = 4096

// MaxEndpointSessions is the most agent sessions an Endpoint may be
// configured to hold open at once (relay serve --max-endpoint-sessions is
// at most this): well below MaxSnapshotSessions, so a snapshot can always
// be taken, and the number of open sessions the views read for the
// primary rule across nodes.
const MaxEndpointSessions = 256

// Listeners is an Endpoint's agent stream folded: the sessions still
// open, in the order they connected, and the primary last recorded.
//
// Invariants:
//  1. A PrimaryChanged is raised only when the rule's primary differs from
//     the one last recorded, so the stream never holds the same change
//     twice (appended at the stream's expected revision: a change raised
//     by two nodes at once is recorded by one).
//  2. A ListenersSnapshot is what the events before it fold to: it is
//     taken from the folded state and appended at the revision that state
//     reflects, so folding from it and folding the whole stream agree.
type Listeners struct {
	open     []ListenerSession
	recorded string // agent ID of the last PrimaryChanged, "" for none
	since    int    // events folded after the last snapshot, or from the stream's start
}

// LoadListeners folds an agent stream's events.
func LoadListeners(events []Event) *Listeners {
	l := &Listeners{}
	l.Fold(events)
	return l
}

// Fold applies the events that follow those already folded.
func (l *Listeners) Fold(events []Event) {
	for _, e := range events {
		l.apply(e)
	}
}

// Clone is a copy that folds on by itself.
func (l *Listeners) Clone() *Listeners {
	return &Listeners{open: append([]ListenerSession(nil), l.open...), recorded: l.recorded, since: l.since}
}

func (l *Listeners) apply(e Event) {
	l.since++
	switch e := e.(type) {
	case ListenersSnapshot:
		l.open = append([]ListenerSession(nil), e.Open...)
		l.recorded = e.Primary
		l.since = 0
	case AgentConnected:
		l.drop(e.AgentID)
		l.open = append(l.open, ListenerSession{AgentID: e.AgentID, Asked: e.Primary})
	case AgentDisconnected:
		l.drop(e.AgentID)
	case PrimaryChanged:
		l.recorded = e.AgentID
	}
}

func (l *Listeners) drop(agentID string) {
	for i, s := range l.open {
		if s.AgentID == agentID {
			l.open = append(l.open[:i:i], l.open[i+1:]...)
			return
		}
	}
}

// Open lists the sessions still open, in the order they connected.
func (l *Listeners) Open() []ListenerSession { return append([]ListenerSession(nil), l.open...) }

// Primary is the session the rule makes primary now, "" when none is open.
func (l *Listeners) Primary() string {
	i := PrimaryIndex(len(l.open), func(i int) bool { return l.open[i].Asked })
	if i < 0 {
		return ""
	}
	return l.open[i].AgentID
}

// Snapshot returns the ListenersSnapshot of endpointID to append after the
// events folded, when more than SnapshotAfter events plus one per open
// session followed the last one, and false when none is due (or the
// sessions open are more than MaxSnapshotSessions). Appended at the revision
// the fold reflects, it lets the next reader with nothing folded start
// there.
func (l *Listeners) Snapshot(endpointID string) (ListenersSnapshot, bool) {
	if l.since <= SnapshotAfter+len(l.open) || len(l.open) > MaxSnapshotSessions {
		return ListenersSnapshot{}, false
	}
	return ListenersSnapshot{EndpointID: endpointID, Open: l.Open(), Primary: l.recorded}, true
}

// Decide returns the PrimaryChanged to record for endpointID when the
// rule's primary is not the one last recorded, and false when it is.
func (l *Listeners) Decide(endpointID string) (PrimaryChanged, bool) {
	now := l.Primary()
	if now == l.recorded {
		return PrimaryChanged{}, false
	}
	c := PrimaryChanged{EndpointID: endpointID, AgentID: now, Previous: l.recorded}
	stillOpen := false
	asked := false
	for _, s := range l.open {
		stillOpen = stillOpen || s.AgentID == l.recorded
		if s.AgentID == now {
			asked = s.Asked
		}
	}
	switch {
	case now == "":
		c.Reason = PrimaryNone
	case l.recorded == "":
		c.Reason = PrimaryFirst
		if asked {
			c.Reason = PrimaryAsked
		}
	case stillOpen:
		c.Reason = PrimaryAsked
	default:
		c.Reason = PrimaryLeft
	}
	return c, true
}
