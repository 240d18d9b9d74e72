package projections

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	sqlitedriver "modernc.org/sqlite"

	"github.com/relayhq/relay/readmodel"
)

// fillWithAttempts writes n deliveries of address straight into a views
// file, from position base on, each answered 503 and with attempts
// attempts that failed (500, not for want of an agent).
func fillWithAttempts(tb testing.TB, path, address string, base int64, n, attempts int) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO deliveries (position, id, address, kind, account_id, method, target, host, proto,
		remote_addr, body_size, complete, received_at, response_status, revision, updated_position)
		VALUES (?, ?, ?, 'endpoint', 'acct-1', 'POST', '/hook', 'h', 'HTTP/1.1', '127.0.0.1:1', 10, 1, ?, 503, 0, ?)`, n, func(i int) []any {
		pos := base + int64(i)
		return []any{pos, fmt.Sprintf("%s-%d", address, i), address, t0.Add(time.Duration(i) * time.Second).UnixNano(), pos}
	})
	// Attempts come after every delivery, as retries do: the a-th of the
	// i-th delivery at base + n + i*attempts + a.
	insertRows(tb, path, `INSERT INTO attempts (position, delivery_position, attempt_id, retry, started_at, status, error, outcome_position)
		VALUES (?, ?, ?, 1, 0, 500, 'local process answered 500', ?)`, n*attempts, func(k int) []any {
		pos := base + int64(n) + int64(k)
		return []any{pos, base + int64(k/attempts), fmt.Sprint("a-", k%attempts), pos}
	})
}

// pagesRead runs search with the views' search pool replaced by one
// connection of its own and reports how many pages of the views file
// SQLite fetched for it (cache hits and misses): work that does not depend
// on the machine's speed or load.
func pagesRead(t *testing.T, v *Runner, path string, search func(ctx context.Context) error) int {
	t.Helper()
	return pagesReadOn(t, &v.History.sr, path, search)
}

// pagesReadOn is pagesRead for the views' pool at pool (the search pool,
// the readers).
func pagesReadOn(t *testing.T, pool **sql.DB, path string, search func(ctx context.Context) error) int {
	t.Helper()
	one, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	one.SetMaxOpenConns(1)
	ctx := t.Context()
	conn, err := one.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status := func() int {
		var n int
		if err := conn.Raw(func(dc any) error {
			st := dc.(sqlitedriver.DBStatus)
			hit, _, err := st.Status(sqlitedriver.DBStatusCacheHit, false)
			if err != nil {
				return err
			}
			miss, _, err := st.Status(sqlitedriver.DBStatusCacheMiss, false)
			n = hit + miss
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := status()
	if err := conn.Close(); err != nil { // back to the pool, for the search
		t.Fatal(err)
	}
	saved := *pool
	*pool = one
	err = search(ctx)
	*pool = saved
	if err != nil {
		t.Fatal(err)
	}
	if conn, err = one.Conn(ctx); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return status() - before
}

// TestSearchWorkIsBoundedByTheWindow: what a page filtered by what the
// views hold costs follows the deliveries it examines (searchWindow at
// most), not how many attempts they had: a filter on the attempts
// (attemptStatus, refusedOffline) over deliveries of 100 attempts each reads
// about as many pages as over deliveries of one.
func TestSearchWorkIsBoundedByTheWindow(t *testing.T) {
	t.Parallel() // see insertRows
	e := newEnv(t, Options{})
	e.sync(e.views)
	path := filepath.Join(e.dir, "views.db")
	const n = 2000
	fillWithAttempts(t, path, "ep-one", 1_000_000_000, n, 1)
	fillWithAttempts(t, path, "ep-many", 2_000_000_000, n, 100)
	for _, f := range []readmodel.DeliveryFilter{{AttemptStatus: 404}, {RefusedOffline: true}} {
		read := map[string]int{}
		for _, address := range []string{"ep-one", "ep-many"} {
			read[address] = pagesRead(t, e.views, path, func(ctx context.Context) error {
				p, err := e.views.SearchDeliveries(ctx, address, 10, "", f, false)
				if err == nil && (len(p.Items) != 0 || p.HasNextPage) {
					err = fmt.Errorf("%+v matched %d of %s's deliveries", f, len(p.Items), address)
				}
				return err
			})
		}
		t.Logf("attemptStatus %d, refusedOffline %v: %d pages for deliveries of 1 attempt, %d for 100", f.AttemptStatus, f.RefusedOffline, read["ep-one"], read["ep-many"])
		if read["ep-many"] > 2*read["ep-one"] {
			t.Errorf("attemptStatus %d, refusedOffline %v: %d deliveries of 100 attempts read %d pages of the views, of 1 attempt %d: the work grows with the attempts",
				f.AttemptStatus, f.RefusedOffline, n, read["ep-many"], read["ep-one"])
		}
	}
}

// fillRedeliveries writes n deliveries of address straight into a views
// file, from position base on, all with the provider delivery id pid: a
// sender repeating one id.
func fillRedeliveries(tb testing.TB, path, address string, base int64, n int, pid string) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO deliveries (position, id, address, kind, account_id, method, target, host, proto,
		remote_addr, body_size, complete, received_at, response_status, revision, updated_position, provider, provider_delivery_id)
		VALUES (?, ?, ?, 'endpoint', 'acct-1', 'POST', '/hook', 'h', 'HTTP/1.1', '127.0.0.1:1', 10, 1, ?, 200, 0, ?, 'github', ?)`, n, func(i int) []any {
		pos := base + int64(i)
		return []any{pos, fmt.Sprintf("%s-%d", address, i), address, t0.Add(time.Duration(i) * time.Second).UnixNano(), pos, pid}
	})
}

