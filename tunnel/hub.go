package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/workers"
)

// Recorder records what the Hub learns (record.Recorder): attempts'
// outcomes and agents' sessions. Each call records even when its context
// has ended (a session's end, a forward cut short by shutdown).
type Recorder interface {
	RecordOutcome(ctx context.Context, cmd domain.ForwardCommand, out domain.ForwardOutcome) (uint64, error)
	// SettleOutcome records out unless an outcome is recorded already, and
	// returns the one that stands (for attempts another node served).
	SettleOutcome(ctx context.Context, cmd domain.ForwardCommand, out domain.ForwardOutcome) (domain.ForwardOutcome, error)
	// AgentConnected returns the log position of the session's start.
	AgentConnected(ctx context.Context, endpointID, agentID, target string, primary bool, filters []string) (uint64, error)
	AgentDisconnected(ctx context.Context, endpointID, agentID, reason string) error
	// ReconcilePrimary records a PrimaryChanged when the rule applied to
	// the sessions the log shows open names another primary than the one
	// last recorded (once across nodes), and returns it.
	ReconcilePrimary(ctx context.Context, endpointID string) (domain.PrimaryChanged, bool, error)
	// RecordCopy records a copy given to agentID (cmd.AttemptID is its own
	// attempt) together with its outcome.
	RecordCopy(ctx context.Context, cmd domain.ForwardCommand, agentID string, out domain.ForwardOutcome) (uint64, error)
	// NewID names a copy's attempt.
	NewID() string
	// Turn orders the appends to a delivery's stream of this node's
	// writers that take turns (record.Recorder.Turn), and returns its end.
	Turn(ctx context.Context, deliveryID string) (end func(), err error)
}

// HubConfig holds the Hub's dependencies; Recorder is required.
type HubConfig struct {
	Recorder Recorder
	Logger   *slog.Logger
	// Node names this process on a bus shared by several: the Hub takes
	// the commands sent to it. Default DefaultNode.
	Node string
	// Remote and Locate reach the sessions other nodes hold: a command
	// for an Endpoint with no session here goes to the node Locate names,
	// over the bus. Both nil: a single process.
	Remote Remote
	Locate func(endpointID string) (node string, ok bool)
	// Elsewhere counts the live sessions of an Endpoint that other nodes
	// hold, so presence (Connected) is the same on every node. Nil: none.
	Elsewhere func(endpointID string) int
	// Roster lists the open sessions of an Endpoint on every live node, as
	// the log shows them (in any order). With it the primary rule, the
	// listeners' filters and Listeners cover every node: a delivery goes to
	// the primary wherever it is (through Remote) and a copy to every other
	// session. Nil: only this process's sessions (Locate routes a delivery
	// to another node when this one holds none).
	Roster func(endpointID string) []RemoteSession
	// Bodies is the body budget copies to listeners other than the primary
	// take from while they are in flight, under their account's key (one
	// key's share at most), and so do the requests other nodes send here
	// while their attempts run; nil: copies are bounded per session only,
	// and requests from other nodes by the budgets of the nodes that sent
	// them.
	Bodies Bodies
	// Sessions caps the agent sessions open at once (sessioncaps.go).
	Sessions SessionCaps
}

// SessionInfo describes an agent connection serving one Endpoint.
type SessionInfo struct {
	AgentID    string // unique per connection
	EndpointID string
	AccountID  string // the Endpoint's owner; only it may complete the work
	Target     string // the agent's local target, for the record
	// Primary asks to answer the Endpoint's senders (relay listen
	// --primary): the newest session that asks is the primary.
	Primary bool
	// Filters choose the deliveries the session is given (all must
	// match); none: every delivery.
	Filters []domain.Filter
}

// Listener is a live session of an Endpoint as the API shows it.
type Listener struct {
	SessionInfo
	IsPrimary   bool // answers the senders; the others get copies
	ConnectedAt time.Time
	Node        string
}

