package graph

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/graph/wsgql"
	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/readmodel"
)

// credential returns the signed-in account and the token the request
// carries (a WebSocket's, checked at connection_init, or the request's).
func (r *Resolver) credential(ctx context.Context) (readmodel.Account, readmodel.Token, error) {
	if acc, ok := ctx.Value(accountKey).(readmodel.Account); ok {
		tok, _ := ctx.Value(tokenInfoKey).(readmodel.Token)
		return acc, tok, nil
	}
	tok, _ := ctx.Value(tokenKey).(string)
	if tok == "" {
		return readmodel.Account{}, readmodel.Token{}, domain.ErrUnauthenticated
	}
	acc, t, err := r.authenticate(ctx, tok)
	if errors.Is(err, domain.ErrUnauthenticated) {
		if r.isAdmin(ctx) {
			// The operator's admin token is valid but acts for no
			// account: refused what needs one, never counted as a
			// refused token.
			return readmodel.Account{}, readmodel.Token{}, ErrAdminNoAccount
		}
		// A client that keeps sending refused tokens (revoked, expired,
		// guessed) is told to slow down, per client address.
		r.failedOnce.Do(func() { r.failedAuth = ratelimit.NewKeyed(FailedAuthRate, maxDeviceDeciders) })
		client, _ := ctx.Value(clientKey).(string)
		if ok, retry := r.failedAuth.Allow(client, time.Now()); !ok {
			return readmodel.Account{}, readmodel.Token{}, &RateLimitedError{RetryAfter: retry}
		}
	}
	return acc, t, err
}

// authenticate looks token up, once per HTTP request (authMemo).
func (r *Resolver) authenticate(ctx context.Context, token string) (readmodel.Account, readmodel.Token, error) {
	m, ok := ctx.Value(authMemoKey).(*authMemo)
	if !ok {
		return r.Service.AuthenticateToken(ctx, token)
	}
	m.once.Do(func() { m.acc, m.tok, m.err = r.Service.AuthenticateToken(ctx, token) })
	return m.acc, m.tok, m.err
}

// FailedAuthRate bounds the refused tokens one client address may send
// (revoked, expired, unknown); the operator's admin token is not one
// (ErrAdminNoAccount).
var FailedAuthRate = ratelimit.Rate{N: 30, Per: time.Minute, Burst: 30}

// visibleTokens are the tokens the caller may see and revoke: an owner
// every token of the account, a member their own.
func (r *Resolver) visibleTokens(ctx context.Context) ([]readmodel.Token, readmodel.Account, readmodel.Token, error) {
	acc, cur, role, err := r.caller(ctx)
	if err != nil {
		return nil, acc, cur, err
	}
	list, err := r.Views.Tokens(ctx, acc.ID)
	if err != nil {
		return nil, acc, cur, err
	}
	if role != domain.RoleOwner {
		mine := list[:0]
		for _, t := range list {
			if t.MemberID == cur.MemberID {
				mine = append(mine, t)
			}
		}
		list = mine
	}
	return list, acc, cur, nil
}

func (r *Resolver) tokens(ctx context.Context) ([]*model.Token, error) {
	list, acc, cur, err := r.visibleTokens(ctx)
	if err != nil {
		return nil, err
	}
	logins, err := r.memberLogins(ctx, acc.ID)
	if err != nil {
		return nil, err
	}
	out := make([]*model.Token, 0, len(list))
	for _, t := range list {
		m := tokenModel(t, cur.ID)
		if l, ok := logins[t.MemberID]; ok {
			m.Member = &l
		}
		out = append(out, m)
	}
	return out, nil
}

func (r *Resolver) createToken(ctx context.Context, name string, expiresIn *string) (*model.CreateTokenPayload, error) {
	acc, cur, err := r.credential(ctx)
	if err != nil {
		return nil, err
	}
	// Input first: a malformed one spends none of the account's rate.
	if err := domain.ValidateTokenName(name); err != nil {
		return nil, err
	}
	var lifetime time.Duration
	if expiresIn != nil {
		if lifetime, err = domain.ParseTokenLifetime(*expiresIn); err != nil {
			return nil, err
		}
	}
	if err := r.limitTokenChanges(acc.ID); err != nil {
		return nil, err
	}
	tok, secret, err := r.Service.CreateMemberToken(ctx, acc.ID, cur.MemberID, name, lifetime)
	if err != nil {
		return nil, err
	}
	return &model.CreateTokenPayload{Token: tokenModel(tok, cur.ID), Secret: secret}, nil
}

