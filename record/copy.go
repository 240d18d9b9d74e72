package record

import (
	"context"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
)

// RecordCopy records a copy of a delivery given to another session than
// the primary (cmd.AttemptID is the copy's own attempt) with its outcome,
// in one append: the copy's ForwardRequested and its ForwardResponded or
// ForwardFailed, both marked as a copy. Nothing waits on a copy, so it is
// recorded after the primary's outcome, never in its way. Its answer
// keeps its body only while the account may store more (withinQuota),
// and its fidelity receipt as the primary's does, beside the digests the
// copy kept of its request (cmd.Sent).
//
// A delivery holds its copies and their answers, as many as its listeners
// times its attempts, up to domain.MaxDeliveryCopies: the copy reads the
// request and the events appended since the state it folded last, answers
// without their bodies (foldDelivery), as a retry does, never the whole
// stream. A copy past that bound is not recorded (0, nil): its listener
// got it, and the delivery's history shows the copies before it.
func (r *Recorder) RecordCopy(ctx context.Context, cmd domain.ForwardCommand, agentID string, out domain.ForwardOutcome) (uint64, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	stream := domain.DeliveryStream(cmd.DeliveryID)
	var answer domain.ForwardResponded
	if !out.Failed() {
		answer = responded(cmd, out, fidelityOf(cmd, out))
		answer.AgentID, answer.Copy = agentID, true
		answer = r.withinQuota(ctx, cmd, answer)
	}
	var ids []string // kept across tries so a repeated append stays idempotent
	var position uint64
	err := conflict.Retry(ctx, outcomeTries, func(int) error {
		first, _, st, err := r.foldDelivery(ctx, cmd.DeliveryID)
		if err != nil {
			return err
		}
		d := st.d
		if d.Pending(cmd.AttemptID) {
			return nil // recorded by an earlier try whose answer was lost
		}
		if err := d.RequestCopy(cmd.AttemptID, cmd.EndpointID, agentID); errors.Is(err, domain.ErrCopyLimit) {
			return nil // the delivery's copies are all it records
		} else if err != nil {
			return &InvariantError{Err: err}
		}
		if out.Failed() {
			d.RecordFailure(domain.ForwardFailed{AttemptID: cmd.AttemptID, AgentID: agentID, Status: out.Status,
				Error: storedText(out.Error), DurationMs: out.DurationMs, Copy: true})
		} else {
			d.RecordResponse(answer)
		}
		var res domain.AppendResult
		res, ids, err = r.appendIDs(ctx, ids, stream, d.Expected(), domain.Trace{CorrelationID: cmd.CorrelationID, CausationID: first.ID}, d.Changes())
		position = res.Position
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record copy %s: %w", cmd.AttemptID, err)
	}
	return position, nil
}
