package domain

import (
	"strings"
	"time"

	"github.com/relayhq/relay/domain/duration"
)

// Account invariants:
//  1. An account has a non-empty name of at most 100 characters.
//  2. Tokens are stored as SHA-256 hashes only; the token itself never
//     enters an event.
//  3. A token has a name of 1 to 100 characters, and an account holds at
//     most MaxTokens unrevoked tokens.
//  4. A revoked token never comes back.

// MaxTokens bounds the unrevoked tokens of one account: one per device is
// a few dozen at most, and each is a row every listing reads.
const MaxTokens = 100

// FirstTokenName names the token made at sign-up, and reads the tokens
// issued before tokens had names.
const FirstTokenName = "first token"

// Account owns Endpoints and the tokens that act for it.
type Account struct {
	aggregate
	id     string
	name   string
	tokens map[string]bool // token ID → active
	// tokenOrder lists token IDs as issued; tokenMember names whose each is.
	tokenOrder  []string
	tokenMember map[string]string
	sessions    map[string]bool // token IDs of kind session
	members     map[string]*member
	invites     map[string]*memberInvite
	inviters    map[string]string // invite ID → the member who made it
	quota       AccountQuotaSet   // the latest override (see quota.go)
	quotaSet    bool
}

// SignUp creates an account with its first token.
func SignUp(id, name, tokenID, tokenHash string) (*Account, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return nil, &InvalidInputError{Field: "name", Reason: "must be 1 to 100 characters"}
	}
	if len(tokenHash) != 64 {
		return nil, &InvalidInputError{Field: "token hash", Reason: "must be a hex SHA-256"}
	}
	a := &Account{aggregate: newAggregate()}
	a.raise(AccountCreated{AccountID: id, Name: name})
	a.raise(TokenIssued{AccountID: id, TokenID: tokenID, TokenHash: tokenHash, Name: FirstTokenName})
	return a, nil
}

// LoadAccount rebuilds an account from its stream.
func LoadAccount(events []Event) *Account {
	a := &Account{aggregate: newAggregate()}
	for _, e := range events {
		a.apply(e)
		a.loaded()
	}
	return a
}

func (a *Account) raise(e Event) { a.apply(e); a.changes = append(a.changes, e) }

func (a *Account) apply(e Event) {
	switch e := e.(type) {
	case AccountCreated:
		a.id, a.name = e.AccountID, e.Name
		a.tokens, a.tokenMember, a.sessions = map[string]bool{}, map[string]string{}, map[string]bool{}
		a.members, a.invites, a.inviters = map[string]*member{}, map[string]*memberInvite{}, map[string]string{}
	case TokenIssued:
		a.tokens[e.TokenID] = true
		a.tokenOrder = append(a.tokenOrder, e.TokenID)
		a.tokenMember[e.TokenID] = e.MemberID
		if e.Kind == TokenKindSession {
			a.sessions[e.TokenID] = true
		}
	case TokenRevoked:
		a.tokens[e.TokenID] = false
	case MemberJoined:
		a.members[e.MemberID] = &member{role: Role(e.Role)}
	case MemberRemoved:
		if m := a.members[e.MemberID]; m != nil {
			m.removed = true
		}
	case MemberRoleChanged:
		if m := a.members[e.MemberID]; m != nil {
			m.role = Role(e.Role)
		}
	case MemberInvited:
		at, _ := time.Parse(time.RFC3339Nano, e.ExpiresAt)
		a.invites[e.InviteID] = &memberInvite{role: Role(e.Role), expiresAt: at}
		a.inviters[e.InviteID] = e.By
	case MemberInviteUsed:
		if v := a.invites[e.InviteID]; v != nil {
			v.used = true
		}
	case AccountQuotaSet:
		a.quota, a.quotaSet = e, true
	}
}

// ID and Name describe the account.
func (a *Account) ID() string   { return a.id }
func (a *Account) Name() string { return a.name }

// ValidateTokenName checks a token's name (invariant 3).
func ValidateTokenName(name string) error {
	if n := strings.TrimSpace(name); n == "" || len(n) > 100 || strings.ContainsAny(n, "\r\n\x00") {
		return &InvalidInputError{Field: "name", Reason: "must be 1 to 100 characters on one line"}
	}
	return nil
}

// IssueToken adds a token (by hash) to the account; a zero expiresAt
// never expires.
func (a *Account) IssueToken(tokenID, tokenHash, name string, expiresAt time.Time) error {
	return a.IssueMemberToken(tokenID, tokenHash, name, expiresAt, "", "")
}

// IssueMemberToken is IssueToken for a member (memberID; "" for none) and
// of a kind ("" API, TokenKindSession). A removed member gets nothing.
func (a *Account) IssueMemberToken(tokenID, tokenHash, name string, expiresAt time.Time, memberID, kind string) error {
	if memberID != "" {
		if _, ok := a.Role(memberID); !ok {
			return ErrUnauthenticated
		}
	}
	if len(tokenHash) != 64 {
		return &InvalidInputError{Field: "token hash", Reason: "must be a hex SHA-256"}
	}
	if err := ValidateTokenName(name); err != nil {
		return err
	}
	if kind == TokenKindSession {
		a.raise(a.sessionEvent(memberID, SessionToken{ID: tokenID, Hash: tokenHash, ExpiresAt: expiresAt}))
		return nil
	}
	active := 0
	for id, on := range a.tokens {
		if on && !a.sessions[id] {
			active++
		}
	}
	if active >= MaxTokens {
		return &InvalidInputError{Field: "createToken", Reason: "an account holds at most 100 tokens: revoke one first"}
	}
	e := TokenIssued{AccountID: a.id, TokenID: tokenID, TokenHash: tokenHash, Name: strings.TrimSpace(name), MemberID: memberID, Kind: kind}
	if !expiresAt.IsZero() {
		e.ExpiresAt = expiresAt.UTC().Format(time.RFC3339Nano)
	}
	a.raise(e)
	return nil
}

// HasToken reports whether the account issued tokenID (revoked or not).
func (a *Account) HasToken(tokenID string) bool {
	_, ok := a.tokens[tokenID]
	return ok
}

// RevokeToken stops a token. A token the account never issued is
// ErrNotFound; revoking a revoked one raises nothing.
func (a *Account) RevokeToken(tokenID string) error { return a.RevokeTokenBy("", tokenID) }

// RevokeTokenBy is RevokeToken naming the member who revokes ("" unknown).
func (a *Account) RevokeTokenBy(by, tokenID string) error {
	on, ok := a.tokens[tokenID]
	if !ok {
		return ErrNotFound
	}
	if on {
		a.raise(TokenRevoked{AccountID: a.id, TokenID: tokenID, By: by})
	}
	return nil
}

// MaxTokenLifetime bounds createToken's expiresIn.
const MaxTokenLifetime = 3650 * 24 * time.Hour

// ParseTokenLifetime reads a token's lifetime: a whole number of days
// ("30d"), or a Go duration ("12h", "90m"), from one minute to ten years.
func ParseTokenLifetime(s string) (time.Duration, error) {
	bad := &InvalidInputError{Field: "expiresIn", Reason: "must be a duration such as 30d, 12h or 90m, from 1m to 3650d"}
	d, err := duration.Parse(s)
	if err != nil {
		return 0, bad
	}
	if d < time.Minute || d > MaxTokenLifetime {
		return 0, bad
	}
	return d, nil
}
