package domain

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// ModeQueue records every delivery, answers the sender at once with the
// Endpoint's answer (default 202) and forwards it later through a
// connected listener, retrying by the Endpoint's QueuePolicy
// (docs/queue.md).
const ModeQueue EndpointMode = "QUEUE"

// ErrQueueSettled refuses an attempt of a queued delivery already
// delivered or dead: a driver read the queue before the decision.
var ErrQueueSettled = errors.New("queued delivery already delivered or dead")

// ErrNotDead refuses a redrive of a delivery that is not dead: never
// queued, still queued, delivered, or put back already (a view read a
// moment before a concurrent redrive). It is invalid input.
var ErrNotDead = fmt.Errorf("delivery is not dead: %w", ErrInvalidInput)

// ErrAttemptPending refuses a queued delivery's attempt while another is
// out, unless it is sent as a possible duplicate.
var ErrAttemptPending = errors.New("queued delivery has an attempt out")

// ReasonQueued is the reason of a QUEUE Endpoint's answer at receipt:
// the delivery is recorded and will be forwarded later.
const ReasonQueued = "queued"

// Queue event type names.
const (
	TypeDeliveryRetryScheduled = "delivery.retry_scheduled.v1"
	TypeDeliveryDead           = "delivery.dead.v1"
	TypeDeliveryDelivered      = "delivery.delivered.v1"
	TypeDeliveryRequeued       = "delivery.requeued.v1"
)

// Failure classes a QueuePolicy may count as a failed attempt.
const (
	FailNoListener = "no-listener" // no listener was connected (503)
	Fail5xx        = "5xx"         // the local process answered 5xx, or could not be reached (502)
	FailTimeout    = "timeout"     // no answer within the forward timeout (504)
	Fail4xx        = "4xx"         // the local process answered 4xx
)

// Orderings of a queue.
const (
	OrderUnordered = "unordered" // up to MaxInFlight at once
	OrderStrict    = "strict"    // one at a time, in receipt order; a failing head blocks the rest
)

// Bounds of a QueuePolicy (docs/security.md).
const (
	MaxQueueInFlight    = 100
	MaxQueueRate        = 1000
	MinQueueBackoff     = 100 * time.Millisecond
	MaxQueueBackoff     = 24 * time.Hour
	MaxQueueAttempts    = 100
	MinQueueAge         = time.Minute
	MaxQueueAge         = 30 * 24 * time.Hour
	DefaultQueueAnswer  = http.StatusAccepted
	queueFieldPrefix    = "queue."
	defaultQueueRetries = 10
)

// QueuePolicy is how a QUEUE Endpoint forwards and retries. A zero field
// takes its default (DefaultQueuePolicy); Effective fills them.
type QueuePolicy struct {
	MaxInFlight   int      `json:"max_in_flight,omitempty"`
	RatePerSecond int      `json:"rate_per_second,omitempty"`
	Ordering      string   `json:"ordering,omitempty"`
	RetryOn       []string `json:"retry_on,omitempty"`
	BackoffBaseMs int64    `json:"backoff_base_ms,omitempty"`
	BackoffCapMs  int64    `json:"backoff_cap_ms,omitempty"`
	MaxAttempts   int      `json:"max_attempts,omitempty"`
	MaxAgeMs      int64    `json:"max_age_ms,omitempty"`
}

// DefaultQueuePolicy is what a QUEUE Endpoint without settings of its own
// does: 10 in flight, 50 a second, unordered, 5xx and timeouts retried
// from 1 s to 5 min, 10 attempts within a day. No listener is not a
// failure: the queue waits for one.
func DefaultQueuePolicy() QueuePolicy {
	return QueuePolicy{MaxInFlight: 10, RatePerSecond: 50, Ordering: OrderUnordered, RetryOn: []string{Fail5xx, FailTimeout},
		BackoffBaseMs: 1000, BackoffCapMs: 5 * 60 * 1000, MaxAttempts: defaultQueueRetries, MaxAgeMs: 24 * 3600 * 1000}
}

