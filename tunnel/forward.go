package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/relayhq/relay/domain"
)

// RecordGrace is how much longer than an attempt's timeout Forward waits
// for its outcome to be recorded: the attempt itself ends at its timeout
// (504), and recording it may wait on the store.
const RecordGrace = 5 * time.Second

// Forward runs one attempt on a session this process holds and returns
// its outcome once recorded: the seam ingress and retry forward through.
// Nothing is encoded and no bus is crossed. A failed attempt (502, 503,
// 504) is an outcome, not an error; errors mean the outcome is unknown to
// the caller: no outcome was recorded within the command's timeout and
// RecordGrace, or ctx ended (*TimeoutError for either deadline), or the Hub
// could not carry out or record the forward. The attempt does not end with
// ctx: like one sent over the bus, it runs until its outcome (bounded by
// the command's timeout) or the Hub's Close, and is recorded.
func (h *Hub) Forward(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error) {
	if cmd.AttemptID == "" {
		return domain.ForwardOutcome{}, &domain.InvalidInputError{Field: "attempt id", Reason: "empty"}
	}
	if h.rosterOf == nil {
		if node, ok := h.elsewhere(cmd.EndpointID); ok {
			return h.forwardRemote(ctx, node, cmd)
		}
	}
	type result struct {
		out domain.ForwardOutcome
		err error
	}
	start := time.Now()
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = DefaultForwardTimeout
	}
	// A timer, not a context with a deadline: the caller's context would
	// take a child, and its lock, for every attempt.
	wait := time.NewTimer(timeout + h.recordGrace)
	defer wait.Stop()
	done := make(chan result, 1)
	h.serving.Add(1)
	h.attempts.Go(func(struct{}) {
		defer h.serving.Done()
		out, err := h.serve(h.life, cmd)
		done <- result{out, err}
	})
	select {
	case r := <-done:
		return r.out, r.err
	case <-wait.C:
		return domain.ForwardOutcome{}, &TimeoutError{AttemptID: cmd.AttemptID, Waited: time.Since(start)}
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return domain.ForwardOutcome{}, &TimeoutError{AttemptID: cmd.AttemptID, Waited: time.Since(start)}
		}
		return domain.ForwardOutcome{}, fmt.Errorf("forward %s: %w", cmd.AttemptID, ctx.Err())
	}
}

// elsewhere names the node that holds the Endpoint's sessions when this
// process holds none and knows of other nodes.
func (h *Hub) elsewhere(endpointID string) (string, bool) {
	if h.remote == nil || h.locate == nil || h.local(endpointID) > 0 {
		return "", false
	}
	node, ok := h.locate(endpointID)
	return node, ok && node != h.node
}

// Outcomes of an attempt sent to another node that did not answer it.
const (
	NodeLost        = domain.FailureNodeLost
	NodeUnreachable = domain.FailureNodeUnreachable
)

// forwardRemote sends the attempt to node over the bus. When node's lease
// lapses before it replies, or the command cannot be sent, this node
// settles the attempt as 503: exactly one outcome is recorded (the
// delivery stream's expected revision decides between this node and one
// that answered after all), and the sender gets the one that stands.
func (h *Hub) forwardRemote(ctx context.Context, node string, cmd domain.ForwardCommand) (domain.ForwardOutcome, error) {
	start := time.Now()
	out, err := h.remote.ForwardTo(ctx, node, cmd, nil)
	var lost *NodeLostError
	var unsent *PublishError
	reason := ""
	switch {
	case errors.As(err, &lost):
		reason = NodeLost
	case errors.As(err, &unsent):
		reason = NodeUnreachable
	default:
		return out, err
	}
	h.logger.Warn("forward sent to another node settled here", "attempt_id", cmd.AttemptID, "node", node, "reason", reason, "error", err)
	fallback := domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 503, Error: reason + " (" + node + ")",
		DurationMs: time.Since(start).Milliseconds()}
	// An error here is marked domain.ErrOutcomeNotRecorded by the recorder.
	return h.rec.SettleOutcome(ctx, cmd, fallback)
}

// NodeLost settles the attempts this node sent to node and still waits
// for: node's lease lapsed, so no reply will come. It returns how many.
func (h *Hub) NodeLost(node string) int {
	if h.remote == nil {
		return 0
	}
	return h.remote.NodeLost(node)
}

