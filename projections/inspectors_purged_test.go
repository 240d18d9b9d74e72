package projections

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// fillInspectors writes n guest inspectors straight into a views file,
// purged or live, idle since t0 with a TTL of an hour, positions from base
// on: the rows guests' createInspector calls leave (a purged one keeps its
// row for good), without replaying as many through the log.
func fillInspectors(tb testing.TB, path, prefix string, base int64, n int, purged bool) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO inspectors (id, created_at, last_activity_at, ttl_ms, expired, position, purged)
		VALUES (?, ?, ?, 3600000, ?, ?, ?)`, n, func(i int) []any {
		pos := base + int64(i)
		at := t0.Add(time.Duration(i) * time.Second).UnixNano()
		return []any{fmt.Sprintf("%s-%d", prefix, i), at, at, purged, pos, purged}
	})
}

// fillInspectorDeliveries writes n deliveries of inspector address
// straight into a views file, positions from base on, and lists the
// inspector in inspectors_purging when it is purged, as applying them
// would.
func fillInspectorDeliveries(tb testing.TB, path, address string, base int64, n int) {
	tb.Helper()
	insertInspectorDeliveries(tb, path, base, n, func(i int) (string, string) {
		return fmt.Sprintf("%s-d%d", address, i), address
	})
	insertRows(tb, path, `INSERT OR IGNORE INTO inspectors_purging (id) SELECT id FROM inspectors WHERE id = ? AND purged = 1`, 1,
		func(int) []any { return []any{address} })
}

// fillAddresses writes one delivery to each of n inspector addresses
// (prefix-0, prefix-1, ...) straight into a views file, positions from
// base on: addresses holding deliveries, without inspector rows.
func fillAddresses(tb testing.TB, path, prefix string, base int64, n int) {
	tb.Helper()
	insertInspectorDeliveries(tb, path, base, n, func(i int) (id, address string) {
		return fmt.Sprintf("%s-%d-d", prefix, i), fmt.Sprintf("%s-%d", prefix, i)
	})
}

// insertInspectorDeliveries writes n answered inspector deliveries,
// positions from base on, the i-th with the ID and address of(i).
func insertInspectorDeliveries(tb testing.TB, path string, base int64, n int, of func(i int) (id, address string)) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO deliveries (position, id, address, kind, account_id, method, target, host, proto,
		remote_addr, body_size, complete, received_at, answered_status, revision, updated_position)
		VALUES (?, ?, ?, 'inspector', '', 'POST', '/hook', 'h', 'HTTP/1.1', '127.0.0.1:1', 10, 1, ?, 204, 0, ?)`, n, func(i int) []any {
		pos := base + int64(i)
		id, address := of(i)
		return []any{pos, id, address, t0.UnixNano(), pos}
	})
}

// TestPurgedInspectorsAreNotRead: the retention sweep's reads of the
// inspectors (PurgeCandidates, the live ones idle past their TTL and
// retention; PurgedDeliveries, the deliveries purged ones still hold)
// walk neither the purged inspectors, whose rows stay for good so their
// addresses are never handed out again, and which any stranger can pile
// up with createInspector, nor the deliveries of Endpoints, which their
// accounts keep for their window, nor (PurgedDeliveries) the addresses
// holding deliveries, which stay as many as the storage quotas allow:
// with 20 000 of each they read about as many pages of the views as with
// 2 000, and answer the same. (PurgedDeliveries walked every address
// holding deliveries, one seek each: 6 020 pages with 2 000 of each and
// 80 030 with 20 000, where it now reads 6 and 8.)
func TestPurgedInspectorsAreNotRead(t *testing.T) {
	t.Parallel() // see insertRows
	e := newEnv(t, Options{})
	e.sync(e.views)
	path := filepath.Join(e.dir, "views.db")
	// Three live inspectors idle past their TTL, one with deliveries; one
	// purged whose deliveries are still to be deleted.
	fillInspectors(t, path, "live", 1_000_000_000, 3, false)
	fillInspectorDeliveries(t, path, "live-0", 1_000_000_100, 5)
	fillInspectors(t, path, "purging", 1_000_000_200, 1, true)
	fillInspectorDeliveries(t, path, "purging-0", 1_000_000_300, 4)
	now := t0.Add(48 * time.Hour)
	reads := []namedRead{
		{"candidates", func(ctx context.Context) error {
			c, err := e.views.PurgeCandidates(ctx, now, time.Hour, 100)
			if err == nil && (len(c) != 3 || c[0].ID != "live-0" || c[0].Deliveries != 5) {
				err = fmt.Errorf("listed %+v, want the 3 live inspectors, live-0 with 5 deliveries", c)
			}
			return err
		}},
		{"deliveries", func(ctx context.Context) error {
			ids, err := e.views.PurgedDeliveries(ctx, 500)
			if err == nil && len(ids) != 4 {
				err = fmt.Errorf("listed %d deliveries of purged inspectors, want 4", len(ids))
			}
			return err
		}},
	}
	readsDoNotGrow(t, e, path, "purged inspectors, Endpoint deliveries and addresses holding deliveries", func(total, added int) {
		fillInspectors(t, path, fmt.Sprintf("purged-%d", total), int64(total)*10, added, true)
		fillWithAttempts(t, path, fmt.Sprintf("ep-%d", total), int64(total)*10+5_000_000_000, added, 0)
		fillAddresses(t, path, fmt.Sprintf("held-%d", total), int64(total)*10+6_000_000_000, added)
	}, reads...)
}
