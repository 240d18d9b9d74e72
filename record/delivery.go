package record

import (
	"context"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
)

// Receipt is a request that arrived at a public address.
type Receipt struct {
	DeliveryID string
	Address    string
	Kind       domain.AddressKind
	AccountID  string // owner of an Endpoint; empty for inspectors
	Request    domain.CapturedRequest
}

// InvariantError is a capture the domain refused: a bug, not a failure of
// the store.
type InvariantError struct{ Err error }

func (e *InvariantError) Error() string { return "delivery invariant: " + e.Err.Error() }
func (e *InvariantError) Unwrap() error { return e.Err }

// ReceiveAnswered records a delivery together with the answer the relay
// gives it on receipt (one delivery.received.v1 carrying the answer),
// durably: only then may the sender get it.
func (r *Recorder) ReceiveAnswered(ctx context.Context, rc Receipt, status int, reason string) error {
	d, err := domain.ReceiveAndAnswer(rc.DeliveryID, rc.Address, rc.Kind, rc.AccountID, rc.Request, status, reason)
	if err != nil {
		return &InvariantError{Err: err}
	}
	return r.appendNow(ctx, domain.DeliveryStream(rc.DeliveryID), domain.NoStream(), domain.Trace{CorrelationID: rc.DeliveryID}, d.Changes(), &rc)
}

// ReceiveForward records a delivery to a PROXY Endpoint and its first
// attempt (one delivery.received.v1 whose forward field requests it; logs
// written before hold a forward.requested.v1 right after it) and
// returns the attempt's command, which can be sent at once. With a store
// that queues appends (domain.AppendQueuer) the receipt is not appended
// yet: it waits up to ReceiptHold for the attempt's answer, which
// RecordOutcome then records in it. Queued.Wait tells whether the record
// landed (appending it first if it is still held), which must be known
// before the sender is answered.
func (r *Recorder) ReceiveForward(ctx context.Context, rc Receipt, fw Forward) (domain.ForwardCommand, Queued, error) {
	d, err := domain.ReceiveDelivery(rc.DeliveryID, rc.Address, rc.Kind, rc.AccountID, rc.Request)
	if err != nil {
		return domain.ForwardCommand{}, Queued{}, &InvariantError{Err: err}
	}
	attemptID := r.newID()
	if err := d.RequestForwardAtReceipt(attemptID, rc.Address); err != nil {
		return domain.ForwardCommand{}, Queued{}, fmt.Errorf("request forward: %w", err)
	}
	fw.DeliveryID, fw.AttemptID, fw.EndpointID, fw.AccountID = rc.DeliveryID, attemptID, rc.Address, rc.AccountID
	stream, tr := domain.DeliveryStream(rc.DeliveryID), domain.Trace{CorrelationID: rc.DeliveryID}
	// The last event appended requests this attempt; on a new stream its
	// revision is known before the append returns.
	changes := d.Changes()
	if r.queuer != nil && len(changes) == 1 {
		if err := r.queuer.Accepting(); err != nil {
			return domain.ForwardCommand{}, Queued{}, fmt.Errorf("append to %s: %w", stream, err)
		}
		h := r.holdReceipt(stream, attemptID, tr, d, rc)
		return NewForward(fw, h.id, 0), Queued{LastID: h.id, Wait: h.wait}, nil
	}
	q, err := r.queue(ctx, stream, domain.NoStream(), tr, changes, &rc)
	if err != nil {
		return domain.ForwardCommand{}, Queued{}, err
	}
	return NewForward(fw, q.LastID, uint64(len(changes)-1)), q, nil
}

// RecordLateAnswer records the status the relay answered on its own after
// the delivery was recorded (no outcome from the tunnel). The tunnel may
// append to the stream concurrently, so any revision is fine.
func (r *Recorder) RecordLateAnswer(ctx context.Context, deliveryID string, status int, reason string) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	// The reason quotes an error (a store's, another node's): bounded as
	// every error text the log keeps.
	e := domain.DeliveryAnswered{DeliveryID: deliveryID, Status: status, Reason: storedText(reason)}
	_, err := r.Record(ctx, domain.DeliveryStream(deliveryID), domain.Any(), domain.Trace{CorrelationID: deliveryID}, e)
	return err
}