func (r *Resolver) revokeToken(ctx context.Context, id string) (bool, error) {
	list, acc, cur, err := r.visibleTokens(ctx)
	if err != nil {
		return false, err
	}
	// A token the caller may not see is NOT_FOUND, like an unknown one; a
	// revoked one is no longer listed, and revoking it again is a no-op
	// (NOT_FOUND once the account's stream holds a snapshot taken after
	// its revocation: docs/accounts.md).
	if !slices.ContainsFunc(list, func(t readmodel.Token) bool { return t.ID == id }) {
		if _, _, role, _ := r.caller(ctx); role != domain.RoleOwner {
			return false, domain.ErrNotFound
		}
	}
	if err := r.limitTokenChanges(acc.ID); err != nil {
		return false, err
	}
	if err := r.Service.RevokeTokenBy(ctx, acc.ID, cur.MemberID, id); err != nil {
		return false, err
	}
	return true, nil
}

// DefaultTokenRate is how many tokens one account makes and revokes (see
// Resolver.TokenRate): each is an event of the account's stream, which
// every command of the account reads from its newest snapshot. A burst of
// 200 rotates all 100 tokens at once (each revoked and made again); then
// one a minute. A loop of them grows the stream by at most 1 440 events a
// day, and its snapshots by one a few hours.
var DefaultTokenRate = ratelimit.Rate{N: 60, Per: time.Hour, Burst: 200}

// limitTokenChanges takes one token made or revoked from the account's
// bucket, or refuses with a RateLimitedError.
func (r *Resolver) limitTokenChanges(accountID string) error {
	if ok, retry := r.tokenChanges.allow(r.TokenRate, DefaultTokenRate, 1, accountID, r.now()); !ok {
		return &RateLimitedError{RetryAfter: retry,
			Reason: fmt.Sprintf("this account made and revoked tokens as fast as it may (%s)", r.tokenChanges.rate)}
	}
	return nil
}

func tokenModel(t readmodel.Token, current string) *model.Token {
	m := &model.Token{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, Current: t.ID == current, Session: t.Kind == domain.TokenKindSession}
	if !t.LastUsed.IsZero() {
		m.LastUsedAt = &t.LastUsed
	}
	if !t.ExpiresAt.IsZero() {
		m.ExpiresAt = &t.ExpiresAt
	}
	return m
}

// Why a socket is closed when its token stops working: the agent shows the
// reason and stops instead of reconnecting with a token that cannot work.
const (
	reasonRevoked = "token revoked"
	reasonExpired = "token expired"
)

// closeWhenTokenEnds makes the socket close (4403) once its token is
// revoked, seen by this node's views whatever node revoked it, or expires.
// The token is checked again after the watch starts, so that a revocation
// committed between connection_init's check and the watch still counts.
func (r *Resolver) closeWhenTokenEnds(ctx context.Context, token string, tok readmodel.Token) context.Context {
	revoked, stop := r.Views.WatchToken(tok.ID)
	closes := make(chan wsgql.Close, 1)
	go func() {
		defer stop()
		var expired <-chan time.Time
		if !tok.ExpiresAt.IsZero() {
			t := time.NewTimer(time.Until(tok.ExpiresAt))
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-revoked:
			closes <- wsgql.Close{Code: gqlws.CloseForbidden, Reason: reasonRevoked}
		case <-expired:
			closes <- wsgql.Close{Code: gqlws.CloseForbidden, Reason: reasonExpired}
		case <-ctx.Done():
		}
	}()
	if _, _, err := r.Service.AuthenticateToken(ctx, token); err != nil {
		closes <- wsgql.Close{Code: gqlws.CloseForbidden, Reason: reasonRevoked}
	}
	return wsgql.WithCloseOn(ctx, closes)
}
