package projections

import (
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestTokensList: a token issued before tokens had names reads as the
// first token; names, expiry and last use are listed; a revoked token
// leaves the list and closes its watchers, and only its own.
func TestTokensList(t *testing.T) {
	e := newEnv(t, Options{})
	legacy := domain.TokenIssued{AccountID: "acct-1", TokenID: "tok-1", TokenHash: hashToken("secret-1")} // no name: an older log
	e.do(e.save(e.ctx, domain.AccountStream("acct-1"), domain.NoStream(), t0,
		domain.AccountCreated{AccountID: "acct-1", Name: "Ada"}, legacy))
	expires := t0.Add(30 * 24 * time.Hour)
	e.do(e.onAccount(e.ctx, "acct-1", t0.Add(time.Minute), func(a *domain.Account) error {
		return a.IssueToken("tok-2", hashToken("secret-2"), "laptop", expires)
	}))
	used := t0.Add(2 * time.Minute)
	e.do(e.save(e.ctx, domain.AccountStream("acct-1"), domain.Any(), used,
		domain.TokenUsed{AccountID: "acct-1", TokenID: "tok-2", At: used.Format(time.RFC3339Nano)}))

	list, err := e.views.Tokens(e.ctx, "acct-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != domain.FirstTokenName || !list[0].ExpiresAt.IsZero() || !list[0].LastUsed.IsZero() ||
		list[1].Name != "laptop" || !list[1].ExpiresAt.Equal(expires) || !list[1].LastUsed.Equal(used) || list[1].AccountID != "acct-1" {
		t.Fatalf("tokens = %+v", list)
	}
	_, tok, err := e.views.TokenByHash(e.ctx, hashToken("secret-2"))
	if err != nil || tok.ID != "tok-2" || !tok.Expired(expires) || tok.Expired(expires.Add(-time.Second)) {
		t.Fatalf("TokenByHash = %+v, %v", tok, err)
	}

	gone, stopGone := e.views.WatchToken("tok-2")
	defer stopGone()
	kept, stopKept := e.views.WatchToken("tok-1")
	defer stopKept()
	e.do(e.onAccount(e.ctx, "acct-1", t0.Add(time.Hour), func(a *domain.Account) error { return a.RevokeToken("tok-2") }))
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked token's watcher was not told")
	}
	select {
	case <-kept:
		t.Fatal("another token's watcher was told")
	default:
	}
	if list, _ := e.views.Tokens(e.ctx, "acct-1"); len(list) != 1 || list[0].ID != "tok-1" {
		t.Fatalf("after the revocation: %+v", list)
	}
	if other, _ := e.views.Tokens(e.ctx, "acct-2"); len(other) != 0 {
		t.Fatalf("another account lists %+v", other)
	}
}
