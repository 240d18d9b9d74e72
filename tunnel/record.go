package tunnel

import (
	"context"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
)

// appendTries bounds the optimistic-concurrency retries of one append: the
// delivery stream has few writers (ingress, retry, this Hub).
const appendTries = 5

// record appends the attempt's ForwardResponded or ForwardFailed to the
// delivery's stream. An attempt that is no longer pending (already recorded)
// raises no event and is not an error. It returns the event's log position
// (0 when none was raised).
func (h *Hub) record(ctx context.Context, cmd domain.ForwardCommand, out domain.ForwardOutcome) (uint64, error) {
	stream := domain.DeliveryStream(cmd.DeliveryID)
	var ids []string // kept across tries so a repeated append stays idempotent
	var position uint64
	err := conflict.Retry(ctx, appendTries, func(try int) error {
		var d *domain.Delivery
		var causation string
		var err error
		if try == 1 && cmd.RequestEventID != "" {
			// Fast path: the outcome goes right after the request; if
			// anything came in between, the append is refused and the next
			// try replays the stream.
			d, causation = domain.ResumeAttempt(cmd.DeliveryID, cmd.AttemptID, cmd.RequestRevision), cmd.RequestEventID
		} else if d, causation, err = h.loadDelivery(ctx, stream, cmd.AttemptID); err != nil {
			return err
		}
		if out.Failed() {
			d.RecordFailure(domain.ForwardFailed{
				AttemptID: cmd.AttemptID, AgentID: out.AgentID, Status: out.Status,
				Error: out.Error, DurationMs: out.DurationMs,
			})
		} else {
			headers := out.Headers
			if headers == nil {
				headers = []domain.Header{}
			}
			r := domain.ForwardResponded{
				AttemptID: cmd.AttemptID, AgentID: out.AgentID, Status: out.Status, Headers: headers,
				BodySize: int64(len(out.Body)), Captured: cmd.CaptureResponse, DurationMs: out.DurationMs,
			}
			if cmd.CaptureResponse {
				r.Body = out.Body
			}
			d.RecordResponse(r)
		}
		changes := d.Changes()
		if len(changes) == 0 {
			h.logger.Warn("forward outcome not recorded: attempt is not pending",
				"delivery_id", cmd.DeliveryID, "attempt_id", cmd.AttemptID)
			return nil
		}
		tr := domain.Trace{CorrelationID: cmd.CorrelationID, CausationID: causation}
		var data []domain.EventData
		if data, ids, err = h.codec.EncodeAll(ids, h.newID, changes, h.now(), tr); err != nil {
			return err
		}
		res, err := h.store.Append(ctx, stream, d.Expected(), data...)
		position = res.Position
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record attempt %s: %w", cmd.AttemptID, err)
	}
	return position, nil
}

// loadDelivery rebuilds a delivery from its stream and returns the ID of
// the event that requested attemptID (the outcome's causation).
func (h *Hub) loadDelivery(ctx context.Context, stream, attemptID string) (*domain.Delivery, string, error) {
	recs, events, err := domain.LoadStream(ctx, h.store, h.codec, stream)
	if err != nil {
		return nil, "", err
	}
	var causation string
	for i, e := range events {
		if fr, ok := e.(domain.ForwardRequested); ok && fr.AttemptID == attemptID {
			causation = recs[i].ID
		}
	}
	return domain.LoadDelivery(events), causation, nil
}
