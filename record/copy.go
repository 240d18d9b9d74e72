package record

import (
	"context"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
)

// RecordCopy records a copy of a delivery given to another session than
// the primary (cmd.AttemptID is the copy's own attempt) with its outcome,
// in one append: the copy's ForwardRequested and its ForwardResponded or
// ForwardFailed, both marked as a copy. Nothing waits on a copy, so it is
// recorded after the primary's outcome, never in its way.
func (r *Recorder) RecordCopy(ctx context.Context, cmd domain.ForwardCommand, agentID string, out domain.ForwardOutcome) (uint64, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	stream := domain.DeliveryStream(cmd.DeliveryID)
	var ids []string // kept across tries so a repeated append stays idempotent
	var position uint64
	err := conflict.Retry(ctx, outcomeTries, func(int) error {
		recs, events, err := domain.LoadStream(ctx, r.store, r.codec, stream)
		if err != nil {
			return err
		}
		d := domain.LoadDelivery(events)
		if d.Pending(cmd.AttemptID) {
			return nil // recorded by an earlier try whose answer was lost
		}
		if err := d.RequestCopy(cmd.AttemptID, cmd.EndpointID, agentID); err != nil {
			return &InvariantError{Err: err}
		}
		if out.Failed() {
			d.RecordFailure(domain.ForwardFailed{AttemptID: cmd.AttemptID, AgentID: agentID, Status: out.Status,
				Error: out.Error, DurationMs: out.DurationMs, Copy: true})
		} else {
			headers := out.Headers
			if headers == nil {
				headers = []domain.Header{}
			}
			fr := domain.ForwardResponded{AttemptID: cmd.AttemptID, AgentID: agentID, Status: out.Status, Headers: headers,
				BodySize: int64(len(out.Body)), Captured: cmd.CaptureResponse, DurationMs: out.DurationMs,
				Signature: out.Signature, Copy: true}
			if cmd.CaptureResponse {
				fr.Body = out.Body
			}
			d.RecordResponse(fr)
		}
		causation := ""
		if len(recs) > 0 {
			causation = recs[0].ID
		}
		var res domain.AppendResult
		res, ids, err = r.appendIDs(ctx, ids, stream, d.Expected(), domain.Trace{CorrelationID: cmd.CorrelationID, CausationID: causation}, d.Changes())
		position = res.Position
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record copy %s: %w", cmd.AttemptID, err)
	}
	return position, nil
}

// PrimaryChanged records which session of an Endpoint answers its senders
// from now on, even when ctx has ended (a session's end is often why).
func (r *Recorder) PrimaryChanged(ctx context.Context, endpointID, agentID, previous, reason string) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	ev := domain.PrimaryChanged{EndpointID: endpointID, AgentID: agentID, Previous: previous, Reason: reason}
	if _, err := r.Record(ctx, domain.AgentStream(endpointID), domain.Any(), domain.Trace{}, ev); err != nil {
		return fmt.Errorf("record %s: %w", ev.EventType(), err)
	}
	return nil
}
