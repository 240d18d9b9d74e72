package graph

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/domain/duration"
	"github.com/relayhq/relay/explain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/readmodel"
)

// queueViews is what the API reads of the queue view.
type queueViews interface {
	QueueEntry(ctx context.Context, deliveryID string) (readmodel.QueueEntry, error)
	QueueCounts(ctx context.Context, endpointID string) (readmodel.QueueCounts, error)
	QueueList(ctx context.Context, accountID, endpointID, state, after string, limit int) ([]readmodel.QueueEntry, string, error)
}

func (r *Resolver) queueViews() (queueViews, error) {
	qv, ok := r.Views.(queueViews)
	if !ok {
		return nil, fmt.Errorf("%w: the views keep no queue", domain.ErrUnavailable)
	}
	return qv, nil
}

// endpointQueue is an Endpoint's queue, nil outside QUEUE mode: two
// reads of the views, its row (for its policy) and its counts, never its
// stream in the log.
func (r *Resolver) endpointQueue(ctx context.Context, obj *model.Endpoint) (*model.EndpointQueue, error) {
	if obj.Mode != model.EndpointModeQueue {
		return nil, nil
	}
	ep, err := r.ownedEndpoint(ctx, obj.ID)
	if err != nil {
		return nil, fmt.Errorf("queue policy of endpoint %s: %w", obj.ID, err)
	}
	p := ep.Queue.Effective()
	qv, err := r.queueViews()
	if err != nil {
		return nil, err
	}
	c, err := qv.QueueCounts(ctx, obj.ID)
	if err != nil {
		return nil, err
	}
	return &model.EndpointQueue{Policy: toQueuePolicy(p), Queued: c.Queued, InFlight: c.InFlight, Dead: c.Dead}, nil
}

func toQueuePolicy(p domain.QueuePolicy) *model.QueuePolicy {
	ms := func(v int64) string { return duration.Format(time.Duration(v) * time.Millisecond) }
	return &model.QueuePolicy{
		MaxInFlight: p.MaxInFlight, RatePerSecond: p.RatePerSecond, Ordering: model.QueueOrdering(strings.ToUpper(p.Ordering)),
		RetryOn: append([]string{}, p.RetryOn...), BackoffBase: ms(p.BackoffBaseMs), BackoffCap: ms(p.BackoffCapMs),
		MaxAttempts: p.MaxAttempts, MaxAge: ms(p.MaxAgeMs),
	}
}

// deliveryQueue is where a delivery stands in its queue, nil when it has
// no place there.
func (r *Resolver) deliveryQueue(ctx context.Context, obj *model.Delivery) (*model.DeliveryQueue, error) {
	qv, err := r.queueViews()
	if err != nil {
		return nil, err
	}
	e, err := qv.QueueEntry(ctx, obj.ID)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return toDeliveryQueue(e), nil
}

func toDeliveryQueue(e readmodel.QueueEntry) *model.DeliveryQueue {
	m := &model.DeliveryQueue{State: e.State, Status: explain.QueueStatus(e), Tries: e.Tries, Failures: e.Failures, Reason: e.Reason,
		PossibleDuplicate: e.Duplicate, PossibleDuplicates: e.Duplicates}
	if e.Status != 0 {
		s := e.Status
		m.DeliveredStatus = &s
	}
	if e.State == readmodel.QueueQueued {
		t := e.NextAt
		m.NextAt = &t
	}
	return m
}

