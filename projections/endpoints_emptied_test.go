package projections

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// fillEmptiedEndpoints writes n deleted Endpoints straight into a views
// file, each with a retention decision and none of its deliveries left:
// the rows an account's creates and deletes leave once retention has
// removed their history, without replaying as many through the log.
func fillEmptiedEndpoints(tb testing.TB, path, prefix string, base int64, n int) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO endpoints (id, account_id, name, mode, target, response_capture, created_at, last_activity_at,
		deleted, position, updated_position, retained_to)
		VALUES (?, 'acct-churn', ?, 'LOG', '', 0, 0, 0, 1, ?, ?, ?)`, n, func(i int) []any {
		pos := base + int64(i)
		return []any{fmt.Sprintf("%s-%d", prefix, i), fmt.Sprint("hook-", i), pos, pos, t0.UnixNano()}
	})
}

// TestEmptiedEndpointsAreNotReadByRetention: the Endpoints' retention
// sweep's reads (RetentionCandidates, the Endpoints holding deliveries past
// their window; RetainedDeliveries, the deliveries a decision removed that
// still have rows) walk the Endpoints that hold deliveries, not every
// Endpoint ever created: a deleted Endpoint keeps its row for good once
// retention has emptied it, and an account may create and delete them as
// long as its storage quota lasts. With 20 000 such Endpoints they read
// about as many pages of the views as with 2 000, and answer the same.
func TestEmptiedEndpointsAreNotReadByRetention(t *testing.T) {
	t.Parallel() // see insertRows
	e := newEnv(t, Options{})
	e.sync(e.views)
	path := filepath.Join(e.dir, "views.db")
	// ep-old holds 5 deliveries past its window; ep-cut 4 below the
	// cutoff of its decision, still to be deleted.
	fillOldEndpoint(t, path, "ep-old", 1_000_000_000, 5)
	fillOldEndpoint(t, path, "ep-cut", 1_100_000_000, 4)
	insertRows(t, path, `UPDATE endpoints SET retained_to = ? WHERE id = 'ep-cut'`, 1, func(int) []any {
		return []any{t0.Add(time.Hour).UnixNano()}
	})
	limits := domain.RetentionLimits{Default: time.Hour, Max: time.Hour, Min: time.Hour}
	now := t0.Add(30 * 24 * time.Hour)
	reads := []namedRead{
		{"candidates", func(ctx context.Context) error {
			c, err := e.views.RetentionCandidates(ctx, now, limits, "", 100)
			if err == nil && (len(c) != 2 || c[0].ID != "ep-cut" || c[1].ID != "ep-old" || c[1].Deliveries != 5) {
				err = fmt.Errorf("candidates %+v, want ep-cut and ep-old with 5 deliveries", c)
			}
			return err
		}},
		{"deliveries", func(ctx context.Context) error {
			ids, last, err := e.views.RetainedDeliveries(ctx, "", 500)
			if err == nil && (len(ids) != 4 || last != "ep-cut") {
				err = fmt.Errorf("listed %d deliveries up to %q, want ep-cut's 4", len(ids), last)
			}
			return err
		}},
	}
	readsDoNotGrow(t, e, path, "emptied Endpoints", func(total, added int) {
		fillEmptiedEndpoints(t, path, fmt.Sprintf("ep-gone-%d", total), int64(total)*10, added)
	}, reads...)
}

// TestRetentionWalksEveryAddressInTurn: the Endpoints' retention reads,
// walking the addresses that hold deliveries a few at a time, go from the
// Endpoint after the one given to the end, then from the first up to it,
// skipping the addresses that are not Endpoints (guests') or hold nothing
// to remove, whatever the size of a walk's query.
func TestRetentionWalksEveryAddressInTurn(t *testing.T) {
	e := newEnv(t, Options{})
	e.sync(e.views)
	path := filepath.Join(e.dir, "views.db")
	// Endpoints a, c, e hold deliveries past their window and below a
	// decision's cutoff; guests b and d hold deliveries too.
	for i, id := range []string{"a", "c", "e"} {
		fillOldEndpoint(t, path, id, int64(i+1)*1_000_000, 2)
	}
	insertRows(t, path, `UPDATE endpoints SET retained_to = ?`, 1, func(int) []any { return []any{t0.Add(time.Hour).UnixNano()} })
	fillInspectorDeliveries(t, path, "b", 10_000_000, 3)
	fillInspectorDeliveries(t, path, "d", 11_000_000, 3)
	limits := domain.RetentionLimits{Default: time.Hour, Max: time.Hour, Min: time.Hour}
	now := t0.Add(30 * 24 * time.Hour)
	saved := retentionWalk
	t.Cleanup(func() { retentionWalk = saved })
	for _, walk := range []int{1, 2, 1000} {
		retentionWalk = walk
		for _, tc := range []struct {
			after string
			limit int
			want  string // candidates, then the Endpoints of the deliveries listed
		}{
			{"", 10, "a c e / a a c c e e"},
			{"a", 10, "c e a / c c e e a a"},
			{"c", 2, "e a / e e"},
			{"d", 10, "e a c / e e a a c c"},
			{"e", 3, "a c e / a a c"},
			{"z", 10, "a c e / a a c c e e"},
		} {
			c, err := e.views.RetentionCandidates(t.Context(), now, limits, tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			ids, last, err := e.views.RetainedDeliveries(t.Context(), tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range c {
				got = append(got, x.ID)
			}
			got = append(got, "/")
			for _, id := range ids {
				got = append(got, id[:1])
			}
			if g := fmt.Sprint(got); g != "["+tc.want+"]" || (len(ids) > 0 && last != ids[len(ids)-1][:1]) {
				t.Errorf("walk of %d from %q, limit %d: %s (last %q), want [%s]", walk, tc.after, tc.limit, g, last, tc.want)
			}
		}
	}
}