// Hub holds the live agent sessions and executes forward commands.
type Hub struct {
	rec    Recorder
	logger *slog.Logger
	node   string
	remote Remote
	locate func(endpointID string) (string, bool)
	others func(endpointID string) int
	// rosterOf is HubConfig.Roster.
	rosterOf func(endpointID string) []RemoteSession
	life     context.Context // ends with Close: attempts in flight answer 503
	stop     context.CancelFunc
	serving  sync.WaitGroup // attempts in flight through Forward
	// attempts runs Forward's attempts on goroutines kept from earlier
	// ones, whose stacks are grown to the depth of an attempt already.
	attempts *workers.Pool[struct{}]
	// recordGrace is RecordGrace; tests shorten it.
	recordGrace time.Duration
	// copyBytes counts what copies in flight hold, until their frames
	// are written (Written) or their session ends.
	copyBytes *copyBudget
	// bodies is HubConfig.Bodies.
	bodies Bodies
	// copyCounts counts each delivery's copies given here, against
	// domain.MaxDeliveryCopies.
	copyCounts copyCounts
	// answersWaiting is the copies' answers back and not yet recorded.
	answersWaiting atomic.Int64
	// caps is HubConfig.Sessions with its defaults.
	caps SessionCaps

	mu         sync.Mutex
	byEndpoint map[string][]*session // live sessions in attach order
	byAgent    map[string]*session
	open       openCount               // sessions reserved or live, against caps
	pending    map[string]*pendingWork // attempt ID → work awaiting its outcome
	// received holds the attempts other nodes sent here, recently: a
	// command sent again (its sender heard no acknowledgement: a NATS
	// server died under it) is acknowledged or answered, never run twice.
	received       map[string]*receivedCommand
	receivedPruned time.Time
	kept           keptAnswers // the copies' answers received holds
	// replyGrace is ReplyGrace; tests shorten it.
	replyGrace time.Duration
	// endPoll is how often a command waiting for the end of a lost
	// node's session reads the Roster again (awaitEnds): lapsedPoll.
	endPoll time.Duration
	// lapsed is the Roster those commands read: one read per Endpoint
	// per endPoll, shared by every command waiting on it.
	lapsed lapsedRosters
}

// receivedCommand is an attempt another node sent here.
type receivedCommand struct {
	done bool      // its outcome is recorded and was sent back
	at   time.Time // when it was received, or done
	// out is a copy's outcome, kept to answer the command again: a copy's
	// outcome is recorded by the node that sent it, not here. It holds
	// kept bytes of the body budget under account's copies key.
	out     *domain.ForwardOutcome
	kept    int64
	account string
}

// session is one attached agent.
type session struct {
	info SessionInfo
	at   time.Time // when it connected
	pos  uint64    // log position of its start: the primary rule's order
	work chan domain.ForwardCommand
	done chan struct{} // closed when the session ends
	// ending: the session has ended and its end is being recorded; it
	// takes no work (h.mu held to read or set it). ended is closed once
	// that append has returned and the session has left the Hub.
	ending bool
	ended  chan struct{}

	sendMu sync.RWMutex // senders hold it shared; closing work takes it exclusively
	closed bool
}

// pendingWork is an attempt handed to a session. Its outcome is decided
// exactly once: whoever removes it from Hub.pending sends on result.
type pendingWork struct {
	attemptID string
	accountID string
	session   *session
	result    chan domain.ForwardOutcome // capacity 1
}

// attemptIdle is how long a goroutine that ran an attempt waits for the
// next one before it ends.
const attemptIdle = 5 * time.Second

// DefaultNode names the node of a Hub whose config names none.
const DefaultNode = "local"

