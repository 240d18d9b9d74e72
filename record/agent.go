package record

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/relayhq/relay/domain"
)

// AgentConnected records the start of an agent's session, held by this
// Recorder's node: whether it asked to be primary and its filters' text. It
// returns the log position of the start: the primary rule orders sessions by it.
// It waits for the start even when ctx ends meanwhile (a client that
// subscribes and completes at once): an append the log takes cannot be
// taken back, and a caller told of ctx's end instead would never record
// the session's end, leaving it open in the log for good.
func (r *Recorder) AgentConnected(ctx context.Context, endpointID, agentID, target string, primary bool, filters []string) (uint64, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	ev := domain.AgentConnected{EndpointID: endpointID, AgentID: agentID, Target: target, Primary: primary, Filters: filters}
	res, err := r.Record(ctx, domain.AgentStream(endpointID), domain.Any(), domain.Trace{}, ev)
	if err != nil {
		return 0, fmt.Errorf("record %s: %w", ev.EventType(), err)
	}
	return res.Position, nil
}

// AgentDisconnected records the end of an agent's session, even when ctx
// has ended (the session's end is usually why).
func (r *Recorder) AgentDisconnected(ctx context.Context, endpointID, agentID, reason string) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	ev := domain.AgentDisconnected{EndpointID: endpointID, AgentID: agentID, Reason: reason}
	if _, err := r.Record(ctx, domain.AgentStream(endpointID), domain.Any(), domain.Trace{}, ev); err != nil {
		return fmt.Errorf("record %s: %w", ev.EventType(), err)
	}
	return nil
}

// StaleAttempt is a forward the log shows requested and never answered
// although no process waits for it any more.
type StaleAttempt struct {
	DeliveryID string
	AttemptID  string
}

// RestartedReason is the error of an attempt a crash left open.
const RestartedReason = domain.FailureRestarted

// NodeLostReason is the error of an attempt whose node's lease lapsed.
const NodeLostReason = domain.FailureNodeLostBeforeAnswer

// FailStale records ForwardFailed{Status: 503, Error: reason} for each
// attempt still pending, as if its agent had gone: the sender's connection
// and the agent's session ended with the process that started it, so no
// outcome will ever come (RestartedReason at startup, before any forward
// starts; NodeLostReason for a node whose lease lapsed). An attempt with
// an outcome already is left as it is.
func (r *Recorder) FailStale(ctx context.Context, attempts []StaleAttempt, reason string) error {
	var errs []error
	for _, a := range attempts {
		cmd := NewForward(Forward{DeliveryID: a.DeliveryID, AttemptID: a.AttemptID}, "", 0)
		out := domain.ForwardOutcome{AttemptID: a.AttemptID, Status: http.StatusServiceUnavailable, Error: reason}
		if _, err := r.RecordOutcome(ctx, cmd, out); err != nil {
			errs = append(errs, fmt.Errorf("fail stale attempt %s of delivery %s: %w", a.AttemptID, a.DeliveryID, err))
		}
	}
	return errors.Join(errs...)
}