// Effective is the policy with defaults for the fields not set.
func (p *QueuePolicy) Effective() QueuePolicy {
	d := DefaultQueuePolicy()
	if p == nil {
		return d
	}
	out := *p
	if out.MaxInFlight == 0 {
		out.MaxInFlight = d.MaxInFlight
	}
	if out.RatePerSecond == 0 {
		out.RatePerSecond = d.RatePerSecond
	}
	if out.Ordering == "" {
		out.Ordering = d.Ordering
	}
	if out.RetryOn == nil {
		out.RetryOn = d.RetryOn
	}
	if out.BackoffBaseMs == 0 {
		out.BackoffBaseMs = d.BackoffBaseMs
	}
	if out.BackoffCapMs == 0 {
		out.BackoffCapMs = max(d.BackoffCapMs, out.BackoffBaseMs)
	}
	if out.MaxAttempts == 0 {
		out.MaxAttempts = d.MaxAttempts
	}
	if out.MaxAgeMs == 0 {
		out.MaxAgeMs = d.MaxAgeMs
	}
	return out
}

// Validate checks a policy's bounds; zero fields are defaults and pass.
func (p *QueuePolicy) Validate() error {
	if p == nil {
		return nil
	}
	bad := func(field, reason string) error {
		return &InvalidInputError{Field: queueFieldPrefix + field, Reason: reason}
	}
	switch {
	case p.MaxInFlight < 0 || p.MaxInFlight > MaxQueueInFlight:
		return bad("maxInFlight", fmt.Sprintf("must be from 1 to %d", MaxQueueInFlight))
	case p.RatePerSecond < 0 || p.RatePerSecond > MaxQueueRate:
		return bad("ratePerSecond", fmt.Sprintf("must be from 1 to %d", MaxQueueRate))
	case p.Ordering != "" && p.Ordering != OrderUnordered && p.Ordering != OrderStrict:
		return bad("ordering", fmt.Sprintf("%q is not strict or unordered", p.Ordering))
	case p.BackoffBaseMs < 0:
		return bad("backoffBase", "must not be negative")
	case p.BackoffBaseMs != 0 && (time.Duration(p.BackoffBaseMs)*time.Millisecond < MinQueueBackoff || time.Duration(p.BackoffBaseMs)*time.Millisecond > MaxQueueBackoff):
		return bad("backoffBase", fmt.Sprintf("must be from %s to %s", MinQueueBackoff, MaxQueueBackoff))
	case p.BackoffCapMs < 0:
		return bad("backoffCap", "must not be negative")
	case p.BackoffCapMs != 0 && time.Duration(p.BackoffCapMs)*time.Millisecond > MaxQueueBackoff:
		return bad("backoffCap", fmt.Sprintf("must be at most %s", MaxQueueBackoff))
	case p.BackoffCapMs != 0 && p.BackoffCapMs < p.Effective().BackoffBaseMs:
		return bad("backoffCap", "must not be less than the backoff base")
	case p.MaxAttempts < 0 || p.MaxAttempts > MaxQueueAttempts:
		return bad("maxAttempts", fmt.Sprintf("must be from 1 to %d", MaxQueueAttempts))
	case p.MaxAgeMs < 0:
		return bad("maxAge", "must not be negative")
	case p.MaxAgeMs != 0 && (time.Duration(p.MaxAgeMs)*time.Millisecond < MinQueueAge || time.Duration(p.MaxAgeMs)*time.Millisecond > MaxQueueAge):
		return bad("maxAge", fmt.Sprintf("must be from %s to %s", MinQueueAge, MaxQueueAge))
	case len(p.RetryOn) > 4:
		return bad("retryOn", "at most 4 classes")
	}
	for _, c := range p.RetryOn {
		if !slices.Contains([]string{FailNoListener, Fail5xx, FailTimeout, Fail4xx}, c) {
			return bad("retryOn", fmt.Sprintf("unknown outcome class %q (known: no-listener, 5xx, timeout, 4xx)", c))
		}
	}
	return nil
}

