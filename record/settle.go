package record

import (
	"context"
	"fmt"

	"github.com/relayhq/relay/domain"
)

// SettleOutcome records out as the attempt's outcome unless one is
// recorded already (another node answered it first: the delivery stream's
// expected revision lets exactly one append win), and returns the outcome
// that stands: out with its position, or the recorded one, adopted. A node
// that gave up on an attempt another node was serving settles it this way,
// so its sender is answered what the log holds.
func (r *Recorder) SettleOutcome(ctx context.Context, cmd domain.ForwardCommand, out domain.ForwardOutcome) (domain.ForwardOutcome, error) {
	pos, err := r.RecordOutcome(ctx, cmd, out)
	if err != nil {
		return domain.ForwardOutcome{}, err
	}
	if pos != 0 {
		out.Position = pos
		return out, nil
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	settled, err := r.RecordedOutcome(ctx, cmd.DeliveryID, cmd.AttemptID)
	if err != nil {
		// Recorded by another, but not read back: as unknown to the
		// sender as an outcome not recorded.
		return domain.ForwardOutcome{}, fmt.Errorf("%w: %w", domain.ErrOutcomeNotRecorded, err)
	}
	return settled, nil
}

// RecordedOutcome reads back an attempt's recorded outcome. The body is
// there only when the response was captured.
func (r *Recorder) RecordedOutcome(ctx context.Context, deliveryID, attemptID string) (domain.ForwardOutcome, error) {
	recs, events, err := domain.LoadStream(ctx, r.store, r.codec, domain.DeliveryStream(deliveryID))
	if err != nil {
		return domain.ForwardOutcome{}, fmt.Errorf("read outcome of attempt %s: %w", attemptID, err)
	}
	for i, stored := range events {
		for _, e := range domain.Expand(stored) { // a receipt may record the answer (ReceiptHold)
			switch e := e.(type) {
			case domain.ForwardResponded:
				if e.AttemptID == attemptID {
					return domain.ForwardOutcome{AttemptID: attemptID, Status: e.Status, Headers: e.Headers, Body: e.Body,
						DurationMs: e.DurationMs, AgentID: e.AgentID, Position: recs[i].Position}, nil
				}
			case domain.ForwardFailed:
				if e.AttemptID == attemptID {
					return domain.ForwardOutcome{AttemptID: attemptID, Status: e.Status, Error: e.Error,
						DurationMs: e.DurationMs, AgentID: e.AgentID, Position: recs[i].Position}, nil
				}
			}
		}
	}
	return domain.ForwardOutcome{}, fmt.Errorf("read outcome of attempt %s: %w", attemptID, domain.ErrNotFound)
}
