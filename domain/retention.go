package domain

import (
	"strings"
	"time"

	"github.com/relayhq/relay/domain/duration"
)

// Retention invariants (the Endpoint's part is in endpoint.go):
//  1. A window is positive, at least the relay's minimum and at most its
//     maximum; 0 in settings means the relay's default window.
//  2. A retention decision removes only deliveries received before its
//     cutoff, and a cutoff never moves back: a decision at or before an
//     earlier one raises no event.

// RetentionLimits are the relay's bounds on Endpoints' retention windows.
type RetentionLimits struct {
	Default, Min, Max time.Duration
}

// Window is the window an Endpoint with its own window w (0: none) keeps
// deliveries for: w or the default, never beyond the maximum (an operator
// may lower the maximum below windows set before).
func (l RetentionLimits) Window(w time.Duration) time.Duration {
	if w <= 0 {
		w = l.Default
	}
	if l.Max > 0 && w > l.Max {
		w = l.Max
	}
	return w
}

// ParseRetention reads a retention window: a whole number of days ("30d")
// or a Go duration ("12h", "90m", "2s"), within limits (Min and Max; a
// zero bound is not checked). The error names the bound that was missed.
func ParseRetention(s string, limits RetentionLimits) (time.Duration, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "-") {
		return 0, &InvalidInputError{Field: "retention", Reason: "must be positive"}
	}
	d, err := duration.Parse(s)
	if err != nil {
		return 0, &InvalidInputError{Field: "retention", Reason: "must be a duration such as 30d, 12h or 90m"}
	}
	return d, limits.Check(d)
}

// Check tells whether d is a window the relay allows.
func (l RetentionLimits) Check(d time.Duration) error {
	switch {
	case d <= 0:
		return &InvalidInputError{Field: "retention", Reason: "must be positive"}
	case l.Min > 0 && d < l.Min:
		return &InvalidInputError{Field: "retention", Reason: "must be at least the relay's minimum of " + duration.Format(l.Min)}
	case l.Max > 0 && d > l.Max:
		return &InvalidInputError{Field: "retention", Reason: "must be at most the relay's maximum of " + duration.Format(l.Max)}
	}
	return nil
}
