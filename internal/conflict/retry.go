// Package conflict retries optimistic-concurrency steps: a load, a decision
// and an append with the revision loaded, refused when another writer
// appended to the same stream in between.
package conflict

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/relayhq/relay/domain"
)

// Retry runs step (with its try number, from 1) again while its append is
// refused for a wrong expected revision, at most tries times, and returns
// the last error. Deciding again on the newer state is what every caller
// means: two updates of one Endpoint, a retry while the tunnel records an
// outcome.
//
// Between tries it waits a random, growing pause: writers that lost the
// same race would otherwise read and append in lockstep again, and the
// store's group commit puts them in one batch where only the first wins,
// so one writer could lose every round.
func Retry(ctx context.Context, tries int, step func(try int) error) error {
	for try := 1; ; try++ {
		err := step(try)
		if !errors.Is(err, domain.ErrWrongExpectedRevision) || try >= tries {
			return err
		}
		if ctx.Err() != nil {
			return gaveUp(ctx, err)
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(Pause(try)))))
		select {
		case <-ctx.Done():
			t.Stop()
			return gaveUp(ctx, err)
		case <-t.C:
		}
	}
}

func gaveUp(ctx context.Context, err error) error {
	return fmt.Errorf("%w (gave up waiting to decide again: %w)", err, ctx.Err())
}

// Pause is the upper bound of the pause after the given try: 200 µs
// doubling up to 20 ms.
func Pause(try int) time.Duration {
	d := 200 * time.Microsecond << min(try-1, 7)
	return min(d, 20*time.Millisecond)
}
