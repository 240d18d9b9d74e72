package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// Retry pauses of Run after a failed batch: from retryInitial, growing to
// retryMax, each randomised by half so several relays on one full disk do
// not retry in step.
const (
	retryInitial = 100 * time.Millisecond
	retryMax     = 5 * time.Second
)

// Health returns the runner's state.
func (v *Runner) Health() readmodel.Health {
	v.mu.Lock()
	defer v.mu.Unlock()
	return readmodel.Health{Position: v.pos, Err: v.failure, FailingSince: v.failingSince, Retries: v.retries}
}

// Run subscribes to the log after the checkpoint and applies every batch it
// receives until ctx ends; then it returns nil. A batch that fails (a full
// disk, a read error of the log) does not stop it: the failure is logged
// once with its cause and shown by Health, and Run subscribes again from the
// checkpoint after a growing pause, so the views catch up by themselves
// once the cause clears. It returns ErrClosed when the views are closed
// under it. Only one Run may be active at a time.
func (v *Runner) Run(ctx context.Context) error {
	pause := &backoff.ExponentialBackOff{
		InitialInterval: retryInitial, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: retryMax,
	}
	pause.Reset()
	for {
		err := v.follow(ctx, pause.Reset)
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-v.closed:
			return ErrClosed
		default:
		}
		v.failed(ctx, err)
		t := time.NewTimer(pause.NextBackOff())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-v.closed:
			t.Stop()
			return ErrClosed
		}
	}
}

// failed records a failure; only the first of a run of them is logged as an
// error, the retries that follow at debug level.
func (v *Runner) failed(ctx context.Context, err error) {
	v.mu.Lock()
	first := v.failure == nil
	if first {
		v.failingSince = time.Now()
		v.retries = 0
	}
	v.failure = err
	v.retries++
	retries, pos := v.retries, v.pos
	v.broadcastLocked()
	v.mu.Unlock()
	if first {
		v.log.ErrorContext(ctx, "projections stopped: the views no longer follow the log; retrying until the cause clears",
			"position", pos, "error", err)
		return
	}
	v.log.DebugContext(ctx, "projections retry failed", "position", pos, "retries", retries, "error", err)
}

// recovered clears a failure once a batch applied again.
func (v *Runner) recovered(ctx context.Context) {
	v.mu.Lock()
	if v.failure == nil {
		v.mu.Unlock()
		return
	}
	since, retries, pos := v.failingSince, v.retries, v.pos
	v.failure, v.failingSince, v.retries = nil, time.Time{}, 0
	v.broadcastLocked()
	v.mu.Unlock()
	v.log.InfoContext(ctx, "projections recovered: the views follow the log again",
		"position", pos, "failed_for", time.Since(since).Round(time.Millisecond), "retries", retries)
}

// follow subscribes after the checkpoint and applies batches until an
// error; progress is called after each applied batch.
func (v *Runner) follow(ctx context.Context, progress func()) error {
	from := v.Position()
	sub, err := v.store.SubscribeAll(ctx, from)
	if err != nil {
		return fmt.Errorf("projections: subscribe after %d: %w", from, err)
	}
	defer sub.Close()
	v.log.DebugContext(ctx, "projections subscribed", "position", from)
	var linger *time.Timer
	if v.linger > 0 {
		linger = time.NewTimer(v.linger)
		defer linger.Stop()
	}
	behind := false // the last batch was full: the log holds more already
	for {
		if linger != nil && !behind {
			// Linger before the next batch (see DefaultLinger).
			linger.Reset(v.linger)
			select {
			case <-linger.C:
			case <-v.hurry:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		events, err := v.recv(ctx, sub)
		if err != nil {
			return fmt.Errorf("projections: receive after %d: %w", v.Position(), err)
		}
		behind = len(events) >= domain.SubscriptionBatch
		if len(events) > 0 && events[len(events)-1].Position <= v.Position() {
			// Applied already (a rebuild got there first): nothing to
			// take writeMu for.
			v.recovered(ctx)
			progress()
			continue
		}
		v.writeMu.Lock()
		err = v.applyBatch(ctx, events)
		v.writeMu.Unlock()
		if err != nil {
			return fmt.Errorf("projections: %w", err)
		}
		v.recovered(ctx)
		progress()
	}
}

// errStalled ends a subscription that delivers nothing while the log holds
// events past the views.
var errStalled = errors.New("the subscription delivers nothing while the log holds more")

// recv is sub.Recv, except that with a stallAfter it gives up with
// errStalled when nothing arrives for that long while the log's last
// position is past the views' (see Options.StallAfter); Run then
// subscribes anew. An idle log only costs a look at its last position
// every stallAfter.
func (v *Runner) recv(ctx context.Context, sub domain.Subscription) ([]domain.RecordedEvent, error) {
	if v.stallAfter <= 0 {
		return sub.Recv(ctx)
	}
	for {
		wait, cancel := context.WithTimeout(ctx, v.stallAfter)
		events, err := sub.Recv(wait)
		timedOut := err != nil && ctx.Err() == nil && wait.Err() != nil
		cancel()
		if !timedOut {
			return events, err
		}
		look, cancel := context.WithTimeout(ctx, v.stallAfter)
		last, err := v.store.LastPosition(look)
		cancel()
		// A log that cannot be read now is the subscription's to report.
		if pos := v.Position(); err == nil && last > pos {
			return nil, fmt.Errorf("%w: nothing for %s, views at %d, log at %d", errStalled, v.stallAfter, pos, last)
		}
	}
}

// CatchUp waits until the views reflect position, like WaitFor, but gives
// up with the runner's error as soon as a batch fails: for startup, where a
// failure should be reported rather than waited out.
func (v *Runner) CatchUp(ctx context.Context, position uint64) error {
	for {
		v.mu.Lock()
		pos, failure, advanced := v.pos, v.failure, v.advanced
		v.mu.Unlock()
		if pos >= position {
			return nil
		}
		if failure != nil {
			return failure
		}
		select {
		case <-advanced:
		case <-ctx.Done():
			return ctx.Err()
		case <-v.closed:
			return ErrClosed
		}
	}
}