// Receive runs an attempt another node sent here (package nodebus calls
// it for every command on this node's topic): it calls ack at once, runs
// the attempt, records its outcome, and only then calls answer, from a
// goroutine of its own (a forward may take up to its timeout). A command
// received again (its sender heard no acknowledgement) is acknowledged
// while it runs, and answered from the log once done: it never runs twice.
// ack and answer must not block for long.
func (h *Hub) Receive(cmd domain.ForwardCommand, ack func(), answer func(domain.ForwardOutcome, error)) {
	if h.receivedAgain(cmd, ack, answer) {
		return
	}
	ack()
	attemptID, isCopy, account := cmd.AttemptID, cmd.Copy, cmd.AccountID
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = DefaultForwardTimeout
	}
	// Nobody asks for this command again past the sender's wait.
	asked := time.Now().Add(timeout + h.replyGrace)
	var run func(ctx context.Context) (domain.ForwardOutcome, error)
	if isCopy {
		// Offered now, without waiting: what waits for its outcome keeps
		// nothing of the request, whose bytes are held while counted
		// (until its frame is written), not as long as its answer takes.
		await := h.serveCopy(cmd)
		run = func(ctx context.Context) (domain.ForwardOutcome, error) { return await(ctx), nil }
	} else {
		run = h.held(cmd)
	}
	h.serving.Go(func() {
		var kept *domain.ForwardOutcome
		defer func() { h.markReceivedDone(attemptID, kept, account, asked) }()
		// A panic still becomes an answer, so the sender does not wait
		// for nothing.
		defer func() {
			if v := recover(); v != nil {
				h.logger.Error("forward command panicked", "attempt_id", attemptID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				answer(domain.ForwardOutcome{AttemptID: attemptID}, fmt.Errorf("panic: %v", v))
			}
		}()
		out, err := run(h.life)
		if err != nil {
			h.logger.Error("forward command failed", "attempt_id", attemptID, "error", err)
		} else if isCopy {
			kept = &out
		}
		answer(out, err)
	})
}

// held returns what runs cmd, a command another node sent here for an
// attempt whose outcome this node records. Its request is held here until
// then, as the node its sender reached holds it: so it is counted in this
// node's body budget too, under its account's key (at most one key's
// share), and the requests of every other node together hold at most this
// node's budget, one account's at most a share of it. Before, a node
// holding a listener that did not read held the requests every other node
// had sent it, each node's budget over: 32 forwards of 1 MiB from one node
// held 32 MiB. A request with no room is not given to the agent: its
// attempt is recorded 503 domain.FailureNodeBodyBudget, which its sender
// gets, as a sender whose request finds no room where it arrives gets 503.
func (h *Hub) held(cmd domain.ForwardCommand) func(ctx context.Context) (domain.ForwardOutcome, error) {
	if h.bodies == nil {
		return func(ctx context.Context) (domain.ForwardOutcome, error) { return h.serve(ctx, cmd) }
	}
	key, n := forwardsKey(cmd.AccountID), min(copySize(cmd), h.bodies.Share())
	if h.bodies.Reserve(key, n) {
		return func(ctx context.Context) (domain.ForwardOutcome, error) {
			defer h.bodies.Release(key, n)
			return h.serve(ctx, cmd)
		}
	}
	return func(ctx context.Context) (domain.ForwardOutcome, error) {
		h.logger.Warn("forward from another node refused: body budget", "attempt_id", cmd.AttemptID, "account_id", cmd.AccountID, "bytes", n)
		out := domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 503, Error: domain.FailureNodeBodyBudget + " (" + h.node + ")"}
		var err error
		if out.Position, err = h.rec.RecordOutcome(ctx, cmd, out); err != nil {
			return domain.ForwardOutcome{}, err // marked domain.ErrOutcomeNotRecorded
		}
		return out, nil
	}
}

// forwardsKey is the key in the body budget of an account's requests
// other nodes sent here.
func forwardsKey(accountID string) string { return "forwards " + accountID }

// receivedFor is how long an attempt sent here is remembered, so that the
// same command sent again is recognised: well past any forward timeout.
const receivedFor = 5 * time.Minute

