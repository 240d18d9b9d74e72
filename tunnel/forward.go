package tunnel

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/relayhq/relay/domain"
)

// Forward runs one attempt on a session this process holds and returns
// its outcome once recorded: the seam ingress and retry forward through.
// Nothing is encoded and no bus is crossed. A failed attempt (502, 503,
// 504) is an outcome, not an error; errors mean the outcome is unknown to
// the caller: ctx ended (*TimeoutError on its deadline), or the Hub could
// not carry out or record the forward. The attempt does not end with ctx:
// like one sent over the bus, it runs until its outcome (bounded by the
// command's timeout) or the Hub's Close, and is recorded.
func (h *Hub) Forward(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error) {
	if cmd.AttemptID == "" {
		return domain.ForwardOutcome{}, &domain.InvalidInputError{Field: "attempt id", Reason: "empty"}
	}
	if node, ok := h.elsewhere(cmd.EndpointID); ok {
		return h.forwardRemote(ctx, node, cmd)
	}
	type result struct {
		out domain.ForwardOutcome
		err error
	}
	start := time.Now()
	done := make(chan result, 1)
	h.serving.Go(func() {
		out, err := h.serve(h.life, cmd)
		done <- result{out, err}
	})
	select {
	case r := <-done:
		return r.out, r.err
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
	out, err := h.remote.ForwardTo(ctx, node, cmd)
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
	h.serving.Go(func() {
		defer h.markReceivedDone(cmd.AttemptID)
		// A panic still becomes an answer, so the sender does not wait
		// for nothing.
		defer func() {
			if v := recover(); v != nil {
				h.logger.Error("forward command panicked", "attempt_id", cmd.AttemptID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				answer(domain.ForwardOutcome{AttemptID: cmd.AttemptID}, fmt.Errorf("panic: %v", v))
			}
		}()
		out, err := h.serve(h.life, cmd)
		if err != nil {
			h.logger.Error("forward command failed", "attempt_id", cmd.AttemptID, "error", err)
		}
		answer(out, err)
	})
}

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
					delete(h.received, id)
				}
			}
			h.receivedPruned = now
		}
		h.received[cmd.AttemptID] = &receivedCommand{at: now}
	}
	done := again && seen.done
	h.mu.Unlock()
	switch {
	case !again:
		return false
	case !done:
		ack()
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

func (h *Hub) markReceivedDone(attemptID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.received[attemptID]; ok {
		r.done, r.at = true, time.Now()
	}
}

// serve runs one attempt and records its outcome. The outcome is recorded
// even when ctx has ended (shutdown): the attempt would otherwise stay
// pending in the log forever. The copies given to the other sessions are
// recorded after it, never before: the primary's outcome goes right after
// its request, and the sender waits for nothing else.
func (h *Hub) serve(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error) {
	recorded := make(chan struct{})
	defer close(recorded)
	out, err := h.forward(ctx, cmd, recorded)
	if err != nil {
		return domain.ForwardOutcome{}, err
	}
	if out.Position, err = h.rec.RecordOutcome(ctx, cmd, out); err != nil {
		return domain.ForwardOutcome{}, err
	}
	return out, nil
}

// forward gives cmd to the primary session of its Endpoint (of those whose
// filters match), a copy to every other matching session, and waits for
// the primary's outcome. recorded closes once that outcome is recorded.
func (h *Hub) forward(ctx context.Context, cmd domain.ForwardCommand, recorded <-chan struct{}) (domain.ForwardOutcome, error) {
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = DefaultForwardTimeout
	}
	started := time.Now()
	s, p, copies, err := h.dispatch(cmd)
	if err != nil {
		return domain.ForwardOutcome{}, fmt.Errorf("forward %s: %w", cmd.AttemptID, err)
	}
	if s == nil {
		return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 503, Error: domain.FailureNoAgent}, nil
	}
	h.logger.Debug("forward dispatched", "delivery_id", cmd.DeliveryID, "attempt_id", cmd.AttemptID,
		"endpoint_id", cmd.EndpointID, "agent_id", s.info.AgentID, "copies", len(copies))

	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s.send(wctx, cmd) // if this fails, the outcome is decided by detach or below
	for _, c := range copies {
		h.copyTo(ctx, c, cmd, timeout, recorded)
	}
	var out domain.ForwardOutcome
	select {
	case out = <-p.result:
	case <-wctx.Done():
		fallback := domain.ForwardOutcome{Status: 504, Error: domain.FailureTimeout + timeout.String(),
			Failure: "the local target " + s.info.Target + " did not answer within " + timeout.String()}
		if ctx.Err() != nil {
			fallback = domain.ForwardOutcome{Status: 503, Error: domain.FailureShuttingDown}
		}
		fallback.AttemptID, fallback.AgentID = cmd.AttemptID, s.info.AgentID
		out = h.resolve(p, fallback)
	}
	if out.DurationMs <= 0 {
		out.DurationMs = time.Since(started).Milliseconds()
	}
	return out, nil
}

