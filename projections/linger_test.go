package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
)

// TestViewsBehindTheLogDoNotLinger: the linger between batches is for a
// views that keeps up with the log; one that is a full batch or more behind
// (a restart, a burst) takes the next batch at once, and only lingers again
// after a batch that was not full. The views here linger an hour: one
// WaitFor for the first event starts them, and they must reach the end of a
// log more than two batches long without another.
func TestViewsBehindTheLogDoNotLinger(t *testing.T) {
	e := newEnv(t, Options{Linger: time.Hour})
	n := 2*domain.SubscriptionBatch + 10
	var first, last uint64
	for i := range n {
		pos := e.must(e.receive(e.ctx, fmt.Sprintf("d-%d", i), "insp", domain.AddressInspector, "", request("/", "x"), t0))
		if i == 0 {
			first = pos
		}
		last = pos
	}
	e.waitFor(e.views, first)
	testwait.CheckFor(t, waitTimeout, 5*time.Millisecond, func() error {
		if at := e.views.Position(); at < last {
			return fmt.Errorf("the views applied up to %d of %d: they lingered while behind", at, last)
		}
		return nil
	})
}