// receivedAgain tells a command this node already took: it acknowledges
// one still running, and answers one done with its recorded outcome, and
// reports true; a new one is registered and reported false.
func (h *Hub) receivedAgain(cmd domain.ForwardCommand, ack func(), answer func(domain.ForwardOutcome, error)) bool {
	now := time.Now()
	h.mu.Lock()
	seen, again := h.received[cmd.AttemptID]
	if !again {
		// Pruned now and then, not on every command: a scan per command
		// would cost as much as the commands of the last minutes.
		if now.Sub(h.receivedPruned) > receivedFor/10 {
			for id, r := range h.received {
				if now.Sub(r.at) > receivedFor {
					h.unkeep(r)
					delete(h.received, id)
				}
			}
			h.receivedPruned = now
		}
		h.received[cmd.AttemptID] = &receivedCommand{at: now}
	}
	done := again && seen.done
	var kept *domain.ForwardOutcome
	if done {
		kept = seen.out
	}
	h.mu.Unlock()
	switch {
	case !again:
		return false
	case !done:
		ack()
		return true
	}
	if cmd.Copy {
		// A copy's outcome is recorded by its sender: answer the one kept,
		// or say it was not.
		out := domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 503, Error: domain.FailureCopyAnswerLost, AgentID: cmd.Agent}
		if kept != nil {
			out = *kept
		}
		answer(out, nil)
		return true
	}
	// Done: the reply was lost. The recorded outcome stands; read it back
	// (the fallback is recorded only if, against expectation, none is).
	h.serving.Go(func() {
		fallback := domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 503, Error: NodeLost + " (" + h.node + ")"}
		answer(h.rec.SettleOutcome(h.life, cmd, fallback))
	})
	return true
}

// markReceivedDone marks an attempt another node sent here as done, with
// out the answer of a copy (of account), to keep within the body budget
// (keptanswers.go) until the time past which nobody asks for it again.
func (h *Hub) markReceivedDone(attemptID string, out *domain.ForwardOutcome, account string, until time.Time) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.received[attemptID]
	if !ok {
		return
	}
	r.done, r.at = true, now
	if out != nil {
		h.keep(attemptID, r, *out, account, until, now)
	}
}

// serve runs one attempt and records its outcome. The outcome is recorded
// even when ctx has ended (shutdown): the attempt would otherwise stay
// pending in the log forever. The copies given to the other sessions are
// recorded after it, never before: the primary's outcome goes right after
// its request, and the sender waits for nothing else. A copy another node
// sent here (cmd.Copy) is only run: its sender records it.
func (h *Hub) serve(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error) {
	if cmd.Copy {
		return h.serveCopy(cmd)(ctx), nil
	}
	recorded := make(chan struct{})
	defer close(recorded)
	out, elsewhere, err := h.forward(ctx, &cmd, recorded)
	if err != nil {
		return domain.ForwardOutcome{}, err
	}
	if elsewhere {
		return out, nil
	}
	if out.Position, err = h.recordOutcome(ctx, cmd, out); err != nil {
		return domain.ForwardOutcome{}, err // marked domain.ErrOutcomeNotRecorded
	}
	return out, nil
}

// recordTurns bounds how often an outcome or a copy is recorded again, in
// turn with its delivery's other outcomes and copies, once the recorder's
// own tries met other writers each time (each call reads the delivery and
// decides again).
const recordTurns = 4

// recordOutcome records cmd's outcome. The recorder appends it at the
// delivery stream's next revision, reading and deciding again when another
// writer came first, a few times. Many attempts of one delivery at once
// (retries sent together, each with its copies) beat one another's
// outcomes past those tries: 64 retries at once to 9 listeners, their
// requests taking turns (commands), left 6 to 29 of them with no outcome
// recorded, pending in the log for good. Such an outcome is recorded again
// in turn with the delivery's copies and the outcomes that met the same
// (Recorder.Turn); an outcome that meets nobody takes no lock.
func (h *Hub) recordOutcome(ctx context.Context, cmd domain.ForwardCommand, out domain.ForwardOutcome) (uint64, error) {
	pos, err := h.rec.RecordOutcome(ctx, cmd, out)
	for turn := 1; turn < recordTurns && errors.Is(err, domain.ErrWrongExpectedRevision); turn++ {
		unlock, terr := h.rec.Turn(ctx, cmd.DeliveryID)
		if terr != nil {
			return 0, terr
		}
		pos, err = h.rec.RecordOutcome(ctx, cmd, out)
		unlock()
	}
	return pos, err
}

