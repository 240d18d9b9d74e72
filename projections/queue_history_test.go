package projections

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/relayhq/relay/readmodel"
)

// fillQueue writes n queue rows of endpoint (of the account "acct-" +
// endpoint) in state straight into a views file, seq and pos from base on: the state a QUEUE Endpoint's history
// leaves without replaying as many deliveries through the log.
func fillQueue(tb testing.TB, path, endpoint string, base int64, n int, state string) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO queue (delivery_id, endpoint_id, account_id, seq, since, state, next_at, pos)
		VALUES (?, ?, ?, ?, 0, ?, 0, ?)`, n, func(i int) []any {
		pos := base + int64(i)
		return []any{fmt.Sprintf("%s-%s-%d", endpoint, state, i), endpoint, "acct-" + endpoint, pos, state, pos}
	})
}

// TestQueueReadsSkipTheDeliveredHistory: an Endpoint's queue counts and
// its list without a state (the API's Endpoint.queue and
// queuedDeliveries) read the deliveries still in the queue, not the
// delivered rows its history leaves: with 20 000 delivered they read about
// as many pages of the views as with 2 000, and give the same answer.
func TestQueueReadsSkipTheDeliveredHistory(t *testing.T) {
	t.Parallel() // see insertRows
	e := newEnv(t, Options{})
	e.sync(e.views)
	path := filepath.Join(e.dir, "views.db")
	delivered := map[string]int{"ep-2k": 2_000, "ep-20k": 20_000}
	for i, ep := range []string{"ep-2k", "ep-20k"} {
		base := int64(i+1) * 1_000_000_000
		fillQueue(t, path, ep, base, delivered[ep], readmodel.QueueDone)
		fillQueue(t, path, ep, base+int64(delivered[ep]), 3, readmodel.QueueDead)
		fillQueue(t, path, ep, base+int64(delivered[ep])+10, 2, readmodel.QueueQueued)
	}
	for _, tc := range []struct {
		name string
		read func(ctx context.Context, ep string) error
	}{
		{"counts", func(ctx context.Context, ep string) error {
			c, err := e.views.QueueCounts(ctx, ep)
			if err == nil && (c.Dead != 3 || c.Queued != 2 || c.InFlight != 0) {
				err = fmt.Errorf("counts %+v, want 3 dead and 2 queued", c)
			}
			return err
		}},
		{"list of the Endpoint", func(ctx context.Context, ep string) error {
			page, _, err := e.views.QueueList(ctx, "acct-"+ep, ep, "", "", 4)
			if err == nil && (len(page) != 4 || page[0].State != readmodel.QueueDead || page[3].State != readmodel.QueueQueued) {
				err = fmt.Errorf("a page of %d: %+v, want 3 dead then 1 queued", len(page), page)
			}
			return err
		}},
		{"list of the account", func(ctx context.Context, ep string) error {
			page, _, err := e.views.QueueList(ctx, "acct-"+ep, "", "", "", 4)
			if err == nil && len(page) != 4 {
				err = fmt.Errorf("a page of %d, want 4", len(page))
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := map[string]int{}
			for ep := range delivered {
				read[ep] = pagesReadOn(t, &e.views.r.db, path, func(ctx context.Context) error { return tc.read(ctx, ep) })
			}
			t.Logf("%s: %d pages with 2 000 delivered, %d with 20 000", tc.name, read["ep-2k"], read["ep-20k"])
			if read["ep-20k"] > 2*read["ep-2k"] {
				t.Errorf("%s read %d pages of the views with 20 000 delivered rows, %d with 2 000: the work grows with the queue's history",
					tc.name, read["ep-20k"], read["ep-2k"])
			}
		})
	}
}
