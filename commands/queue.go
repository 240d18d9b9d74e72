package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// QueuePatch holds the queue policy fields to change; nil leaves a field
// as it is. A field given is checked here (0 attempts is an error, not
// "the default"); the policy as a whole by the domain.
type QueuePatch struct {
	MaxInFlight   *int
	RatePerSecond *int
	Ordering      *string
	RetryOn       *[]string
	BackoffBase   *time.Duration
	BackoffCap    *time.Duration
	MaxAttempts   *int
	MaxAge        *time.Duration
}

// Apply returns p applied to the policy q (nil: the defaults).
func (p *QueuePatch) Apply(q *domain.QueuePolicy) (*domain.QueuePolicy, error) {
	if p == nil {
		return q, nil
	}
	var out domain.QueuePolicy
	if q != nil {
		out = *q
	}
	bad := func(field, reason string) error {
		return &domain.InvalidInputError{Field: "queue." + field, Reason: reason}
	}
	if p.MaxInFlight != nil {
		if *p.MaxInFlight < 1 || *p.MaxInFlight > domain.MaxQueueInFlight {
			return nil, bad("maxInFlight", fmt.Sprintf("must be from 1 to %d", domain.MaxQueueInFlight))
		}
		out.MaxInFlight = *p.MaxInFlight
	}
	if p.RatePerSecond != nil {
		if *p.RatePerSecond < 1 || *p.RatePerSecond > domain.MaxQueueRate {
			return nil, bad("ratePerSecond", fmt.Sprintf("must be from 1 to %d", domain.MaxQueueRate))
		}
		out.RatePerSecond = *p.RatePerSecond
	}
	if p.Ordering != nil {
		out.Ordering = *p.Ordering
	}
	if p.RetryOn != nil {
		out.RetryOn = append([]string{}, *p.RetryOn...)
	}
	dur := func(field string, d *time.Duration, min time.Duration, dst *int64) error {
		if d == nil {
			return nil
		}
		if *d < 0 {
			return bad(field, "must not be negative")
		}
		if *d < min {
			return bad(field, fmt.Sprintf("must be at least %s", min))
		}
		*dst = d.Milliseconds()
		return nil
	}
	if err := dur("backoffBase", p.BackoffBase, domain.MinQueueBackoff, &out.BackoffBaseMs); err != nil {
		return nil, err
	}
	if err := dur("backoffCap", p.BackoffCap, domain.MinQueueBackoff, &out.BackoffCapMs); err != nil {
		return nil, err
	}
	if err := dur("maxAge", p.MaxAge, domain.MinQueueAge, &out.MaxAgeMs); err != nil {
		return nil, err
	}
	if p.MaxAttempts != nil {
		if *p.MaxAttempts < 1 || *p.MaxAttempts > domain.MaxQueueAttempts {
			return nil, bad("maxAttempts", fmt.Sprintf("must be from 1 to %d", domain.MaxQueueAttempts))
		}
		out.MaxAttempts = *p.MaxAttempts
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return &out, nil
}

// queueViews is what the queue's commands read of the views.
type queueViews interface {
	QueueList(ctx context.Context, accountID, endpointID, state string, limit int) ([]readmodel.QueueEntry, error)
}

// maxRedrive bounds the dead deliveries one redrive puts back.
const maxRedrive = 1000

// RedriveDead puts an Endpoint's dead deliveries back in its queue, due
// now with their failures forgotten (relay retry --all --dead), at most
// 1000 per call; it returns how many.
func (s *Service) RedriveDead(ctx context.Context, accountID, by, endpointID string) (int, error) {
	if _, err := s.loadEndpoint(ctx, accountID, endpointID); err != nil {
		return 0, err
	}
	qv, ok := s.views.(queueViews)
	if !ok {
		return 0, fmt.Errorf("%w: the views keep no queue", domain.ErrUnavailable)
	}
	dead, err := qv.QueueList(ctx, accountID, endpointID, readmodel.QueueDead, maxRedrive)
	if err != nil {
		return 0, err
	}
	var last uint64
	for _, e := range dead {
		pos, err := s.rec.RecordQueueDecision(ctx, e.DeliveryID, domain.DeliveryRequeued{DeliveryID: e.DeliveryID, AccountID: accountID, By: by})
		if err != nil {
			return 0, fmt.Errorf("redrive %s: %w", e.DeliveryID, err)
		}
		last = max(last, pos)
	}
	if last > 0 {
		if err := s.waitForViews(ctx, last); err != nil {
			return 0, err
		}
	}
	return len(dead), nil
}

// EndpointQueuePolicy is an Endpoint's queue policy with the defaults
// filled in, read from the log.
func (s *Service) EndpointQueuePolicy(ctx context.Context, accountID, endpointID string) (domain.QueuePolicy, error) {
	ep, err := s.loadEndpoint(ctx, accountID, endpointID)
	if err != nil {
		return domain.QueuePolicy{}, err
	}
	return ep.Settings().Queue.Effective(), nil
}
