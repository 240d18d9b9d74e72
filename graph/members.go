package graph

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/readmodel"
)

// JoinPath is the console page where a member invite's holder joins.
const JoinPath = "/join?code="

// DefaultSignInRate bounds sign-in attempts per login from addresses that
// never signed in to it; each client address may make four times as many
// (it may serve several people). Ten tries a minute at most cannot guess a
// password of ten bytes.
var DefaultSignInRate = ratelimit.Rate{N: 10, Per: time.Minute, Burst: 10}

// maxSignInKeys bounds the buckets of the sign-in limits.
const maxSignInKeys = 100_000

// Known sign-ins: a client address that signed in to a login is let past
// that login's own limit for knownSignInFor, so strangers' wrong guesses
// do not lock the login's user out where they usually sign in. At most
// maxKnownSignIns pairs are kept (about 80 bytes each: 4 MiB), in memory.
const (
	maxKnownSignIns = 50_000
	knownSignInFor  = 30 * 24 * time.Hour
)

// signInLimits are the buckets of the sign-in limits, made on first use,
// and the addresses known to each login.
type signInLimits struct {
	once              sync.Once
	byLogin, byClient *ratelimit.Keyed
	known             knownSignIns
}

// knownSignIns remembers (login, client address) pairs that signed in.
type knownSignIns struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]time.Time // pair → its latest sign-in
}

func knownKey(login, client string) [sha256.Size]byte {
	return sha256.Sum256([]byte(domain.LoginKey(login) + "\x00" + client))
}

// has tells whether client signed in to login within knownSignInFor.
func (k *knownSignIns) has(login, client string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	at, ok := k.seen[knownKey(login, client)]
	return ok && now.Sub(at) < knownSignInFor
}

// add remembers that client signed in to login. When full, pairs past
// knownSignInFor go first, then any: a login that loses its pair falls
// back to the per-login limit, nothing worse.
func (k *knownSignIns) add(login, client string, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seen == nil {
		k.seen = make(map[[sha256.Size]byte]time.Time)
	}
	key := knownKey(login, client)
	if _, ok := k.seen[key]; !ok && len(k.seen) >= maxKnownSignIns {
		for p, at := range k.seen {
			if now.Sub(at) >= knownSignInFor {
				delete(k.seen, p)
			}
		}
		for p := range k.seen {
			if len(k.seen) < maxKnownSignIns {
				break
			}
			delete(k.seen, p)
		}
	}
	k.seen[key] = now
}

// signInBuckets makes the sign-in limits' buckets; false when they are off.
func (r *Resolver) signInBuckets() bool {
	if r.NoSignInLimit {
		return false
	}
	r.signIn.once.Do(func() {
		rate := r.SignInRate
		if rate.Off() {
			rate = DefaultSignInRate
		}
		r.signIn.byLogin = ratelimit.NewKeyed(rate, maxSignInKeys)
		r.signIn.byClient = ratelimit.NewKeyed(ratelimit.Rate{N: rate.N * 4, Per: rate.Per, Burst: rate.Burst * 4}, maxSignInKeys)
	})
	return true
}

// limitClient takes one attempt of the client address's sign-in budget,
// which sign-in, sign-up with a login and joining share: each of them
// tells whether a login exists, so none may ask faster than sign-in.
func (r *Resolver) limitClient(ctx context.Context) error {
	if !r.signInBuckets() {
		return nil
	}
	client, _ := ctx.Value(clientKey).(string)
	if ok, retry := r.signIn.byClient.Allow(client, time.Now()); !ok {
		return &RateLimitedError{RetryAfter: retry}
	}
	return nil
}

// limitSignIn takes one sign-in attempt of the client address and, unless
// that address signed in to the login before (knownSignIns), of the
// login; or refuses with a RateLimitedError.
func (r *Resolver) limitSignIn(ctx context.Context, login string) error {
	return r.limitLogin(ctx, login, true)
}

// limitLogin is limitSignIn; knownPasses false takes from the login's
// limit whatever the address (a password change: a signed-in session
// guessing the current password is not let off for its address).
func (r *Resolver) limitLogin(ctx context.Context, login string, knownPasses bool) error {
	if err := r.limitClient(ctx); err != nil || r.NoSignInLimit {
		return err
	}
	now := time.Now()
	client, _ := ctx.Value(clientKey).(string)
	if knownPasses && r.signIn.known.has(login, client, now) {
		return nil
	}
	// By hash: a key of fixed size, however long the login sent.
	if ok, retry := r.signIn.byLogin.Allow(domain.LoginKeyHash(login), now); !ok {
		return &RateLimitedError{RetryAfter: retry}
	}
	return nil
}