// queuedDeliveries lists an owned Endpoint's queue.
func (r *Resolver) queuedDeliveries(ctx context.Context, endpoint string, state *string, first *int) ([]*model.QueuedDelivery, error) {
	ep, err := r.ownedEndpoint(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	st := deref(state)
	switch st {
	case "", readmodel.QueueQueued, readmodel.QueueInFlight, readmodel.QueueDead, readmodel.QueueDone:
	default:
		return nil, &domain.InvalidInputError{Field: "state", Reason: fmt.Sprintf("%q is not queued, inflight, dead or delivered", st)}
	}
	n := 50
	if first != nil {
		if *first < 0 {
			return nil, &domain.InvalidInputError{Field: "first", Reason: "must not be negative"}
		}
		if *first > 0 {
			n = min(*first, 1000)
		}
	}
	qv, err := r.queueViews()
	if err != nil {
		return nil, err
	}
	entries, _, err := qv.QueueList(ctx, ep.AccountID, ep.ID, st, "", n)
	if err != nil {
		return nil, err
	}
	out := make([]*model.QueuedDelivery, 0, len(entries))
	for _, e := range entries {
		d, err := r.Views.DeliverySummary(ctx, e.DeliveryID)
		if errors.Is(err, domain.ErrNotFound) {
			continue // removed since
		}
		if err != nil {
			return nil, err
		}
		out = append(out, &model.QueuedDelivery{Delivery: toDelivery(d), Queue: toDeliveryQueue(e)})
	}
	return out, nil
}

// queuePatch reads the API's queue policy input (nil: no change).
func queuePatch(in *model.QueuePolicyInput) (*commands.QueuePatch, error) {
	if in == nil {
		return nil, nil
	}
	p := &commands.QueuePatch{MaxInFlight: in.MaxInFlight, RatePerSecond: in.RatePerSecond, MaxAttempts: in.MaxAttempts}
	if in.Ordering != nil {
		o := strings.ToLower(string(*in.Ordering))
		p.Ordering = &o
	}
	if in.RetryOn != nil {
		rs := make([]string, 0, len(in.RetryOn))
		for _, c := range in.RetryOn {
			rs = append(rs, strings.ToLower(strings.TrimSpace(c)))
		}
		p.RetryOn = &rs
	}
	var err error
	if p.BackoffBase, err = queueDuration("backoffBase", in.BackoffBase); err != nil {
		return nil, err
	}
	if p.BackoffCap, err = queueDuration("backoffCap", in.BackoffCap); err != nil {
		return nil, err
	}
	if p.MaxAge, err = queueDuration("maxAge", in.MaxAge); err != nil {
		return nil, err
	}
	return p, nil
}

func queueDuration(field string, in *string) (*time.Duration, error) {
	if in == nil {
		return nil, nil
	}
	s := strings.TrimSpace(*in)
	if strings.HasPrefix(s, "-") {
		return nil, &domain.InvalidInputError{Field: "queue." + field, Reason: "must not be negative"}
	}
	d, err := duration.Parse(s)
	if err != nil {
		return nil, &domain.InvalidInputError{Field: "queue." + field, Reason: "must be a duration such as 500ms, 1s, 5m or 1d"}
	}
	return &d, nil
}

// explainDelivery explains a delivery, with where it stands in its queue
// when it was queued.
func (r *Resolver) explainDelivery(ctx context.Context, obj *model.Delivery) (explain.Explanation, error) {
	return obj.Explained.Get(func() (explain.Explanation, error) { return r.explain(ctx, obj) })
}

// explain makes a delivery row's explanation: its attempts' agent
// sessions, and its place in its queue, read from the views.
func (r *Resolver) explain(ctx context.Context, obj *model.Delivery) (explain.Explanation, error) {
	x, err := explain.Delivery(ctx, obj.Row, r.Views)
	if err != nil {
		return x, err
	}
	if qv, ok := r.Views.(queueViews); ok {
		e, err := qv.QueueEntry(ctx, obj.ID)
		switch {
		case err == nil:
			explain.Queue(&x, e)
		case !errors.Is(err, domain.ErrNotFound):
			return x, err
		}
	}
	return x, nil
}

// redriveDeadPage puts back one page of an Endpoint's dead deliveries.
func (r *mutationResolver) redriveDeadPage(ctx context.Context, endpoint string, after *string) (*model.RedrivePage, error) {
	acc, tok, err := r.credential(ctx)
	if err != nil {
		return nil, err
	}
	// Input first: a malformed cursor spends none of the account's calls.
	from := ""
	if after != nil && *after != "" {
		if _, err := readmodel.DecodeCursor("after", *after); err != nil {
			return nil, err
		}
		from = *after
	}
	if err := r.limitBulk(acc.ID); err != nil {
		return nil, err
	}
	res, err := r.Service.RedriveDead(ctx, acc.ID, tok.MemberID, endpoint, from)
	if err != nil {
		return nil, err
	}
	return &model.RedrivePage{Redriven: res.Count, LeftDead: res.LeftDead, EndCursor: res.EndCursor, HasNextPage: res.More}, nil
}