// forward gives cmd to the primary session of its Endpoint (of those whose
// filters match, on every node the Roster shows), a copy to every other
// matching session, and waits for the primary's outcome. recorded closes
// once that outcome is recorded. elsewhere reports an outcome already
// recorded: another node's session answered it (or this node settled it).
// With copies, cmd.Sent is set to the digests of the request they keep,
// which the primary's outcome is recorded with too.
func (h *Hub) forward(ctx context.Context, cmd *domain.ForwardCommand, recorded <-chan struct{}) (out domain.ForwardOutcome, elsewhere bool, err error) {
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = DefaultForwardTimeout
	}
	started := time.Now()
	var remote []RemoteSession
	if cmd.Agent == "" {
		remote = h.roster(cmd.EndpointID)
	}
	pl, err := h.dispatch(*cmd, remote)
	left := timeout
	if err == nil && (pl.ending != nil || pl.lapsed) {
		var closing bool
		if pl, closing, err = h.awaitEnds(ctx, cmd, pl, started, timeout); closing {
			return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 503, Error: domain.FailureShuttingDown}, false, nil
		}
		left = max(timeout-time.Since(started), 0)
	}
	if err != nil {
		return domain.ForwardOutcome{}, false, fmt.Errorf("forward %s: %w", cmd.AttemptID, err)
	}
	if pl.local == nil && pl.remote == nil {
		return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 503, Error: domain.FailureNoAgent}, false, nil
	}
	if h.logger.Enabled(ctx, slog.LevelDebug) { // its arguments would allocate for nothing
		h.logger.Debug("forward dispatched", "delivery_id", cmd.DeliveryID, "attempt_id", cmd.AttemptID,
			"endpoint_id", cmd.EndpointID, "agent_id", pl.agentID(), "copies", len(pl.copies))
	}

	if pl.remote != nil {
		// The primary is another node's: it records the outcome before it
		// replies. The copies go first: they wait for nothing.
		h.copies(ctx, pl.copies, *cmd, timeout, recorded)
		named := *cmd
		named.Agent = pl.remote.AgentID
		out, err := h.forwardRemote(ctx, pl.remote.Node, named)
		return out, true, err
	}
	s, p := pl.local, pl.pending
	// A timer, not a context with a deadline: ctx is the hub's life, which
	// every attempt shares, and a child context of it would take its lock
	// twice per attempt.
	expired := time.NewTimer(left)
	defer expired.Stop()
	// A send that fails otherwise leaves the outcome to detach or below.
	timedOut := s.send(ctx, expired.C, *cmd)
	cmd.Sent = h.copies(ctx, pl.copies, *cmd, timeout, recorded)
	if !timedOut {
		select {
		case out = <-p.result:
		case <-expired.C:
			timedOut = true
		case <-ctx.Done():
			out = h.resolve(p, domain.ForwardOutcome{AttemptID: cmd.AttemptID, AgentID: s.info.AgentID,
				Status: 503, Error: domain.FailureShuttingDown})
		}
	}
	if timedOut {
		out = h.resolve(p, domain.ForwardOutcome{AttemptID: cmd.AttemptID, AgentID: s.info.AgentID,
			Status: 504, Error: domain.FailureTimeout + timeout.String(),
			Failure: "the local target " + s.info.Target + " did not answer within " + timeout.String()})
	}
	if out.DurationMs <= 0 {
		out.DurationMs = time.Since(started).Milliseconds()
	}
	return out, false, nil
}

// awaitEnds waits, for a command that no session of its Endpoint took
// while one that would have was ending, until that session's end is in
// the log, then dispatches the command again, as often as it meets
// another: its 503 no agent connected is recorded after the ends of the
// sessions it was refused for, never before. A session here (pl.ending)
// tells of its end (detach closes ended once the append has returned,
// taken or failed); a lost node's (pl.lapsed: the Roster marks it Ending)
// is ended by the reaper of a live node, maybe another one, and the
// command reads the Roster again every endPoll until it no longer shows
// it. The wait is bounded by the command's timeout, past which it is
// answered as no session took it. closing: the Hub closed meanwhile.
// Only a command that finds no session waits: it costs the forwards that
// find one nothing.
func (h *Hub) awaitEnds(ctx context.Context, cmd *domain.ForwardCommand, pl plan, started time.Time, timeout time.Duration) (_ plan, closing bool, _ error) {
	wait := time.NewTimer(timeout - time.Since(started))
	defer wait.Stop()
	var poll *time.Ticker
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for pl.ending != nil || pl.lapsed {
		var ended <-chan struct{} // nil: no session here is ending
		if pl.ending != nil {
			ended = pl.ending.ended
		}
		var again <-chan time.Time // nil: no lost node's session is ending
		if pl.lapsed {
			if poll == nil {
				poll = time.NewTicker(h.endPoll)
			}
			again = poll.C
		}
		select {
		case <-ended:
		case <-again:
		case <-wait.C:
			return plan{}, false, nil
		case <-ctx.Done():
			return plan{}, true, nil
		}
		var remote []RemoteSession
		if cmd.Agent == "" {
			remote = h.lapsed.read(cmd.EndpointID, h.endPoll, h.roster)
		}
		var err error
		if pl, err = h.dispatch(*cmd, remote); err != nil {
			return plan{}, false, err
		}
	}
	return pl, false, nil
}

