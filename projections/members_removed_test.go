package projections

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// fillMembers writes n members of account straight into a views file,
// removed or not, joined from base on: the rows an account's invites and
// removals leave, without replaying as many through the log.
func fillMembers(tb testing.TB, path, account string, base int64, n int, removed bool) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO members (member_id, account_id, login, login_key, role, password_hash, joined_at, removed)
		VALUES (?, ?, ?, ?, 'MEMBER', 'hash', ?, ?)`, n, func(i int) []any {
		id := fmt.Sprintf("%s-%v-%d", account, removed, i)
		return []any{id, account, id, id, base + int64(i), removed}
	})
}

// TestRemovedMembersAreNotRead: an account's list of members (the API's
// members, and the logins that name who issued a token) reads its current
// members, not every one it ever removed: with 20 000 removed it reads
// about as many pages of the views as with 2 000, and lists the same
// members.
func TestRemovedMembersAreNotRead(t *testing.T) {
	t.Parallel() // see insertRows
	e := newEnv(t, Options{})
	e.sync(e.views)
	path := filepath.Join(e.dir, "views.db")
	removed := map[string]int{"acct-2k": 2_000, "acct-20k": 20_000}
	for i, acct := range []string{"acct-2k", "acct-20k"} {
		base := int64(i+1) * 1_000_000_000
		fillMembers(t, path, acct, base, removed[acct], true)
		fillMembers(t, path, acct, base+int64(removed[acct]), 3, false)
	}
	read := map[string]int{}
	for acct := range removed {
		read[acct] = pagesReadOn(t, &e.views.r.db, path, func(ctx context.Context) error {
			members, err := e.views.Members(ctx, acct)
			if err == nil && len(members) != 3 {
				err = fmt.Errorf("listed %d members, want the 3 not removed", len(members))
			}
			return err
		})
	}
	t.Logf("members: %d pages with 2 000 removed, %d with 20 000", read["acct-2k"], read["acct-20k"])
	if read["acct-20k"] > 2*read["acct-2k"] {
		t.Errorf("the list of members read %d pages of the views with 20 000 removed, %d with 2 000: the work grows with the removed members",
			read["acct-20k"], read["acct-2k"])
	}
}