// ParseRetryOn reads a comma-separated list of failure classes; "none"
// is the empty list (every outcome is final).
func ParseRetryOn(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "none" {
		return []string{}, nil
	}
	var out []string
	for _, c := range strings.Split(s, ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c == "" {
			continue
		}
		out = append(out, c)
	}
	p := QueuePolicy{RetryOn: out}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// OutcomeClass names the failure class of an attempt's outcome, "" for a
// delivered one (2xx, 3xx, or a class not counted).
func OutcomeClass(out ForwardOutcome) string {
	switch {
	case out.Failed() && out.Status == http.StatusGatewayTimeout:
		return FailTimeout
	case out.Failed() && out.Status == http.StatusServiceUnavailable:
		return FailNoListener
	case out.Failed() && out.Status >= 500:
		return Fail5xx
	case out.Failed():
		return Fail4xx // the agent refused it (400: a dot-segment)
	case out.Status >= 500:
		return Fail5xx
	case out.Status >= 400:
		return Fail4xx
	}
	return ""
}

// Counts tells whether an outcome of class counts as a failed attempt.
func (p QueuePolicy) Counts(class string) bool {
	return class != "" && slices.Contains(p.RetryOn, class)
}

// QueueAnswerBody is the JSON a QUEUE Endpoint answers without an answer
// of its own.
func QueueAnswerBody(deliveryID string) string {
	return `{"queued":true,"delivery":"` + deliveryID + `"}`
}

// DeliveryRetryScheduled records a queued delivery's failed attempt and
// when the next one is due. Failures counts the failed attempts so far.
type DeliveryRetryScheduled struct {
	DeliveryID string `json:"delivery_id"`
	AttemptID  string `json:"attempt_id,omitempty"`
	Failures   int    `json:"failures"`
	NextAt     string `json:"next_at"` // RFC 3339, milliseconds
	Reason     string `json:"reason"`
}

// DeliveryDead records a queued delivery given up: its attempts or its
// age ran out. Reason says which and the last failure.
type DeliveryDead struct {
	DeliveryID string `json:"delivery_id"`
	AttemptID  string `json:"attempt_id,omitempty"`
	Failures   int    `json:"failures"`
	Reason     string `json:"reason"`
}

// DeliveryDelivered records a queued delivery's attempt that ended it:
// the local process answered Status, an outcome the policy does not retry.
type DeliveryDelivered struct {
	DeliveryID string `json:"delivery_id"`
	AttemptID  string `json:"attempt_id"`
	Status     int    `json:"status"`
}

// DeliveryRequeued puts a dead delivery back in its queue, due now, with
// its failures forgotten (relay retry --dead).
type DeliveryRequeued struct {
	DeliveryID string `json:"delivery_id"`
	AccountID  string `json:"account_id"`
	By         string `json:"by,omitempty"`
}

func (DeliveryRetryScheduled) EventType() string { return TypeDeliveryRetryScheduled }
func (DeliveryDead) EventType() string           { return TypeDeliveryDead }
func (DeliveryDelivered) EventType() string      { return TypeDeliveryDelivered }
func (DeliveryRequeued) EventType() string       { return TypeDeliveryRequeued }

// Requeue puts a dead delivery back in its queue (DeliveryRequeued), for
// accountID's member by. One that is not dead is refused (ErrNotDead): the
// views that listed it may be a moment behind a redrive that put it back.
// One that has had MaxDeliveryAttempts is refused, as a retry of it is:
// its next attempt could only make it dead again; so is one put back
// MaxDeliveryRedrives times, which bounds its stream.
func (d *Delivery) Requeue(accountID, by string) error {
	switch {
	case !d.dead:
		return ErrNotDead
	case d.attempts >= MaxDeliveryAttempts:
		return &AttemptLimitError{Attempts: d.attempts}
	case d.redrives >= MaxDeliveryRedrives:
		return &AttemptLimitError{Attempts: d.attempts, Redrives: d.redrives}
	}
	d.raise(DeliveryRequeued{DeliveryID: d.id, AccountID: accountID, By: by})
	return nil
}

// RequestQueuedAttempt starts an attempt of a queued delivery; duplicate
// says an earlier attempt may have reached the local process without its
// outcome being recorded.
func (d *Delivery) RequestQueuedAttempt(attemptID, endpointID string, duplicate bool) error {
	switch {
	case attemptID == "":
		return &InvalidInputError{Field: "attempt id", Reason: "empty"}
	case d.kind != AddressEndpoint:
		return ErrRetryNotProxy
	case !d.complete:
		return ErrPayloadIncomplete
	case d.settled:
		return ErrQueueSettled
	case len(d.pending) > 0 && !duplicate:
		// Another driver's attempt is out (two nodes leading for a
		// moment): only an attempt sent on purpose as a duplicate may
		// overlap one.
		return ErrAttemptPending
	case d.attempts >= MaxDeliveryAttempts:
		return &AttemptLimitError{Attempts: d.attempts}
	}
	d.raise(ForwardRequested{DeliveryID: d.id, AttemptID: attemptID, EndpointID: endpointID, Retry: true, Queued: true, PossibleDuplicate: duplicate})
	return nil
}
