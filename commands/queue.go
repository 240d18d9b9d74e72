package commands

import (
	"context"
	"errors"
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
	QueueList(ctx context.Context, accountID, endpointID, state, after string, limit int) ([]readmodel.QueueEntry, string, error)
}

// MaxRedrive bounds the dead deliveries one redrive puts back.
const MaxRedrive = 1000

// Redriven is what one RedriveDead call put back: how many, how many it
// left dead (each has had domain.MaxDeliveryAttempts), the cursor from
// which the next call goes on, and whether more may be dead past it.
type Redriven struct {
	Count     int
	LeftDead  int
	EndCursor string
	More      bool
}

// RedriveDead puts an Endpoint's dead deliveries received after the cursor
// after ("": from the oldest) back in its queue, due now with their
// failures forgotten (relay retry --all --dead), at most MaxRedrive per
// call, in the order received. A caller going through them all passes
// each call's EndCursor to the next: a delivery put back that dies again
// before then is not put back twice. A delivery that has had
// domain.MaxDeliveryAttempts stays dead (LeftDead): from the oldest, when
// every dead delivery of the Endpoint has, the call is refused
// (domain.RedriveLimitError), as a retry of one is.
func (s *Service) RedriveDead(ctx context.Context, accountID, by, endpointID, after string) (Redriven, error) {
	if _, err := s.loadEndpoint(ctx, accountID, endpointID); err != nil {
		return Redriven{}, err
	}
	// Each delivery put back is attempted again, and stores its answers:
	// not for an account at its quota.
	if err := s.checkStorage(ctx, accountID); err != nil {
		return Redriven{}, err
	}
	qv, ok := s.views.(queueViews)
	if !ok {
		return Redriven{}, fmt.Errorf("%w: the views keep no queue", domain.ErrUnavailable)
	}
	dead, end, err := qv.QueueList(ctx, accountID, endpointID, readmodel.QueueDead, after, MaxRedrive)
	if err != nil {
		return Redriven{}, err
	}
	out := Redriven{EndCursor: end, More: len(dead) == MaxRedrive}
	var last uint64
	for _, e := range dead {
		pos, err := s.rec.Requeue(ctx, e.DeliveryID, accountID, by)
		if errors.Is(err, domain.ErrAttemptLimit) {
			out.LeftDead++ // its next attempt could only make it dead again
			continue
		}
		if errors.Is(err, domain.ErrNotDead) {
			continue // put back by a redrive the views had not shown yet
		}
		if err != nil {
			return out, fmt.Errorf("redrive %s: %w", e.DeliveryID, err)
		}
		last = max(last, pos)
		out.Count++
	}
	if last > 0 {
		if err := s.waitForViews(ctx, last); err != nil {
			return out, err
		}
	}
	if after == "" && !out.More && out.Count == 0 && out.LeftDead > 0 {
		return out, &domain.RedriveLimitError{Deliveries: out.LeftDead}
	}
	return out, nil
}