// signedInFrom remembers that the request's client address signed in to
// login (see knownSignIns).
func (r *Resolver) signedInFrom(ctx context.Context, login string) {
	if r.NoSignInLimit {
		return
	}
	client, _ := ctx.Value(clientKey).(string)
	r.signIn.known.add(login, client, time.Now())
}

// caller is the signed-in account, the request's token and the role it
// acts with: its member's, or an owner's for a token without a member (the
// account's credential from before members). A removed member is
// unauthenticated (their tokens are revoked with them anyway).
func (r *Resolver) caller(ctx context.Context) (readmodel.Account, readmodel.Token, domain.Role, error) {
	acc, tok, err := r.credential(ctx)
	if err != nil {
		return acc, tok, "", err
	}
	if tok.MemberID == "" {
		return acc, tok, domain.RoleOwner, nil
	}
	m, err := r.Views.Member(ctx, acc.ID, tok.MemberID)
	if errors.Is(err, domain.ErrNotFound) {
		return readmodel.Account{}, readmodel.Token{}, "", domain.ErrUnauthenticated
	}
	if err != nil {
		return acc, tok, "", err
	}
	return acc, tok, domain.Role(m.Role), nil
}

// owner is caller for what only owners may do: FORBIDDEN for a member.
func (r *Resolver) owner(ctx context.Context) (readmodel.Account, readmodel.Token, error) {
	acc, tok, role, err := r.caller(ctx)
	if err == nil && role != domain.RoleOwner {
		err = domain.ErrForbidden
	}
	return acc, tok, err
}

func memberModel(m readmodel.Member, you string) *model.Member {
	return &model.Member{ID: m.ID, Login: m.Login, Role: model.MemberRole(strings.ToUpper(m.Role)), JoinedAt: m.JoinedAt, You: m.ID == you}
}

// needJar refuses a sign-in that could not set its cookie (over a
// WebSocket) before any work is done.
func needJar(ctx context.Context) error {
	if console, ok := ctx.Value(noCookiesKey).(string); ok {
		return &domain.InvalidInputError{Field: "signIn", Reason: "sign in on the console, " + console + ": this host keeps no browser sessions"}
	}
	if jar(ctx) == nil {
		return &domain.InvalidInputError{Field: "signIn", Reason: "sign in over HTTP POST: a WebSocket cannot set the session cookie"}
	}
	return nil
}

// checkCredentials checks a new login and password as input, before any
// rate is taken from: a malformed one spends none of the caller's.
func checkCredentials(login, password string) error {
	if err := domain.ValidateLogin(login); err != nil {
		return err
	}
	return domain.ValidatePassword(password)
}

// signedIn answers a sign-in: the session cookie on the HTTP answer, the
// account and member in the body (never the token).
func (r *Resolver) signedIn(ctx context.Context, s commands.Session) (*model.SessionPayload, error) {
	if err := needJar(ctx); err != nil {
		return nil, err
	}
	jar(ctx).set(s.Token, s.ExpiresAt)
	return &model.SessionPayload{Account: &model.Account{ID: s.Account.ID, Name: s.Account.Name}, Member: memberModel(s.Member, s.Member.ID), ExpiresAt: s.ExpiresAt}, nil
}