// copies gives a copy of cmd to each of ms, here or on its node, and
// returns the digests of cmd's request they keep (nil without copies).
//
// Every copy is sent cmd's request as it is (no listener's setting
// changes it on the relay; its agent adds its own target and X-Forwarded-*,
// which the digests leave out), so it is digested once for the delivery:
// each copy lets go of the request's headers and body when its frame is
// written and keeps only a pointer to these digests until it is recorded.
func (h *Hub) copies(ctx context.Context, ms []member, cmd domain.ForwardCommand, timeout time.Duration, recorded <-chan struct{}) *domain.FidelityDigests {
	if len(ms) == 0 {
		return nil
	}
	sent := domain.DigestRequest(cmd.Method, cmd.Target, cmd.Headers, cmd.Body)
	cmd.Sent = &sent
	for _, c := range ms {
		if c.local != nil {
			h.copyTo(ctx, c.local, cmd, timeout, recorded)
		} else {
			h.copyRemote(c.remote, cmd, timeout, recorded)
		}
	}
	return &sent
}

// copyTo gives a copy of cmd, as an attempt of its own, to session c
// without waiting: a full queue drops the copy. Its outcome (the agent's,
// a timeout, or the drop) is recorded once the primary's is, its answer
// held meanwhile only as counted (holdAnswer). What waits for it keeps
// nothing of the request: its bytes are held while counted (until its
// frame is written), not as long as its answer takes.
func (h *Hub) copyTo(ctx context.Context, c *session, cmd domain.ForwardCommand, timeout time.Duration, recorded <-chan struct{}) {
	cp := copyOf(cmd, h.rec.NewID(), c.info.AgentID)
	started := time.Now()
	p, ok := h.offerCopy(c, cp)
	if !ok {
		h.copyCounts.settle(cp.DeliveryID, time.Now())
		return
	}
	rec := unsent(cp)
	h.serving.Go(func() {
		out, release := h.holdAnswer(rec.AccountID, rec.CaptureResponse, h.awaitCopy(ctx, p, c.info.AgentID, timeout, started))
		defer release()
		<-recorded
		h.recordCopy(rec, c.info.AgentID, out)
	})
}

// unsent is cmd without its request's headers and body: what recording a
// copy's outcome needs of it, with the digests of that request (cmd.Sent).
func unsent(cmd domain.ForwardCommand) domain.ForwardCommand {
	cmd.Headers, cmd.Body = nil, nil
	return cmd
}

// copyOf is cmd as a copy for agentID: an attempt of its own, named
// attemptID, whose request is recorded with its outcome.
func copyOf(cmd domain.ForwardCommand, attemptID, agentID string) domain.ForwardCommand {
	cp := cmd
	cp.AttemptID = attemptID
	cp.RequestEventID, cp.RequestRevision = "", 0
	cp.Agent, cp.Copy = agentID, true
	return cp
}

// offerCopy registers cp as pending on c and offers it without waiting;
// a full queue, or no room for its bytes in the body budget (c's, its
// account's, the relay's), decides it at once as dropped. false: the
// attempt ID is pending already (a copy sent here twice).
func (h *Hub) offerCopy(c *session, cp domain.ForwardCommand) (*pendingWork, bool) {
	p := &pendingWork{attemptID: cp.AttemptID, accountID: cp.AccountID, session: c, result: make(chan domain.ForwardOutcome, 1)}
	h.mu.Lock()
	if _, busy := h.pending[cp.AttemptID]; busy {
		h.mu.Unlock()
		return nil, false
	}
	if c.ending {
		// Its end is being recorded: detach has failed its attempts
		// already, and nobody reads its queue.
		h.mu.Unlock()
		p.result <- domain.ForwardOutcome{AttemptID: cp.AttemptID, Status: 503, Error: domain.FailureAgentDisconnected, AgentID: c.info.AgentID}
		return p, true
	}
	h.pending[cp.AttemptID] = p
	h.mu.Unlock()
	offered := h.copyBytes.take(c.info, cp)
	if offered && !c.offer(cp) {
		offered = false
		h.copyBytes.give(c.info.AgentID, cp.AttemptID)
	}
	if !offered {
		h.mu.Lock()
		if h.pending[cp.AttemptID] == p {
			delete(h.pending, cp.AttemptID)
			p.result <- domain.ForwardOutcome{AttemptID: cp.AttemptID, Status: 503, Error: domain.FailureCopyDropped, AgentID: c.info.AgentID}
		}
		h.mu.Unlock()
	}
	return p, true
}