// RetryTarget is what a retry needs to know of the delivery's Endpoint.
type RetryTarget struct {
	AccountID       string
	Endpoint        domain.EndpointStatus
	EndpointID      string
	CaptureResponse bool
	Timeout         time.Duration
	// Edit changes the request sent (nil: as recorded); it is recorded
	// with the attempt.
	Edit *domain.RequestEdit
}

// RequestRetry records a new attempt of a stored delivery
// (retry.requested.v1 + forward.requested.v1 {retry: true}) and returns its
// command, which names its request event so the outcome is appended
// without replaying the stream. The stream is read once per try.
func (r *Recorder) RequestRetry(ctx context.Context, deliveryID string, t RetryTarget) (domain.ForwardCommand, error) {
	stream := domain.DeliveryStream(deliveryID)
	var cmd domain.ForwardCommand
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		received, d, err := r.loadDelivery(ctx, deliveryID)
		if err != nil {
			return err
		}
		attemptID := r.newID()
		if err := d.RequestRetry(attemptID, t.AccountID, t.Endpoint, t.Edit); err != nil {
			return err
		}
		tr := domain.Trace{CorrelationID: deliveryID, CausationID: attemptID}
		res, ids, err := r.appendIDs(ctx, nil, stream, d.Expected(), tr, d.Changes())
		if err != nil {
			return err
		}
		method, target, headers, body := received.Method, received.Target, received.Headers, received.Body
		if t.Edit != nil {
			method, target, headers, body = t.Edit.Apply(method, target, headers, body)
		}
		cmd = NewForward(Forward{
			DeliveryID: deliveryID, AttemptID: attemptID, EndpointID: t.EndpointID, AccountID: t.AccountID,
			Method: method, Target: target, Headers: headers, Body: body,
			Timeout: t.Timeout, CaptureResponse: t.CaptureResponse,
			Host: received.Host, Scheme: received.Scheme, RemoteAddr: received.RemoteAddr,
			CopiesRecorded: d.Copies(),
		}, ids[len(ids)-1], res.NextRevision)
		return nil
	})
	return cmd, err
}

// conflictTries bounds how often a use case decides again after another
// writer appended to the same stream between its read and its append.
const conflictTries = 20

// outcomeTries bounds the retries of an outcome's append: the delivery
// stream has few writers (receipt, retry, outcomes).
const outcomeTries = 5

// RecordOutcome appends the attempt's ForwardResponded or ForwardFailed to
// the delivery's stream. An attempt that is no longer pending (already
// recorded) raises no event and is not an error. It returns the event's log
// position (0 when none was raised). The append is made even when ctx has
// ended: the attempt would otherwise stay pending in the log forever.
func (r *Recorder) RecordOutcome(ctx context.Context, cmd domain.ForwardCommand, out domain.ForwardOutcome) (uint64, error) {
	stream := domain.DeliveryStream(cmd.DeliveryID)
	var ids []string // kept across tries so a repeated append stays idempotent
	var position uint64
	fidelity := fidelityOf(cmd, out)
	h := r.takeHeld(cmd.AttemptID)
	if h != nil {
		// The receipt waits for this answer (ReceiptHold): recorded in it,
		// one append records both. A failure, or an answer the hold did not
		// wait for, follows the receipt as an event of its own.
		if !out.Failed() && !cmd.Copy {
			pos, ok, err := h.merge(responded(cmd, out, fidelity))
			if ok {
				if err != nil {
					return 0, notRecorded(cmd.AttemptID, err)
				}
				return pos, nil
			}
		}
		h.flush() // queued before the outcome's append, which the log keeps in order
	}
	// Detached only here: the merge above queues with a bound of its own
	// (held.go), and most outcomes take it.
	ctx, cancel := detached(ctx)
	defer cancel()
	var answer domain.ForwardResponded
	if !out.Failed() {
		answer = r.withinQuota(ctx, cmd, responded(cmd, out, fidelity))
	}
	// The fast path below assumes the request event records no outcome. A
	// first attempt's is its receipt, which may record one (ReceiptHold),
	// unless it was just appended without (h) or the store holds none.
	fast := cmd.RequestEventID != "" && (cmd.RequestRevision > 0 || h != nil || r.queuer == nil)
	err := conflict.Retry(ctx, outcomeTries, func(try int) error {
		var d *domain.Delivery
		var causation string
		var err error
		if try == 1 && fast {
			// Fast path: the outcome goes right after the request; if
			// anything came in between, the append is refused and the next
			// try replays the stream.
			d, causation = domain.ResumeAttempt(cmd.DeliveryID, cmd.AttemptID, cmd.RequestRevision), cmd.RequestEventID
		} else if d, causation, err = r.loadAttempt(ctx, cmd.DeliveryID, cmd.AttemptID); err != nil {
			return err
		}
		if out.Failed() {
			d.RecordFailure(domain.ForwardFailed{
				AttemptID: cmd.AttemptID, AgentID: out.AgentID, Status: out.Status,
				Error: storedText(out.Error), DurationMs: out.DurationMs,
			})
		} else {
			d.RecordResponse(answer)
		}
		changes := d.Changes()
		if len(changes) == 0 {
			r.log.Warn("forward outcome not recorded: attempt is not pending",
				"delivery_id", cmd.DeliveryID, "attempt_id", cmd.AttemptID)
			return nil
		}
		tr := domain.Trace{CorrelationID: cmd.CorrelationID, CausationID: causation}
		var res domain.AppendResult
		res, ids, err = r.appendIDs(ctx, ids, stream, d.Expected(), tr, changes)
		position = res.Position
		return err
	})
	if err != nil {
		return 0, notRecorded(cmd.AttemptID, err)
	}
	return position, nil
}

