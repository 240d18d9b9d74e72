package projections

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// fillEndpoints writes n Endpoints of account straight into a views file,
// deleted or not, positions from base on: the rows an account's creates and
// deletes leave, without replaying as many through the log.
func fillEndpoints(tb testing.TB, path, account string, base int64, n int, deleted bool) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO endpoints (id, account_id, name, mode, target, response_capture, created_at, last_activity_at, deleted, position, updated_position)
		VALUES (?, ?, ?, 'LOG', '', 0, 0, 0, ?, ?, ?)`, n, func(i int) []any {
		pos := base + int64(i)
		return []any{fmt.Sprintf("%s-%v-%d", account, deleted, i), account, fmt.Sprintf("hook-%d", i), deleted, pos, pos}
	})
}

// TestDeletedEndpointsAreNotRead: an account's list of Endpoints, their
// count (the --account-endpoints check of createEndpoint) and the look-up
// of a name (createEndpoint's and a rename's) read the Endpoints that are
// not deleted, not every one the account ever deleted: with 20 000 deleted
// they read about as many pages of the views as with 2 000, and answer the
// same.
func TestDeletedEndpointsAreNotRead(t *testing.T) {
	t.Parallel() // see insertRows
	e := newEnv(t, Options{})
	e.sync(e.views)
	path := filepath.Join(e.dir, "views.db")
	deleted := map[string]int{"acct-2k": 2_000, "acct-20k": 20_000}
	for i, acct := range []string{"acct-2k", "acct-20k"} {
		base := int64(i+1) * 1_000_000_000
		fillEndpoints(t, path, acct, base, 3, false)
		fillEndpoints(t, path, acct, base+10, deleted[acct], true)
	}
	for _, tc := range []struct {
		name string
		read func(ctx context.Context, acct string) error
	}{
		{"list", func(ctx context.Context, acct string) error {
			eps, err := e.views.Endpoints(ctx, acct, "", 1001)
			if err == nil && len(eps) != 3 {
				err = fmt.Errorf("listed %d Endpoints, want the 3 not deleted", len(eps))
			}
			return err
		}},
		{"count", func(ctx context.Context, acct string) error {
			n, err := e.views.CountEndpoints(ctx, acct)
			if err == nil && n != 3 {
				err = fmt.Errorf("counted %d Endpoints, want 3", n)
			}
			return err
		}},
		{"name", func(ctx context.Context, acct string) error {
			id, err := e.views.EndpointNamed(ctx, acct, "hook-9")
			if err == nil && id != "" {
				err = fmt.Errorf("a deleted Endpoint's name found %q", id)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := map[string]int{}
			for acct := range deleted {
				read[acct] = pagesReadOn(t, &e.views.r.db, path, func(ctx context.Context) error { return tc.read(ctx, acct) })
			}
			t.Logf("%s: %d pages with 2 000 Endpoints deleted, %d with 20 000", tc.name, read["acct-2k"], read["acct-20k"])
			if read["acct-20k"] > 2*read["acct-2k"] {
				t.Errorf("%s read %d pages of the views with 20 000 Endpoints deleted, %d with 2 000: the work grows with the deleted Endpoints",
					tc.name, read["acct-20k"], read["acct-2k"])
			}
		})
	}
}
