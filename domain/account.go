package domain

import (
	"slices"
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
//  5. An AccountSnapshot is what the events before it fold to, as far as
//     any decision reads them: taken from the folded state and appended at
//     the revision that state reflects, so folding from it and folding the
//     whole stream decide alike (a token revoked before it is unknown to
//     the account, as an id it never issued; docs/accounts.md).

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
	since       int // events folded after the last snapshot, or from the stream's start
}

// AccountSnapshotAfter is how many events, plus one per token, member and
// invite the account holds, may follow an account stream's newest snapshot
// (or its start) before a command appends another: a command reads about
// that many. A snapshot holds each of those in fewer bytes than any event
// between two takes, so snapshots take less of the log than the events
// between them.
const AccountSnapshotAfter = 256

// MaxAccountSnapshotEntries bounds the tokens, members and invites one
// snapshot holds (under 100 bytes each: some 400 KB, within every store's
// largest append). The caps keep every account within it
// (MaxAccountEntries); one that grew past it before they held gets no new
// snapshot until it holds fewer.
const MaxAccountSnapshotEntries = 4096

// ValidateAccountName checks an account's name: 1 to 100 characters once
// trimmed.
func ValidateAccountName(name string) error {
	if n := strings.TrimSpace(name); n == "" || len(n) > 100 {
		return &InvalidInputError{Field: "name", Reason: "must be 1 to 100 characters"}
	}
	return nil
}

// SignUp creates an account with its first token; from says how it was
// made (AccountCreated.Origin and Network).
func SignUp(id, name, tokenID, tokenHash string, from AccountFrom) (*Account, error) {
	if err := ValidateAccountName(name); err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	if len(tokenHash) != 64 {
		return nil, &InvalidInputError{Field: "token hash", Reason: "must be a hex SHA-256"}
	}
	a := &Account{aggregate: newAggregate()}
	a.raise(AccountCreated{AccountID: id, Name: name, Origin: from.Origin, Network: from.Network})
	a.raise(TokenIssued{AccountID: id, TokenID: tokenID, TokenHash: tokenHash, Name: FirstTokenName})
	return a, nil
}

// LoadAccount rebuilds an account from its whole stream.
func LoadAccount(events []Event) *Account {
	a := &Account{aggregate: newAggregate()}
	for _, e := range events {
		a.apply(e)
		a.loaded()
	}
	return a
}

// LoadAccountTail rebuilds an account from the end of its stream: events
// start with its newest AccountSnapshot (or at the stream's start) and end
// at revision last, the revision a command's append then expects.
func LoadAccountTail(events []Event, last uint64) *Account {
	a := LoadAccount(events)
	a.version = int64(last)
	return a
}

func (a *Account) raise(e Event) { a.apply(e); a.changes = append(a.changes, e) }

func (a *Account) apply(e Event) {
	a.since++
	switch e := e.(type) {
	case AccountSnapshot:
		a.restore(e)
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

// restore replaces the folded state with a snapshot's.
func (a *Account) restore(s AccountSnapshot) {
	a.id, a.name = s.AccountID, s.Name
	a.tokens, a.tokenMember, a.sessions = map[string]bool{}, map[string]string{}, map[string]bool{}
	a.members, a.invites, a.inviters = map[string]*member{}, map[string]*memberInvite{}, map[string]string{}
	a.tokenOrder = a.tokenOrder[:0]
	for _, t := range s.Tokens {
		a.tokens[t.ID] = true
		a.tokenOrder = append(a.tokenOrder, t.ID)
		a.tokenMember[t.ID] = t.MemberID
		if t.Session {
			a.sessions[t.ID] = true
		}
	}
	for _, m := range s.Members {
		a.members[m.ID] = &member{role: Role(m.Role)}
	}
	for _, v := range s.Invites {
		at, _ := time.Parse(time.RFC3339Nano, v.ExpiresAt)
		a.invites[v.ID] = &memberInvite{role: Role(v.Role), expiresAt: at}
		a.inviters[v.ID] = v.By
	}
	a.quota, a.quotaSet = AccountQuotaSet{}, s.Quota != nil
	if s.Quota != nil {
		a.quota = *s.Quota
	}
	a.since = 0
}

// State is what the account's decisions read, as an AccountSnapshot: the
// unrevoked tokens as issued, the current members and the invites open at
// now, each list in a fixed order, so two folds that decide alike give
// equal states.
func (a *Account) State(now time.Time) AccountSnapshot {
	s := AccountSnapshot{AccountID: a.id, Name: a.name}
	for _, id := range a.tokenOrder {
		if a.tokens[id] {
			s.Tokens = append(s.Tokens, AccountTokenState{ID: id, MemberID: a.tokenMember[id], Session: a.sessions[id]})
		}
	}
	for id, m := range a.members {
		if !m.removed {
			s.Members = append(s.Members, MemberState{ID: id, Role: string(m.role)})
		}
	}
	slices.SortFunc(s.Members, func(x, y MemberState) int { return strings.Compare(x.ID, y.ID) })
	for id, v := range a.invites {
		// An invite expired or used is refused as an unknown one is.
		if !v.used && now.Before(v.expiresAt) {
			s.Invites = append(s.Invites, MemberInviteState{ID: id, Role: string(v.role), By: a.inviters[id],
				ExpiresAt: v.expiresAt.UTC().Format(time.RFC3339Nano)})
		}
	}
	slices.SortFunc(s.Invites, func(x, y MemberInviteState) int { return strings.Compare(x.ID, y.ID) })
	if a.quotaSet {
		q := a.quota
		s.Quota = &q
	}
	return s
}

// Snapshot returns the AccountSnapshot to append after the events folded
// (and raised), when more than AccountSnapshotAfter events plus one per
// entry it holds followed the last one, and false when none is due (or it
// would hold more than MaxAccountSnapshotEntries). now decides which
// invites are still open. Appended at the revision the fold reflects, it
// lets the next command start there.
func (a *Account) Snapshot(now time.Time) (AccountSnapshot, bool) {
	if a.since <= AccountSnapshotAfter {
		return AccountSnapshot{}, false
	}
	s := a.State(now)
	n := len(s.Tokens) + len(s.Members) + len(s.Invites)
	if a.since <= AccountSnapshotAfter+n || n > MaxAccountSnapshotEntries {
		return AccountSnapshot{}, false
	}
	return s, true
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