// awaitCopy waits for a copy's outcome: the agent's, a timeout, or the
// Hub's end.
func (h *Hub) awaitCopy(ctx context.Context, p *pendingWork, agentID string, timeout time.Duration, started time.Time) domain.ForwardOutcome {
	t := time.NewTimer(timeout)
	defer t.Stop()
	var out domain.ForwardOutcome
	select {
	case out = <-p.result:
	case <-t.C:
		out = h.resolve(p, domain.ForwardOutcome{AttemptID: p.attemptID, Status: 504, Error: domain.FailureTimeout + timeout.String(), AgentID: agentID})
	case <-ctx.Done():
		out = h.resolve(p, domain.ForwardOutcome{AttemptID: p.attemptID, Status: 503, Error: domain.FailureShuttingDown, AgentID: agentID})
	}
	if out.DurationMs <= 0 {
		out.DurationMs = time.Since(started).Milliseconds()
	}
	return out
}

// recordCopy records a copy's outcome, one copy of a delivery at a time:
// its copies all wait for the primary's outcome, and each is appended at
// the delivery stream's next revision, so recorded together they refused
// one another's appends until their tries ran out (8 to 16 of 40
// listeners' answers reached the log). The delivery's retries and their
// outcomes may still come first more often than the recorder tries: the
// copy is recorded again, up to recordTurns times.
func (h *Hub) recordCopy(cp domain.ForwardCommand, agentID string, out domain.ForwardOutcome) {
	var err error
	if end, terr := h.rec.Turn(h.life, cp.DeliveryID); terr != nil {
		err = terr // the hub is closing
	} else {
		defer end()
		_, err = h.rec.RecordCopy(h.life, cp, agentID, out)
	}
	for turn := 1; turn < recordTurns && errors.Is(err, domain.ErrWrongExpectedRevision); turn++ {
		_, err = h.rec.RecordCopy(h.life, cp, agentID, out)
	}
	if err != nil {
		h.logger.Error("record copy", "delivery_id", cp.DeliveryID, "attempt_id", cp.AttemptID, "agent_id", agentID, "error", err)
	}
	h.copyCounts.settle(cp.DeliveryID, time.Now())
}

// copyRemote sends a copy of cmd to session r on its node, without
// waiting; the node runs it and replies with the outcome, which this node
// records once the primary's is (it alone knows when that is), holding the
// answer meanwhile only as counted (holdAnswer). A node that
// cannot be reached or is lost makes the copy a 503.
//
// Until r's node acknowledges it, the copy is held here: an encoded
// command of its own, sent again until heard. So it takes from the
// copies' budget (r's share, its account's, the relay's) as a copy for a
// session here does, until acknowledged; past the budget it is dropped,
// as one that finds no room here is. Without that, one delivery to an
// Endpoint with 64 listeners on another node encoded and held 64 copies of
// its body.
func (h *Hub) copyRemote(r RemoteSession, cmd domain.ForwardCommand, timeout time.Duration, recorded <-chan struct{}) {
	cp := copyOf(cmd, h.rec.NewID(), r.AgentID)
	rec := unsent(cp)
	started := time.Now()
	if !h.copyBytes.take(SessionInfo{AgentID: r.AgentID, AccountID: cp.AccountID}, cp) {
		h.serving.Go(func() {
			out := domain.ForwardOutcome{AttemptID: rec.AttemptID, Status: 503, Error: domain.FailureCopyDropped, AgentID: r.AgentID,
				DurationMs: time.Since(started).Milliseconds()}
			<-recorded
			h.recordCopy(rec, r.AgentID, out)
		})
		return
	}
	taken := func() { h.copyBytes.give(r.AgentID, rec.AttemptID) }
	// The goroutine takes the request from send and keeps no reference to
	// it once ForwardTo has encoded it.
	send := make(chan domain.ForwardCommand, 1)
	send <- cp
	h.serving.Go(func() {
		var out domain.ForwardOutcome
		err := errors.New("no bus to other relay nodes")
		if h.remote != nil {
			out, err = h.remote.ForwardTo(h.life, r.Node, <-send, taken)
		}
		taken() // unacknowledged, its reply came or it failed
		if err != nil {
			var lost *NodeLostError
			var timedOut *TimeoutError
			switch {
			case errors.As(err, &lost):
				out = domain.ForwardOutcome{Status: 503, Error: NodeLost + " (" + r.Node + ")"}
			case errors.As(err, &timedOut):
				out = domain.ForwardOutcome{Status: 504, Error: domain.FailureTimeout + timeout.String()}
			default:
				out = domain.ForwardOutcome{Status: 503, Error: NodeUnreachable + " (" + r.Node + ")"}
			}
			h.logger.Warn("copy sent to another node failed", "attempt_id", rec.AttemptID, "node", r.Node, "error", err)
		}
		out.AttemptID, out.AgentID, out.Position = rec.AttemptID, r.AgentID, 0
		if out.DurationMs <= 0 {
			out.DurationMs = time.Since(started).Milliseconds()
		}
		out, release := h.holdAnswer(rec.AccountID, rec.CaptureResponse, out)
		defer release()
		<-recorded
		h.recordCopy(rec, r.AgentID, out)
	})
}

