package projections

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// fillTokens writes n tokens of account straight into a views file,
// revoked or not, issued from base on: the rows an account's sign-ins
// (each past a member's 20 sessions revokes the oldest) and token changes
// leave, without replaying as many through the log.
func fillTokens(tb testing.TB, path, account string, base int64, n int, revoked bool) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO tokens (hash, token_id, account_id, revoked, issued_at, name, kind) VALUES (?, ?, ?, ?, ?, 'laptop', 'session')`, n, func(i int) []any {
		id := fmt.Sprintf("%s-%v-%d", account, revoked, i)
		return []any{"hash-" + id, id, account, revoked, base + int64(i)}
	})
}

// TestRevokedTokensAreNotRead: an account's list of tokens (the API's
// tokens) reads its tokens that are not revoked, not every one it ever
// revoked: with 20 000 revoked it reads about as many pages of the views
// as with 2 000, and lists the same tokens.
func TestRevokedTokensAreNotRead(t *testing.T) {
	t.Parallel() // see insertRows
	e := newEnv(t, Options{})
	e.sync(e.views)
	path := filepath.Join(e.dir, "views.db")
	revoked := map[string]int{"acct-2k": 2_000, "acct-20k": 20_000}
	for i, acct := range []string{"acct-2k", "acct-20k"} {
		base := int64(i+1) * 1_000_000_000
		fillTokens(t, path, acct, base, revoked[acct], true)
		fillTokens(t, path, acct, base+int64(revoked[acct]), 3, false)
	}
	read := map[string]int{}
	for acct := range revoked {
		read[acct] = pagesReadOn(t, &e.views.r.db, path, func(ctx context.Context) error {
			toks, err := e.views.Tokens(ctx, acct)
			if err == nil && len(toks) != 3 {
				err = fmt.Errorf("listed %d tokens, want the 3 not revoked", len(toks))
			}
			return err
		})
	}
	t.Logf("tokens: %d pages with 2 000 revoked, %d with 20 000", read["acct-2k"], read["acct-20k"])
	if read["acct-20k"] > 2*read["acct-2k"] {
		t.Errorf("the list of tokens read %d pages of the views with 20 000 revoked, %d with 2 000: the work grows with the revoked tokens",
			read["acct-20k"], read["acct-2k"])
	}
}