// TestRedeliveriesAreCountedWithinABound: a row's duplicates (the other
// deliveries of its address with its provider delivery id) are counted up
// to MaxCountedDuplicates, so a page of 100 rows whose sender repeated one
// id 20 000 times reads about as many pages of the views as one repeated
// 2 000 times, and says so in Delivery.duplicates.
func TestRedeliveriesAreCountedWithinABound(t *testing.T) {
	t.Parallel() // see insertRows
	e := newEnv(t, Options{})
	e.sync(e.views)
	path := filepath.Join(e.dir, "views.db")
	fillRedeliveries(t, path, "ep-2k", 1_000_000_000, 2_000, "same-2k")
	fillRedeliveries(t, path, "ep-20k", 2_000_000_000, 20_000, "same-20k")
	read := map[string]int{}
	for _, address := range []string{"ep-2k", "ep-20k"} {
		read[address] = pagesRead(t, e.views, path, func(ctx context.Context) error {
			p, err := e.views.SearchDeliveries(ctx, address, 100, "", readmodel.DeliveryFilter{Method: "POST"}, false)
			if err == nil && (len(p.Items) != 100 || p.Items[0].Duplicates != MaxCountedDuplicates) {
				err = fmt.Errorf("%s: %d rows, the first with %d duplicates, want 100 with %d", address, len(p.Items), p.Items[0].Duplicates, MaxCountedDuplicates)
			}
			return err
		})
	}
	t.Logf("a page of 100 rows whose id was sent 2 000 times read %d pages, 20 000 times %d", read["ep-2k"], read["ep-20k"])
	if read["ep-20k"] > 2*read["ep-2k"] {
		t.Errorf("a page of 100 rows whose id was sent 20 000 times read %d pages of the views, 2 000 times %d: the work grows with the redeliveries",
			read["ep-20k"], read["ep-2k"])
	}
	page, err := e.views.DeliverySummaries(t.Context(), "ep-20k", 10, "")
	if err != nil || len(page.Items) != 10 || page.Items[9].Duplicates != MaxCountedDuplicates {
		t.Fatalf("a page of history: %+v, %v; want 10 rows of %d duplicates", page.Items, err, MaxCountedDuplicates)
	}
}
