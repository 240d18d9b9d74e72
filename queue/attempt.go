package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
)

// turn orders the attempts an Endpoint starts in one tick: an attempt
// waits for after (nil: the first) before it records itself and sends,
// and closes done once it has.
type turn struct {
	after <-chan struct{}
	done  chan struct{}
}

func (t turn) wait(ctx context.Context) {
	if t.after == nil {
		return
	}
	select {
	case <-t.after:
	case <-ctx.Done():
	}
}

// attempt sends one attempt and records what follows it. release gives
// back the attempt's share of the body budget: once the Hub is done with
// the request, or at once when none is sent.
func (d *Driver) attempt(ctx context.Context, e readmodel.QueueEntry, st *endpointState, duplicate bool, t turn, release func()) {
	defer release()
	capture := st.ep.ResponseCapture
	p := st.policy
	t.wait(ctx)
	sent := sync.OnceFunc(func() { close(t.done) })
	defer sent()
	if e.State == readmodel.QueueInFlight && e.AttemptID != "" {
		// Left in flight by a driver that went before deciding: when its
		// outcome is in the log, decide from it rather than send again.
		if out, err := d.cfg.Recorder.RecordedOutcome(ctx, e.DeliveryID, e.AttemptID); err == nil {
			d.settle(ctx, e, p, e.AttemptID, out)
			return
		}
	}
	cmd, err := d.cfg.Recorder.RequestQueued(ctx, e.DeliveryID, record.QueuedTarget{
		AccountID: e.AccountID, EndpointID: e.EndpointID,
		// An account at its storage quota: the Recorder records the answer
		// without its body (record.Config.WhyNotStored).
		CaptureResponse: capture,
		Timeout:         d.cfg.ForwardTimeout, Duplicate: duplicate,
	})
	switch {
	case errors.Is(err, domain.ErrQueueSettled) || errors.Is(err, domain.ErrAttemptPending):
		return // a stale read of the view, or another driver's attempt: the log decides
	case errors.Is(err, domain.ErrPayloadIncomplete) || errors.Is(err, domain.ErrRetryNotProxy) || errors.Is(err, domain.ErrAttemptLimit):
		d.dead(ctx, e, "", e.Failures, "dead: cannot be forwarded: "+err.Error())
		return
	case err != nil:
		if ctx.Err() == nil {
			d.log.WarnContext(ctx, "queue: record attempt", "delivery_id", e.DeliveryID, "error", err)
		}
		return // due again at the next read
	}
	// The next attempt of this tick records itself now, which takes a commit:
	// this one's forward is on its way first.
	sent()
	out, err := d.forward(ctx, cmd, release)
	cmd.Body = nil // sent: the rest of the attempt needs no body
	if ctx.Err() != nil {
		// Shutting down: the Hub records the attempt failed as it closes,
		// which puts the delivery back in the queue, marked a possible
		// duplicate; the next start sends it again.
		return
	}
	if err != nil {
		// No outcome came back: record one, so the attempt does not stay
		// open in the log (an outcome the tunnel did record wins; then
		// this raises nothing).
		out = domain.ForwardOutcome{Status: 504, Error: domain.ReasonNoOutcome + err.Error()}
		if _, rerr := d.cfg.Recorder.RecordOutcome(ctx, cmd, out); rerr != nil {
			d.log.WarnContext(ctx, "queue: record outcome", "delivery_id", e.DeliveryID, "error", rerr)
		}
	}
	d.settle(ctx, e, p, cmd.AttemptID, out)
}

// settle records what follows an attempt's outcome by the policy.
func (d *Driver) settle(ctx context.Context, e readmodel.QueueEntry, p domain.QueuePolicy, attemptID string, out domain.ForwardOutcome) {
	class := domain.OutcomeClass(out)
	now := d.cfg.Recorder.Now()
	switch {
	case class == domain.FailNoListener && !p.Counts(class):
		// The listener went between the check and the send: wait again,
		// spending no attempt.
		next := now.Add(time.Duration(p.BackoffBaseMs) * time.Millisecond)
		d.decide(ctx, e.DeliveryID, domain.DeliveryRetryScheduled{DeliveryID: e.DeliveryID, AttemptID: attemptID,
			Failures: e.Failures, NextAt: next.UTC().Format(time.RFC3339Nano), Reason: describe(out) + " (not counted: waiting for a listener)"})
	case !p.Counts(class):
		d.decide(ctx, e.DeliveryID, domain.DeliveryDelivered{DeliveryID: e.DeliveryID, AttemptID: attemptID, Status: out.Status})
	default:
		failures := e.Failures + 1
		if failures >= p.MaxAttempts {
			d.dead(ctx, e, attemptID, failures, fmt.Sprintf("dead after %d attempts: last %s", failures, describe(out)))
			return
		}
		next := now.Add(Delay(p, failures))
		if age := time.Duration(p.MaxAgeMs) * time.Millisecond; next.Sub(e.Since) > age {
			d.dead(ctx, e, attemptID, failures, fmt.Sprintf("dead after %d attempts: the next would be past the age limit %s; last %s", failures, age, describe(out)))
			return
		}
		d.decide(ctx, e.DeliveryID, domain.DeliveryRetryScheduled{DeliveryID: e.DeliveryID, AttemptID: attemptID,
			Failures: failures, NextAt: next.UTC().Format(time.RFC3339Nano), Reason: describe(out)})
	}
}

// forward sends cmd and returns when its outcome is in or ctx ends (the
// Hub's attempt does not end with ctx: it ends at its timeout or the Hub's
// close), and calls release when the Hub is done with it.
func (d *Driver) forward(ctx context.Context, cmd domain.ForwardCommand, release func()) (domain.ForwardOutcome, error) {
	type result struct {
		out domain.ForwardOutcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.ForwardTimeout+5*time.Second)
		defer cancel()
		out, err := d.cfg.Forwarder.Forward(fctx, cmd)
		release()
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		return domain.ForwardOutcome{}, ctx.Err()
	}
}

func (d *Driver) dead(ctx context.Context, e readmodel.QueueEntry, attemptID string, failures int, reason string) {
	d.decide(ctx, e.DeliveryID, domain.DeliveryDead{DeliveryID: e.DeliveryID, AttemptID: attemptID, Failures: failures, Reason: reason})
}

// decide records a decision and waits until the views show it, so the
// next read of the view does not find the delivery as it was before.
func (d *Driver) decide(ctx context.Context, deliveryID string, ev domain.Event) {
	pos, err := d.cfg.Recorder.RecordQueueDecision(ctx, deliveryID, ev)
	if err != nil {
		d.log.WarnContext(ctx, "queue: record decision", "delivery_id", deliveryID, "type", ev.EventType(), "error", err)
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.cfg.Views.WaitFor(wctx, pos); err != nil {
		d.log.WarnContext(ctx, "queue: wait for the views", "delivery_id", deliveryID, "error", err)
	}
}

// describe says an outcome in a few words: "503 no agent connected".
func describe(out domain.ForwardOutcome) string {
	s := fmt.Sprint(out.Status)
	if out.Error != "" {
		s += " " + strings.TrimSpace(out.Error)
	}
	return s
}