// notRecorded is RecordOutcome's error: marked, so that whoever waits for
// the attempt (the sender's request, here or across the bus) tells an
// outcome the store did not take from an attempt that got no answer.
func notRecorded(attemptID string, err error) error {
	return fmt.Errorf("record attempt %s: %w: %w", attemptID, domain.ErrOutcomeNotRecorded, err)
}

// fidelityOf is the fidelity receipt the attempt cmd records of out: the
// agent's receipt beside the relay's digests of what it sent it, the
// request in full (or as a retry edited it), not only the part the log
// stores; those taken when it was sent (cmd.Sent) when there are. nil when
// the agent reported none, or for a copy that kept none: its headers and
// body are let go of, and digests of what is left would tell of a request
// that was never sent.
func fidelityOf(cmd domain.ForwardCommand, out domain.ForwardOutcome) *domain.Fidelity {
	switch {
	case out.Receipt == nil || out.Failed():
		return nil
	case cmd.Sent != nil:
		return &domain.Fidelity{Agent: *out.Receipt, Relay: *cmd.Sent}
	case cmd.Copy:
		return nil
	}
	return &domain.Fidelity{Agent: *out.Receipt, Relay: domain.DigestRequest(cmd.Method, cmd.Target, cmd.Headers, cmd.Body)}
}

// responded is the ForwardResponded that records out, the local answer to
// cmd, with the fidelity check beside it.
func responded(cmd domain.ForwardCommand, out domain.ForwardOutcome, fidelity *domain.Fidelity) domain.ForwardResponded {
	headers, dropped := storedHeaders(out.Headers)
	fr := domain.ForwardResponded{
		DeliveryID: cmd.DeliveryID, AttemptID: cmd.AttemptID, AgentID: out.AgentID, Status: out.Status, Headers: headers,
		BodySize: max(int64(len(out.Body)), out.BodySize), Captured: cmd.CaptureResponse, DurationMs: out.DurationMs,
		Signature: out.Signature, DroppedHeaders: dropped + out.DroppedHeaders, Fidelity: fidelity,
	}
	if cmd.CaptureResponse {
		fr.Body = out.Body
		if out.NotCaptured != "" { // the relay let go of it before recording
			fr.Body, fr.Captured, fr.NotCaptured = nil, false, out.NotCaptured
		}
	}
	return fr
}

// withinQuota is fr, the answer to cmd, as the log may take it: without
// its body, saying why, when cmd's account may store no more
// (Config.WhyNotStored). Retries, queued attempts and copies are checked when
// their answer is recorded, which may be long after they were sent. A
// delivery's first attempt is not: its receipt was admitted under the
// quota a moment before, and its sender waits.
func (r *Recorder) withinQuota(ctx context.Context, cmd domain.ForwardCommand, fr domain.ForwardResponded) domain.ForwardResponded {
	if !fr.Captured || r.whyNotStored == nil || cmd.FirstAttempt() {
		return fr
	}
	if why := r.whyNotStored(ctx, cmd.AccountID); why != "" {
		fr.Body, fr.Captured, fr.NotCaptured = nil, false, why
	}
	return fr
}
