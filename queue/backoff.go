package queue

import (
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/relayhq/relay/domain"
)

// Delay is how long after its failures-th failed attempt a delivery's next
// one is due: base doubled per failure up to cap, plus up to a quarter
// more as jitter (so retries of many deliveries that failed together
// spread out), never more than cap nor less than base.
func Delay(p domain.QueuePolicy, failures int) time.Duration {
	base := time.Duration(p.BackoffBaseMs) * time.Millisecond
	cap := time.Duration(p.BackoffCapMs) * time.Millisecond
	b := &backoff.ExponentialBackOff{InitialInterval: base, RandomizationFactor: 0, Multiplier: 2, MaxInterval: cap}
	b.Reset()
	d := base
	for range max(failures, 1) {
		d = b.NextBackOff()
	}
	d += time.Duration(rand.Int64N(int64(d/4) + 1))
	return min(max(d, base), cap)
}