// serveCopy offers a copy another node sent for the session cmd.Agent of
// this process, without waiting, and returns what waits for its outcome,
// unrecorded: the sending node records it after the primary's.
func (h *Hub) serveCopy(cmd domain.ForwardCommand) (await func(ctx context.Context) domain.ForwardOutcome) {
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = DefaultForwardTimeout
	}
	attemptID, agentID := cmd.AttemptID, cmd.Agent
	now := func(out domain.ForwardOutcome) func(context.Context) domain.ForwardOutcome {
		return func(context.Context) domain.ForwardOutcome { return out }
	}
	h.mu.Lock()
	c, ok := h.byAgent[agentID]
	h.mu.Unlock()
	if !ok || c.info.EndpointID != cmd.EndpointID || c.info.AccountID != cmd.AccountID {
		return now(domain.ForwardOutcome{AttemptID: attemptID, Status: 503, Error: domain.FailureAgentDisconnected, AgentID: agentID})
	}
	started := time.Now()
	p, ok := h.offerCopy(c, cmd)
	if !ok {
		return now(domain.ForwardOutcome{AttemptID: attemptID, Status: 503, Error: errAttemptInFlight.Error(), AgentID: agentID})
	}
	return func(ctx context.Context) domain.ForwardOutcome { return h.awaitCopy(ctx, p, agentID, timeout, started) }
}

// offer hands cmd to the agent if its queue has room, without waiting.
func (s *session) offer(cmd domain.ForwardCommand) bool {
	s.sendMu.RLock()
	defer s.sendMu.RUnlock()
	if s.closed {
		return false
	}
	select {
	case s.work <- cmd:
		return true
	default:
		return false
	}
}

// plan is where one attempt goes: its primary, here (local, its attempt
// pending as pending) or on another node (remote), and the copies. With
// neither, ending names a session here that would have taken it and whose
// end is being recorded, and lapsed tells of one on a lost node whose end
// is not in the log yet (RemoteSession.Ending): the attempt waits for
// those ends (awaitEnds).
type plan struct {
	local   *session
	pending *pendingWork
	remote  *RemoteSession
	copies  []member
	ending  *session
	lapsed  bool
}

func (p plan) agentID() string {
	if p.local != nil {
		return p.local.info.AgentID
	}
	if p.remote != nil {
		return p.remote.AgentID
	}
	return ""
}

