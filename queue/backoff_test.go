package queue

import (
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestDelayStaysWithinBaseAndCap: the n-th delay is at least base·2^(n-1)
// (capped), at most a quarter more, never above the cap nor below the base.
func TestDelayStaysWithinBaseAndCap(t *testing.T) {
	p := domain.QueuePolicy{BackoffBaseMs: 1000, BackoffCapMs: 10_000}
	for _, tt := range []struct {
		failures int
		min, max time.Duration
	}{
		{1, time.Second, 1250 * time.Millisecond},
		{2, 2 * time.Second, 2500 * time.Millisecond},
		{3, 4 * time.Second, 5 * time.Second},
		{4, 8 * time.Second, 10 * time.Second},
		{5, 10 * time.Second, 10 * time.Second},
		{50, 10 * time.Second, 10 * time.Second},
	} {
		for range 200 {
			if d := Delay(p, tt.failures); d < tt.min || d > tt.max {
				t.Fatalf("Delay after %d failures = %s, want within [%s, %s]", tt.failures, d, tt.min, tt.max)
			}
		}
	}
}

// TestDelayJitters: deliveries that failed together do not all come back
// at the same moment.
func TestDelayJitters(t *testing.T) {
	p := domain.QueuePolicy{BackoffBaseMs: 1000, BackoffCapMs: 60_000}
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[Delay(p, 2)] = true
	}
	if len(seen) < 10 {
		t.Fatalf("50 delays took %d values: no jitter", len(seen))
	}
}