// NewHub builds a Hub. Commands other nodes send to cfg.Node reach it
// through Receive (package nodebus); without other nodes, forwards go
// through Hub.Forward only.
func NewHub(cfg HubConfig) *Hub {
	life, stop := context.WithCancel(context.Background())
	h := &Hub{
		rec: cfg.Recorder, logger: cfg.Logger, life: life, stop: stop,
		node: cfg.Node, remote: cfg.Remote, locate: cfg.Locate, others: cfg.Elsewhere, rosterOf: cfg.Roster,
		byEndpoint: map[string][]*session{},
		byAgent:    map[string]*session{},
		attempts:   workers.New(attemptIdle, life.Done(), func() struct{} { return struct{}{} }),
		pending:    map[string]*pendingWork{},
		received:   map[string]*receivedCommand{},

		recordGrace: RecordGrace,
		replyGrace:  ReplyGrace,
		endPoll:     lapsedPoll,
		copyBytes:   newCopyBudget(cfg.Bodies),
		bodies:      cfg.Bodies,
		caps:        cfg.Sessions.withDefaults(),
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.node == "" {
		h.node = DefaultNode
	}
	return h
}

// Close ends the attempts in flight through Forward: each answers 503
// "relay shutting down" and is recorded before Close returns. Call it once
// the senders have been drained, and before the store closes.
func (h *Hub) Close() {
	h.stop()
	h.serving.Wait()
	h.attempts.Wait()
}

// Attach starts a session: it records AgentConnected and returns the
// channel of work for the agent. When ctx ends the session is detached
// (detach): it takes no more work, its in-flight attempts fail with 503
// and AgentDisconnected is recorded; then it leaves the Hub and the channel
// is closed. An agent ID whose earlier session is still ending waits for
// that end, so the log holds the end before the new start.
func (h *Hub) Attach(ctx context.Context, s SessionInfo) (<-chan domain.ForwardCommand, error) {
	switch {
	case s.AgentID == "":
		return nil, &domain.InvalidInputError{Field: "agent id", Reason: "empty"}
	case s.EndpointID == "":
		return nil, &domain.InvalidInputError{Field: "endpoint id", Reason: "empty"}
	}
	if err := domain.ValidateFilters(s.Filters); err != nil {
		return nil, err
	}
	sess := &session{info: s, at: time.Now(), work: make(chan domain.ForwardCommand, sessionQueue), done: make(chan struct{}), ended: make(chan struct{})}
	elsewhere := 0
	if h.others != nil {
		elsewhere = h.others(s.EndpointID) // a read of the views: not under mu
	}
	// Reserve the agent ID and a place under the caps first so two Attach
	// calls cannot both record a connection; the session takes work only
	// once its start is recorded.
	h.mu.Lock()
	for {
		old, dup := h.byAgent[s.AgentID]
		if !dup {
			break
		}
		if !old.ending {
			h.mu.Unlock()
			return nil, fmt.Errorf("attach agent %s: already attached", s.AgentID)
		}
		h.mu.Unlock()
		select {
		case <-old.ended:
		case <-ctx.Done():
			return nil, fmt.Errorf("attach agent %s: %w", s.AgentID, ctx.Err())
		}
		h.mu.Lock()
	}
	if err := h.open.reserve(h.caps, s, elsewhere); err != nil {
		h.mu.Unlock()
		return nil, err
	}
	h.byAgent[s.AgentID] = sess
	h.mu.Unlock()
	pos, err := h.rec.AgentConnected(ctx, s.EndpointID, s.AgentID, s.Target, s.Primary, domain.FilterTexts(s.Filters))
	if err != nil {
		h.mu.Lock()
		delete(h.byAgent, s.AgentID)
		h.open.release(s)
		h.mu.Unlock()
		// The start may be in the log although its append failed (a
		// commit that outlasted the write bound): its end closes it, and
		// folds to nothing if it is not.
		if endErr := h.rec.AgentDisconnected(ctx, s.EndpointID, s.AgentID, "session start not confirmed: "+err.Error()); endErr != nil {
			h.logger.Warn("record the end of a session whose start failed", "endpoint_id", s.EndpointID, "agent_id", s.AgentID, "error", endErr)
		}
		return nil, fmt.Errorf("attach agent %s: %w", s.AgentID, err)
	}
	sess.pos = pos
	h.mu.Lock()
	h.byEndpoint[s.EndpointID] = append(h.byEndpoint[s.EndpointID], sess)
	h.mu.Unlock()
	h.reconcilePrimary(ctx, s.EndpointID)
	h.logger.Info("agent attached", "endpoint_id", s.EndpointID, "agent_id", s.AgentID, "target", s.Target, "asked_primary", s.Primary)

	go func() {
		<-ctx.Done()
		h.detach(ctx, sess)
	}()
	return sess.work, nil
}

// detach ends a session. At once it stops giving the session work (it is
// ending: dispatch passes it by), fails its in-flight attempts (503 agent
// disconnected: no sender waits on the store for them) and releases its
// place under the caps. Then it records the session's end, and only once
// that append has returned, whether it took or failed (the recorder
// bounds it), does the session leave byAgent and byEndpoint. Until then
// the Hub shows it as the log does, open: Connected counts it, Listeners
// and Admits see it, CloseStale leaves its end to detach, and a command of
// its Endpoint that no other session takes waits for the end (awaitEnds)
// before it is answered 503 no agent connected. So no delivery is refused
// for want of the session before the log holds its end, and an
// explanation that compares the two tells them in the order they came.
func (h *Hub) detach(ctx context.Context, s *session) {
	failed := domain.ForwardOutcome{Status: 503, Error: domain.FailureAgentDisconnected, AgentID: s.info.AgentID}
	h.mu.Lock()
	s.ending = true
	h.open.release(s.info)
	for id, p := range h.pending {
		if p.session == s {
			delete(h.pending, id)
			out := failed
			out.AttemptID = id
			p.result <- out
		}
	}
	h.mu.Unlock()

	close(s.done) // senders blocked on work give up
	h.recordDisconnect(ctx, s.info, domain.SessionAgentDisconnected)

	h.mu.Lock()
	delete(h.byAgent, s.info.AgentID)
	list := h.byEndpoint[s.info.EndpointID]
	for i, x := range list {
		if x == s {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(h.byEndpoint, s.info.EndpointID)
	} else {
		h.byEndpoint[s.info.EndpointID] = list
	}
	h.mu.Unlock()
	close(s.ended) // the commands waiting for the end are dispatched again

	h.reconcilePrimary(ctx, s.info.EndpointID)
	// Closing work last tells its reader the end is already in the log.
	s.sendMu.Lock()
	s.closed = true
	close(s.work)
	s.sendMu.Unlock()
	// No copy is offered to it now: its copies are no longer counted
	// (what its socket, if still open, has not written is within the
	// socket's send queue).
	h.copyBytes.giveAll(s.info.AgentID)
	h.logger.Info("agent detached", "endpoint_id", s.info.EndpointID, "agent_id", s.info.AgentID)
}

func (h *Hub) recordDisconnect(ctx context.Context, s SessionInfo, reason string) {
	if err := h.rec.AgentDisconnected(ctx, s.EndpointID, s.AgentID, reason); err != nil {
		h.logger.Error("record agent disconnect", "endpoint_id", s.EndpointID, "agent_id", s.AgentID, "error", err)
	}
}

// send hands cmd to the agent unless the session ends, ctx does or
// expired fires first; timedOut reports the last (its value is taken).
func (s *session) send(ctx context.Context, expired <-chan time.Time, cmd domain.ForwardCommand) (timedOut bool) {
	s.sendMu.RLock()
	defer s.sendMu.RUnlock()
	if s.closed {
		return false
	}
	select {
	case s.work <- cmd:
	case <-s.done:
	case <-ctx.Done():
	case <-expired:
		return true
	}
	return false
}

// Connected counts the live sessions of an Endpoint: those this process
// holds and those other nodes hold. A session here counts until its end
// is in the log (detach), as the log's views count it.
func (h *Hub) Connected(endpointID string) int {
	n := h.local(endpointID)
	if h.others != nil {
		n += h.others(endpointID)
	}
	return n
}

// local counts the sessions of an Endpoint this process holds.
func (h *Hub) local(endpointID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byEndpoint[endpointID])
}

// Node is the name of this Hub's node.
func (h *Hub) Node() string { return h.node }

// Complete delivers an agent's answer. agentID names the reporting
// connection, for the log; the attempt must be pending for accountID, so an
// agent of another account cannot answer (or learn of) foreign work.
func (h *Hub) Complete(ctx context.Context, accountID, agentID string, out domain.ForwardOutcome) error {
	deliver, err := h.Claim(ctx, accountID, agentID, out)
	if err != nil {
		return err
	}
	deliver()
	return nil
}

// Claim is Complete in two steps: it takes the attempt off the pending
// ones and returns deliver, which hands its outcome to the attempt's
// waiting forward. A caller with an answer of its own to queue (the Done
// frame to the agent) queues it first, then calls deliver: the goroutine
// deliver wakes runs next, and one woken after it (the socket's writer)
// would run first. deliver must be called, and soon: the forward (even
// past its timeout) waits for it. While other attempts are pending, Claim
// hands the outcome over itself and deliver does nothing: the socket's
// writer then carries their frames too, and goes first.
func (h *Hub) Claim(ctx context.Context, accountID, agentID string, out domain.ForwardOutcome) (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pending[out.AttemptID]
	if !ok || p.accountID != accountID {
		return nil, fmt.Errorf("complete attempt %s: %w", out.AttemptID, domain.ErrNotFound)
	}
	// A connection's sessions are named <connection>/<endpoint>.
	if conn, _, _ := strings.Cut(p.session.info.AgentID, "/"); agentID != conn && agentID != p.session.info.AgentID {
		h.logger.Debug("attempt completed by another agent of the account",
			"attempt_id", out.AttemptID, "agent_id", agentID, "sent_to", p.session.info.AgentID)
	}
	delete(h.pending, out.AttemptID)
	out.AttemptID = p.attemptID
	out.AgentID = p.session.info.AgentID
	res := normalize(out, p.session.info.Target)
	if len(h.pending) > 0 {
		p.result <- res
		return delivered, nil
	}
	return func() { p.result <- res }, nil
}

// delivered is Claim's deliver for an outcome already handed over.
func delivered() {}

// maxFailureLen bounds the failure text an agent reports for the sender.
const maxFailureLen = 200

// normalize turns an agent report into an outcome: an error means the agent
// got no answer from its target (502, or 504 when it timed out locally),
// or refused to send the request (400: a path with a dot-segment under its
// target's prefix).
// A failed outcome always has a Failure text for the sender that names the
// target (the agent's, or one made here from the session's target) and
// nothing else of the local machine: one line, bounded.
func normalize(out domain.ForwardOutcome, target string) domain.ForwardOutcome {
	switch {
	case out.Error != "":
		if out.Status != 504 && out.Status != 400 {
			out.Status = 502
		}
		out.Headers, out.Body = nil, nil
	case out.Status < 200 || out.Status > 599:
		// 1xx are interim answers, never a final one the sender can get.
		out.Error = domain.FailureInvalidStatus + strconv.Itoa(out.Status)
		out.Failure = "the answer of the local target " + target + " could not be passed on"
		out.Status = 502
		out.Headers, out.Body = nil, nil
	default:
		out.Failure = ""
		return out
	}
	out.Failure = strings.Join(strings.Fields(out.Failure), " ")
	if len(out.Failure) > maxFailureLen || !utf8.ValidString(out.Failure) {
		out.Failure = ""
	}
	if out.Failure == "" {
		out.Failure = "no answer from the local target " + target
	}
	return out
}

// errAttemptInFlight refuses a command whose attempt is already pending.
var errAttemptInFlight = errors.New("attempt already in flight")