// dispatch picks the session of the command's Endpoint that answers it
// (the primary rule applied to the sessions of the command's account,
// here and in remote, whose filters match) and, when it is here, registers
// the attempt as pending on it; the other matching sessions get copies. A
// command another node sent for one session (cmd.Agent) goes to it alone:
// that node gives the copies; if the session has just ended, the rule
// picks among this process's. No session: none is connected, or none
// matches. The copies are at most what the delivery may still record
// (domain.MaxDeliveryCopies), the copies given here and not yet recorded
// counted (copyCounts).
//
// The filters are matched with h.mu released, as Admits matches them: the
// lock is every account's (forwards, answers, attaches), and one
// account's filters against one request are its own work. The attempt is
// then registered under the lock among the matching sessions still
// attached, so that a detach cannot miss it: one that ended meanwhile is
// left out, and the rule picks among the rest. A session whose end is
// being recorded takes nothing, nor does one of a lost node whose end the
// log does not hold yet (RemoteSession.Ending); when no other session
// takes the attempt, the plan names them (plan.ending, plan.lapsed) and
// the attempt waits for their ends before it is refused.
func (h *Hub) dispatch(cmd domain.ForwardCommand, remote []RemoteSession) (plan, error) {
	h.mu.Lock()
	if _, busy := h.pending[cmd.AttemptID]; busy {
		h.mu.Unlock()
		return plan{}, errAttemptInFlight
	}
	if s, ok := h.byAgent[cmd.Agent]; ok && !s.ending && s.info.EndpointID == cmd.EndpointID && s.info.AccountID == cmd.AccountID {
		defer h.mu.Unlock()
		return plan{local: s, pending: h.addPending(cmd, s)}, nil
	}
	ms := h.members(cmd.EndpointID, cmd.AccountID, remote)
	h.mu.Unlock()

	eligible := matching(ms, cmd)

	h.mu.Lock()
	defer h.mu.Unlock()
	if _, busy := h.pending[cmd.AttemptID]; busy {
		return plan{}, errAttemptInFlight
	}
	live := eligible[:0]
	var ending *session
	lapsed := false
	for _, m := range eligible {
		switch {
		case m.local == nil && m.remote.Ending:
			lapsed = true
		case m.local == nil:
			live = append(live, m)
		case h.byAgent[m.local.info.AgentID] != m.local: // ended
		case m.local.ending:
			ending = m.local
		default:
			live = append(live, m)
		}
	}
	i := primaryOf(live)
	if i < 0 {
		return plan{ending: ending, lapsed: lapsed}, nil
	}
	var pl plan
	if m := live[i]; m.local != nil {
		pl.local = m.local
		pl.pending = h.addPending(cmd, m.local)
	} else {
		r := m.remote
		pl.remote = &r
	}
	if cmd.Agent != "" {
		return pl, nil
	}
	// No session gets a copy its delivery cannot record: counted with
	// the copies given before and not yet recorded (copycount.go).
	left := h.copyCounts.give(cmd, len(live)-1, time.Now())
	for j, c := range live {
		if j != i && len(pl.copies) < left {
			pl.copies = append(pl.copies, c)
		}
	}
	return pl, nil
}

// addPending registers cmd's attempt as pending on s. h.mu held.
func (h *Hub) addPending(cmd domain.ForwardCommand, s *session) *pendingWork {
	p := &pendingWork{attemptID: cmd.AttemptID, accountID: cmd.AccountID, session: s,
		result: make(chan domain.ForwardOutcome, 1)}
	h.pending[cmd.AttemptID] = p
	return p
}

// matching keeps the members whose filters match cmd. Every member's JSON
// paths are looked up in one pass over the body, before any is matched.
func matching(ms []member, cmd domain.ForwardCommand) []member {
	var req *domain.FilterRequest
	lists := make([][]domain.Filter, 0, len(ms))
	for _, m := range ms {
		if fs := m.filters(); len(fs) > 0 {
			lists = append(lists, fs)
		}
	}
	if len(lists) > 0 {
		req = domain.NewFilterRequest(cmd)
		req.Prepare(lists...)
	}
	out := ms[:0]
	for _, m := range ms {
		if fs := m.filters(); len(fs) > 0 {
			if ok, _ := domain.Match(fs, req); !ok {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// Admits tells whether any session of the Endpoint would be given the
// request (its filters match): this process's and, with a Roster, those
// of every live node. When none would though some are connected, it says
// why not: the first connected session's reason. With no session known
// it admits: another node's sessions, or none, decide.
func (h *Hub) Admits(endpointID, accountID string, req *domain.FilterRequest) (ok bool, why string) {
	remote := h.roster(endpointID)
	h.mu.Lock()
	ms := h.members(endpointID, accountID, remote)
	h.mu.Unlock()
	lists := make([][]domain.Filter, 0, len(ms))
	for _, m := range ms {
		lists = append(lists, m.filters())
	}
	req.Prepare(lists...) // every session's JSON paths in one pass over the body
	seen := false
	for _, m := range ms {
		ok, reason := domain.Match(m.filters(), req)
		if ok {
			return true, ""
		}
		if !seen {
			why, seen = reason, true
		}
	}
	if !seen {
		return true, ""
	}
	return false, "no listener matched: " + why
}

// resolve decides p's outcome as fallback unless Complete or detach decided
// it first, and returns whichever outcome won.
func (h *Hub) resolve(p *pendingWork, fallback domain.ForwardOutcome) domain.ForwardOutcome {
	h.mu.Lock()
	if h.pending[p.attemptID] == p {
		delete(h.pending, p.attemptID)
		p.result <- fallback
	}
	h.mu.Unlock()
	return <-p.result
}
