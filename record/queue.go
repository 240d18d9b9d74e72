package record

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
)

// DeliveryIDHeader is sent with every attempt of a queued delivery, the
// same on each, so the local process can drop a duplicate (delivery is at
// least once, docs/queue.md).
const DeliveryIDHeader = "Relay-Delivery-Id"

// ReceiveQueued records a delivery to a QUEUE Endpoint with the answer the
// sender gets at once, marked queued (one delivery.received.v1), durably:
// only then may the sender get it.
func (r *Recorder) ReceiveQueued(ctx context.Context, rc Receipt, status int, reason string) error {
	d, err := domain.ReceiveAndAnswer(rc.DeliveryID, rc.Address, rc.Kind, rc.AccountID, rc.Request, status, reason)
	if err != nil {
		return &InvariantError{Err: err}
	}
	changes := d.Changes()
	ev, ok := changes[0].(domain.DeliveryReceived)
	if !ok {
		return &InvariantError{Err: errors.New("a delivery starts with its receipt")}
	}
	ev.Queued = true
	changes[0] = ev
	return r.appendNow(ctx, domain.DeliveryStream(rc.DeliveryID), domain.NoStream(), domain.Trace{CorrelationID: rc.DeliveryID}, changes, &rc)
}

// QueuedTarget is what an attempt of a queued delivery needs to know.
type QueuedTarget struct {
	AccountID       string
	EndpointID      string
	CaptureResponse bool
	Timeout         time.Duration
	// Duplicate: an earlier attempt was left open (a crash, a lost node);
	// the local process may have seen the delivery already.
	Duplicate bool
}

// RequestQueued records a new attempt of a queued delivery
// (forward.requested.v1 {queued: true}) and returns its command, which
// carries the Relay-Delivery-Id header.
func (r *Recorder) RequestQueued(ctx context.Context, deliveryID string, t QueuedTarget) (domain.ForwardCommand, error) {
	stream := domain.DeliveryStream(deliveryID)
	var cmd domain.ForwardCommand
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		received, d, err := r.loadDelivery(ctx, deliveryID)
		if err != nil {
			return err
		}
		attemptID := r.newID()
		if err := d.RequestQueuedAttempt(attemptID, t.EndpointID, t.Duplicate); err != nil {
			return err
		}
		tr := domain.Trace{CorrelationID: deliveryID, CausationID: attemptID}
		res, ids, err := r.appendIDs(ctx, nil, stream, d.Expected(), tr, d.Changes())
		if err != nil {
			return err
		}
		headers := make([]domain.Header, 0, len(received.Headers)+1)
		for _, h := range received.Headers {
			if !equalFold(h.Name, DeliveryIDHeader) { // the relay's own, never the sender's
				headers = append(headers, h)
			}
		}
		headers = append(headers, domain.Header{Name: DeliveryIDHeader, Value: deliveryID})
		cmd = NewForward(Forward{
			DeliveryID: deliveryID, AttemptID: attemptID, EndpointID: t.EndpointID, AccountID: t.AccountID,
			Method: received.Method, Target: received.Target, Headers: headers, Body: received.Body,
			Timeout: t.Timeout, CaptureResponse: t.CaptureResponse,
			Host: received.Host, Scheme: received.Scheme, RemoteAddr: received.RemoteAddr,
			CopiesRecorded: d.Copies(),
		}, ids[len(ids)-1], res.NextRevision)
		return nil
	})
	return cmd, err
}

// RecordQueueDecision appends what the queue decided after an attempt
// (retry scheduled, dead, delivered) or a redrive, and returns its log
// position. It is made even when ctx has ended: the decision was taken.
func (r *Recorder) RecordQueueDecision(ctx context.Context, deliveryID string, ev domain.Event) (uint64, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	res, err := r.Record(ctx, domain.DeliveryStream(deliveryID), domain.Any(), domain.Trace{CorrelationID: deliveryID}, ev)
	if err != nil {
		return 0, err
	}
	return res.Position, nil
}

// Requeue puts a dead delivery back in its queue (redriveDead) and
// returns the log position of its DeliveryRequeued, unless it has had
// domain.MaxDeliveryAttempts (domain.AttemptLimitError): the count is the
// log's, folded as for a retry, not a view's.
func (r *Recorder) Requeue(ctx context.Context, deliveryID, accountID, by string) (uint64, error) {
	stream := domain.DeliveryStream(deliveryID)
	var position uint64
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		_, d, err := r.loadDelivery(ctx, deliveryID)
		if err != nil {
			return err
		}
		if err := d.Requeue(accountID, by); err != nil {
			return err
		}
		res, err := r.Record(ctx, stream, d.Expected(), domain.Trace{CorrelationID: deliveryID}, d.Changes()...)
		position = res.Position
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("requeue %s: %w", deliveryID, err)
	}
	return position, nil
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