// copyTo gives a copy of cmd, as an attempt of its own, to session c
// without waiting: a full queue drops the copy. Its outcome (the agent's,
// a timeout, or the drop) is recorded once the primary's is.
func (h *Hub) copyTo(ctx context.Context, c *session, cmd domain.ForwardCommand, timeout time.Duration, recorded <-chan struct{}) {
	cp := cmd
	cp.AttemptID = h.rec.NewID()
	cp.RequestEventID, cp.RequestRevision = "", 0
	p := &pendingWork{attemptID: cp.AttemptID, accountID: cp.AccountID, session: c, result: make(chan domain.ForwardOutcome, 1)}
	h.mu.Lock()
	h.pending[cp.AttemptID] = p
	h.mu.Unlock()
	started := time.Now()
	if !c.offer(cp) {
		h.mu.Lock()
		if h.pending[cp.AttemptID] == p {
			delete(h.pending, cp.AttemptID)
			p.result <- domain.ForwardOutcome{AttemptID: cp.AttemptID, Status: 503, Error: domain.FailureCopyDropped, AgentID: c.info.AgentID}
		}
		h.mu.Unlock()
	}
	h.serving.Go(func() {
		t := time.NewTimer(timeout)
		defer t.Stop()
		var out domain.ForwardOutcome
		select {
		case out = <-p.result:
		case <-t.C:
			out = h.resolve(p, domain.ForwardOutcome{AttemptID: cp.AttemptID, Status: 504, Error: domain.FailureTimeout + timeout.String(), AgentID: c.info.AgentID})
		case <-ctx.Done():
			out = h.resolve(p, domain.ForwardOutcome{AttemptID: cp.AttemptID, Status: 503, Error: domain.FailureShuttingDown, AgentID: c.info.AgentID})
		}
		if out.DurationMs <= 0 {
			out.DurationMs = time.Since(started).Milliseconds()
		}
		<-recorded
		if _, err := h.rec.RecordCopy(h.life, cp, c.info.AgentID, out); err != nil {
			h.logger.Error("record copy", "delivery_id", cp.DeliveryID, "attempt_id", cp.AttemptID, "agent_id", c.info.AgentID, "error", err)
		}
	})
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

// dispatch picks the session of the command's Endpoint that answers it
// (the primary rule applied to the sessions of the command's account whose
// filters match) and registers the attempt as pending on it, in one step
// so that a detach cannot miss it; the other matching sessions get copies.
// A nil session means none is connected, or none matches.
func (h *Hub) dispatch(cmd domain.ForwardCommand) (*session, *pendingWork, []*session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, busy := h.pending[cmd.AttemptID]; busy {
		return nil, nil, nil, errAttemptInFlight
	}
	var eligible []*session
	var req *domain.FilterRequest
	for _, s := range h.byEndpoint[cmd.EndpointID] {
		if s.info.AccountID != cmd.AccountID {
			continue
		}
		if len(s.info.Filters) > 0 {
			if req == nil {
				req = domain.NewFilterRequest(cmd)
			}
			if ok, _ := domain.Match(s.info.Filters, req); !ok {
				continue
			}
		}
		eligible = append(eligible, s)
	}
	s := primaryOf(eligible)
	if s == nil {
		return nil, nil, nil, nil
	}
	p := &pendingWork{
		attemptID: cmd.AttemptID,
		accountID: cmd.AccountID,
		session:   s,
		result:    make(chan domain.ForwardOutcome, 1),
	}
	h.pending[cmd.AttemptID] = p
	var copies []*session
	for _, c := range eligible {
		if c != s {
			copies = append(copies, c)
		}
	}
	return s, p, copies, nil
}

// Admits tells whether any session of the Endpoint this process holds
// would be given the request (its filters match), and when none would
// though some are connected, why not: the first session's reason. With no
// session here it admits: another node's sessions, or none, decide.
func (h *Hub) Admits(endpointID, accountID string, req *domain.FilterRequest) (ok bool, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := false
	for _, s := range h.byEndpoint[endpointID] {
		if s.info.AccountID != accountID {
			continue
		}
		ok, reason := domain.Match(s.info.Filters, req)
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
