package record

import (
	"context"
	"errors"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
)

// ExpireIfIdle records an inspector's expiry when it has been idle since
// lastActivity past its TTL, and reports whether it is expired (recorded
// now, before, or by a concurrent request).
func (r *Recorder) ExpireIfIdle(ctx context.Context, inspectorID string, lastActivity time.Time) (bool, error) {
	stream := domain.InspectorStream(inspectorID)
	_, events, err := domain.LoadStream(ctx, r.store, r.codec, stream)
	if err != nil {
		return false, err
	}
	insp := domain.LoadInspector(events)
	if !insp.ExpireIfIdle(lastActivity, r.now()) {
		return false, nil
	}
	if len(insp.Changes()) == 0 {
		return true, nil // expiry was already in the stream
	}
	err = r.appendNow(ctx, stream, insp.Expected(), domain.Trace{}, insp.Changes(), nil)
	if errors.Is(err, domain.ErrWrongExpectedRevision) {
		return true, nil // a concurrent request recorded the expiry first
	}
	return true, err
}

// PurgeIfRetained records the decision to remove an inspector's
// deliveries (inspector.purged.v1, with the expiry if no request recorded
// it) when its retention has run out at now. It returns the decision's log
// position, 0 when nothing was recorded.
func (r *Recorder) PurgeIfRetained(ctx context.Context, inspectorID string, lastActivity, now time.Time, retention time.Duration, deliveries int64) (uint64, error) {
	stream := domain.InspectorStream(inspectorID)
	var position uint64
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		_, events, err := domain.LoadStream(ctx, r.store, r.codec, stream)
		if errors.Is(err, domain.ErrStreamNotFound) {
			return domain.ErrNotFound
		}
		if err != nil {
			return err
		}
		in := domain.LoadInspector(events)
		if _, err := in.PurgeIfRetained(lastActivity, now, retention, deliveries); err != nil {
			return err
		}
		res, err := r.Record(ctx, stream, in.Expected(), domain.Trace{CorrelationID: inspectorID}, in.Changes()...)
		position = res.Position
		return err
	})
	return position, err
}

// RetainEndpoint records the decision to remove an Endpoint's deliveries
// received before now minus window (endpoint.retained.v1). It decides once
// on the stream as read: when another writer (another relay node's sweep)
// appended first, the append is refused by its expected revision and
// nothing is recorded, so a decision is made once however many nodes
// sweep. It returns the decision's log position, 0 when nothing was
// recorded.
func (r *Recorder) RetainEndpoint(ctx context.Context, endpointID string, window time.Duration, now, lastActivity time.Time, deliveries int64, atLeast bool) (uint64, error) {
	stream := domain.EndpointStream(endpointID)
	_, events, err := domain.LoadStream(ctx, r.store, r.codec, stream)
	if errors.Is(err, domain.ErrStreamNotFound) {
		return 0, domain.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	ep := domain.LoadEndpoint(events)
	if decided, err := ep.Retain(window, now, lastActivity, deliveries, atLeast); err != nil || !decided {
		return 0, err
	}
	res, err := r.Record(ctx, stream, ep.Expected(), domain.Trace{CorrelationID: endpointID}, ep.Changes()...)
	if errors.Is(err, domain.ErrWrongExpectedRevision) {
		return 0, nil // the stream moved since it was read: the next sweep decides on it again
	}
	return res.Position, err
}

// RecordRefusals appends one address.rate_limited.v1: n requests to
// address refused by its rate limit between from and to.
func (r *Recorder) RecordRefusals(ctx context.Context, address string, kind domain.AddressKind, n int64, from, to time.Time) error {
	e := domain.AddressRateLimited{Address: address, AddressKind: kind, Refused: n,
		From: from.UTC().Format(time.RFC3339Nano), To: to.UTC().Format(time.RFC3339Nano)}
	return r.appendNow(ctx, domain.RefusalsStream(address), domain.Any(), domain.Trace{}, []domain.Event{e}, nil)
}