func (r *Resolver) signUpWithPassword(ctx context.Context, name, login, password string, invite *string) (*model.SessionPayload, error) {
	if err := needJar(ctx); err != nil {
		return nil, err
	}
	if err := domain.ValidateAccountName(name); err != nil {
		return nil, err
	}
	if err := checkCredentials(login, password); err != nil {
		return nil, err
	}
	if err := r.limitAnonymous(ctx); err != nil {
		return nil, err
	}
	if err := r.limitClient(ctx); err != nil {
		return nil, err
	}
	release, err := r.admitPassword(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	s, err := r.Service.SignUpWithPassword(ctx, name, login, password, deref(invite), clientNetwork(ctx))
	if err != nil {
		return nil, err
	}
	r.signedInFrom(ctx, login)
	return r.signedIn(ctx, s)
}

func (r *Resolver) signInWithPassword(ctx context.Context, login, password string) (*model.SessionPayload, error) {
	if err := needJar(ctx); err != nil {
		return nil, err
	}
	if err := r.limitSignIn(ctx, login); err != nil {
		return nil, err
	}
	release, err := r.admitPassword(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	s, err := r.Service.SignIn(ctx, login, password)
	if err != nil {
		return nil, err
	}
	r.signedInFrom(ctx, login)
	return r.signedIn(ctx, s)
}

func (r *Resolver) signOut(ctx context.Context) (bool, error) {
	if j := jar(ctx); j != nil {
		j.clear()
	}
	acc, tok, err := r.credential(ctx)
	if errors.Is(err, domain.ErrUnauthenticated) {
		return true, nil // nothing to end: the cookie is cleared
	}
	if err != nil {
		return false, err
	}
	if tok.Kind != domain.TokenKindSession {
		return true, nil // an API token is revoked by revokeToken, never by signing a browser out
	}
	if err := r.Service.RevokeTokenBy(ctx, acc.ID, tok.MemberID, tok.ID); err != nil {
		return false, err
	}
	return true, nil
}

func (r *Resolver) changePassword(ctx context.Context, current, next string) (bool, error) {
	acc, tok, _, err := r.caller(ctx)
	if err != nil {
		return false, err
	}
	if tok.MemberID == "" {
		return false, &domain.InvalidInputError{Field: "changePassword", Reason: "this token acts for no member: set up sign-in first"}
	}
	if err := domain.ValidateNewPassword(next); err != nil {
		return false, err
	}
	m, err := r.Views.Member(ctx, acc.ID, tok.MemberID)
	if err != nil {
		return false, err
	}
	// Guessing the current password is guessing a sign-in: the same
	// limits, the login's whatever the address.
	if err := r.limitLogin(ctx, m.Login, false); err != nil {
		return false, err
	}
	release, err := r.admitPassword(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	keep := ""
	if tok.Kind == domain.TokenKindSession {
		keep = tok.ID
	}
	if err := r.Service.ChangePassword(ctx, acc.ID, tok.MemberID, current, next, keep); err != nil {
		return false, err
	}
	return true, nil
}

func (r *Resolver) setUpSignIn(ctx context.Context, login, password string) (*model.SessionPayload, error) {
	acc, _, err := r.owner(ctx)
	if err != nil {
		return nil, err
	}
	if err := needJar(ctx); err != nil {
		return nil, err
	}
	if err := checkCredentials(login, password); err != nil {
		return nil, err
	}
	// It hashes a password and tells whether a login is held, as a
	// sign-up with a login does: the same per-address budget.
	if err := r.limitClient(ctx); err != nil {
		return nil, err
	}
	release, err := r.admitPassword(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	s, err := r.Service.SetUpSignIn(ctx, acc.ID, login, password)
	if err != nil {
		return nil, err
	}
	r.signedInFrom(ctx, login)
	return r.signedIn(ctx, s)
}

func roleOf(role *model.MemberRole) domain.Role {
	if role != nil && *role == model.MemberRoleOwner {
		return domain.RoleOwner
	}
	return domain.RoleMember
}

func (r *Resolver) createMemberInvite(ctx context.Context, role *model.MemberRole, expiresIn *string) (*model.MemberInvite, error) {
	acc, tok, err := r.owner(ctx)
	if err != nil {
		return nil, err
	}
	// The input is checked whole, and a full account refused, before the
	// rate is taken from: a refused invite does not spend one of the hour's.
	var lifetime time.Duration
	if expiresIn != nil {
		if lifetime, err = domain.ParseInviteLifetime(*expiresIn, domain.MemberInviteLifetime); err != nil {
			return nil, err
		}
	}
	if err := r.Service.CanInviteMember(ctx, acc.ID, tok.MemberID); err != nil {
		return nil, err
	}
	if err := r.limitInviteRate(acc.ID, memberInviteKind, time.Now()); err != nil {
		return nil, err
	}
	rl := roleOf(role)
	code, expires, err := r.Service.InviteMember(ctx, acc.ID, tok.MemberID, rl, lifetime)
	if err != nil {
		return nil, err
	}
	return &model.MemberInvite{Code: code, Path: JoinPath + code, URL: r.consoleLink(JoinPath + code), Role: model.MemberRole(strings.ToUpper(string(rl))), ExpiresAt: expires}, nil
}

// memberInvite names the account a member invite joins, for the join page.
func (r *Resolver) memberInvite(ctx context.Context, code string) (*model.InvitePreview, error) {
	// The same budget as joinAccount's: a code is guessed no faster.
	if err := r.limitSignIn(ctx, "join "+code); err != nil {
		return nil, err
	}
	p, err := r.Service.PreviewMemberInvite(ctx, code)
	if err != nil {
		return nil, err
	}
	return &model.InvitePreview{AccountName: p.AccountName, Role: model.MemberRole(strings.ToUpper(string(p.Role))), ExpiresAt: p.ExpiresAt}, nil
}

func (r *Resolver) joinAccount(ctx context.Context, code, login, password string) (*model.SessionPayload, error) {
	if err := needJar(ctx); err != nil {
		return nil, err
	}
	if err := checkCredentials(login, password); err != nil {
		return nil, err
	}
	// Codes are guessed no faster than passwords.
	if err := r.limitSignIn(ctx, "join "+code); err != nil {
		return nil, err
	}
	release, err := r.admitPassword(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	s, err := r.Service.JoinAccount(ctx, code, login, password)
	if err != nil {
		return nil, err
	}
	r.signedInFrom(ctx, login)
	return r.signedIn(ctx, s)
}

func (r *Resolver) removeMember(ctx context.Context, id string) (bool, error) {
	acc, tok, err := r.owner(ctx)
	if err != nil {
		return false, err
	}
	if err := r.Service.RemoveMember(ctx, acc.ID, tok.MemberID, id); err != nil {
		return false, err
	}
	return true, nil
}

func (r *Resolver) changeMemberRole(ctx context.Context, id string, role model.MemberRole) (*model.Member, error) {
	acc, tok, err := r.owner(ctx)
	if err != nil {
		return nil, err
	}
	m, err := r.Service.ChangeMemberRole(ctx, acc.ID, tok.MemberID, id, roleOf(&role))
	if err != nil {
		return nil, err
	}
	return memberModel(m, tok.MemberID), nil
}

// ownAccount checks that obj is the caller's account (an Account is only
// ever returned to its own members, but the fields below must not rely
// on that).
func (r *Resolver) ownAccount(ctx context.Context, obj *model.Account) (readmodel.Account, readmodel.Token, domain.Role, error) {
	acc, tok, role, err := r.caller(ctx)
	if err != nil {
		return acc, tok, role, err
	}
	if acc.ID != obj.ID {
		return acc, tok, role, domain.ErrNotFound
	}
	return acc, tok, role, nil
}

func (r *Resolver) accountMember(ctx context.Context, obj *model.Account) (*model.Member, error) {
	acc, tok, _, err := r.ownAccount(ctx, obj)
	if err != nil || tok.MemberID == "" {
		return nil, err
	}
	m, err := r.Views.Member(ctx, acc.ID, tok.MemberID)
	if err != nil {
		return nil, err
	}
	return memberModel(m, tok.MemberID), nil
}

func (r *Resolver) accountMembers(ctx context.Context, obj *model.Account) ([]*model.Member, error) {
	acc, tok, _, err := r.ownAccount(ctx, obj)
	if err != nil {
		return nil, err
	}
	list, err := r.Views.Members(ctx, acc.ID)
	if err != nil {
		return nil, err
	}
	out := make([]*model.Member, 0, len(list))
	for _, m := range list {
		out = append(out, memberModel(m, tok.MemberID))
	}
	return out, nil
}

// memberLogins names the account's current members by id: who issued a
// token, who made a change.
func (r *Resolver) memberLogins(ctx context.Context, accountID string) (map[string]string, error) {
	members, err := r.Views.Members(ctx, accountID)
	if err != nil {
		return nil, err
	}
	logins := make(map[string]string, len(members))
	for _, m := range members {
		logins[m.ID] = m.Login
	}
	return logins, nil
}

// maxActivity bounds one activity page.
const maxActivity = 200

func (r *Resolver) accountActivity(ctx context.Context, obj *model.Account, first *int) ([]*model.ActivityEntry, error) {
	acc, _, role, err := r.ownAccount(ctx, obj)
	if err != nil {
		return nil, err
	}
	if role != domain.RoleOwner {
		return nil, domain.ErrForbidden
	}
	n := 50
	if first != nil && *first > 0 {
		n = min(*first, maxActivity)
	}
	list, err := r.Views.Activity(ctx, acc.ID, 0, n)
	if err != nil {
		return nil, err
	}
	logins, err := r.memberLogins(ctx, acc.ID)
	if err != nil {
		return nil, err
	}
	out := make([]*model.ActivityEntry, 0, len(list))
	for _, a := range list {
		e := &model.ActivityEntry{At: a.At, Type: a.Type, Subject: a.Subject, Detail: a.Detail}
		if l, ok := logins[a.By]; ok {
			e.By = &l
		}
		e.Text = activityText(a.Type, e.By, logins[a.Subject], a.Detail)
		out = append(out, e)
	}
	return out, nil
}
