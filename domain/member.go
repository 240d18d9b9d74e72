package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Members: the people who may sign in to an account with a login and a
// password. An account is an organization; its members share its
// Endpoints and tokens, and its owners manage the members.
//
// Member invariants (the account's, numbered after account.go's):
//  5. A login is 1 to 100 characters on one line; logins are unique on the
//     relay without regard to case (the login streams keep that, see
//     LoginClaim).
//  6. A password enters an event only as its argon2id hash sealed under
//     the relay's secrets key (the commands seal it): never the password,
//     never the plain hash, which whoever reads the log could guess at
//     offline.
//  7. Only owners invite, remove members and change roles; the last owner
//     can be neither removed nor demoted.
//  8. Removing a member revokes every token they hold, in the same append.
//  9. A member invite is used once, before it expires: the account
//     stream's expected revision makes that hold when two nodes race.
// 10. An account holds at most MaxMembers members and open member invites
//     together: an invite holds a seat, so nobody is invited into a full
//     account, and the account's state always fits one snapshot
//     (MaxAccountEntries).

// Role is what a member may do.
type Role string

// The roles: owners manage members and read the activity; members use
// everything else of the account.
const (
	RoleOwner  Role = "owner"
	RoleMember Role = "member"
)

// ParseRole reads a role (any case).
func ParseRole(s string) (Role, error) {
	switch Role(strings.ToLower(strings.TrimSpace(s))) {
	case RoleOwner:
		return RoleOwner, nil
	case RoleMember:
		return RoleMember, nil
	}
	return "", &InvalidInputError{Field: "role", Reason: "must be OWNER or MEMBER"}
}

// Password limits in bytes: ten is the least that resists guessing with
// the attempt limits in front; 256 bounds the work of hashing one.
const (
	MinPasswordBytes = 10
	MaxPasswordBytes = 256
)

// ValidatePassword checks a password's length (in bytes: what the hash
// costs). Anything else is the person's choice.
func ValidatePassword(pw string) error {
	switch {
	case len(pw) < MinPasswordBytes:
		return &InvalidInputError{Field: "password", Reason: "must be at least 10 bytes long"}
	case len(pw) > MaxPasswordBytes:
		return &InvalidInputError{Field: "password", Reason: "must be at most 256 bytes long"}
	}
	return nil
}

// ValidateNewPassword is ValidatePassword for a password change's
// newPassword.
func ValidateNewPassword(pw string) error {
	if err := ValidatePassword(pw); err != nil {
		return &InvalidInputError{Field: "newPassword", Reason: err.(*InvalidInputError).Reason}
	}
	return nil
}

// NormalLogin is a login as typed, trimmed, after ValidateLogin.
func NormalLogin(login string) string { return strings.TrimSpace(login) }

// ValidateLogin checks a login (invariant 5): an email, a user name.
func ValidateLogin(login string) error {
	l := NormalLogin(login)
	if l == "" || utf8.RuneCountInString(l) > 100 || !utf8.ValidString(l) || strings.ContainsAny(l, "\r\n\t\x00") {
		return &InvalidInputError{Field: "login", Reason: "must be 1 to 100 characters on one line"}
	}
	return nil
}

// LoginKey is the form logins are compared in: without case.
func LoginKey(login string) string { return strings.ToLower(NormalLogin(login)) }

// LoginKeyHash names a login's stream: hex SHA-256 of its key, so any
// characters a login holds make a valid stream name.
func LoginKeyHash(login string) string {
	sum := sha256.Sum256([]byte(LoginKey(login)))
	return hex.EncodeToString(sum[:])
}

// validSealedPassword accepts a sealed hash only (invariant 6): a password
// or a plain hash that slipped through unsealed is refused, never
// recorded. A sealed form ("aes256gcm:v1:KEYID:BASE64URL", see the
// secrets package) names its cipher and never holds a "$"; a PHC string
// always does.
func validSealedPassword(s string) error {
	if !strings.HasPrefix(s, "aes256gcm:") || len(s) > MaxStoredSecret || strings.Contains(s, "$") {
		return &InvalidInputError{Field: "password hash", Reason: "must be sealed under the relay's secrets key"}
	}
	return nil
}

// StoredPassword is the form the relay checks a sign-in against: the
// sealed hash, or the plain one an event written before sealing holds.
func (e MemberJoined) StoredPassword() string {
	if e.PasswordSealed != "" {
		return e.PasswordSealed
	}
	return e.PasswordHash
}

// StoredPassword is the form the relay checks a sign-in against: the
// sealed hash, or the plain one an event written before sealing holds.
func (e MemberPasswordChanged) StoredPassword() string {
	if e.PasswordSealed != "" {
		return e.PasswordSealed
	}
	return e.PasswordHash
}

// member is one member as the account aggregate knows them.
type member struct {
	role    Role
	removed bool
}

// memberInvite is a member invite as the account aggregate knows it.
type memberInvite struct {
	role      Role
	expiresAt time.Time
	used      bool
}

// NewMember describes a member to add. PasswordSealed is the password's
// argon2id hash sealed under the relay's secrets key (invariant 6).
type NewMember struct {
	ID             string
	Login          string
	PasswordSealed string
}

func (m NewMember) check() error {
	if err := ValidateLogin(m.Login); err != nil {
		return err
	}
	return validSealedPassword(m.PasswordSealed)
}

// SessionToken describes the session a sign-in opens: a token of the
// account for the member, of kind session, with an expiry.
type SessionToken struct {
	ID, Hash  string
	ExpiresAt time.Time
}

// MaxSessions bounds one member's open sessions (browsers signed in): a
// new one beyond ends the oldest, so sessions never crowd out API tokens
// (they do not count against MaxTokens) nor grow without end.
const MaxSessions = 20

// sessionEvent is the TokenIssued of a new session; it first revokes the
// member's oldest sessions beyond MaxSessions.
func (a *Account) sessionEvent(memberID string, s SessionToken) TokenIssued {
	var open []string
	for _, id := range a.tokenOrder {
		if a.tokens[id] && a.sessions[id] && a.tokenMember[id] == memberID {
			open = append(open, id)
		}
	}
	for len(open) >= MaxSessions {
		a.raise(TokenRevoked{AccountID: a.id, TokenID: open[0], By: memberID})
		open = open[1:]
	}
	return TokenIssued{AccountID: a.id, TokenID: s.ID, TokenHash: s.Hash, Name: "browser session",
		ExpiresAt: s.ExpiresAt.UTC().Format(time.RFC3339Nano), MemberID: memberID, Kind: TokenKindSession}
}

// SignUpOwner creates an account with its first owner and that owner's
// first session; from says how it was made, as for SignUp.
func SignUpOwner(id, name string, owner NewMember, session SessionToken, from AccountFrom) (*Account, error) {
	if err := ValidateAccountName(name); err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	if err := owner.check(); err != nil {
		return nil, err
	}
	if len(session.Hash) != 64 {
		return nil, &InvalidInputError{Field: "token hash", Reason: "must be a hex SHA-256"}
	}
	a := &Account{aggregate: newAggregate()}
	a.raise(AccountCreated{AccountID: id, Name: name, Origin: from.Origin, Network: from.Network})
	a.raise(MemberJoined{AccountID: id, MemberID: owner.ID, Login: NormalLogin(owner.Login), Role: string(RoleOwner), PasswordSealed: owner.PasswordSealed})
	a.raise(a.sessionEvent(owner.ID, session))
	return a, nil
}

// HasMembers reports whether anyone may sign in to the account with a
// password (accounts made before members have none).
func (a *Account) HasMembers() bool {
	for _, m := range a.members {
		if !m.removed {
			return true
		}
	}
	return false
}

// Role is a current member's role; ok is false for anyone else.
func (a *Account) Role(memberID string) (Role, bool) {
	m, ok := a.members[memberID]
	if !ok || m.removed {
		return "", false
	}
	return m.role, true
}

// SetUpOwner gives an account without members its first owner (invariant
// 7 has nobody to ask: whoever holds the account's token may).
func (a *Account) SetUpOwner(owner NewMember, session SessionToken) error {
	if a.HasMembers() {
		return &InvalidInputError{Field: "setUpSignIn", Reason: "this account already has members: ask an owner for an invite"}
	}
	if err := owner.check(); err != nil {
		return err
	}
	a.raise(MemberJoined{AccountID: a.id, MemberID: owner.ID, Login: NormalLogin(owner.Login), Role: string(RoleOwner), PasswordSealed: owner.PasswordSealed})
	a.raise(a.sessionEvent(owner.ID, session))
	return nil
}

// requireOwner is invariant 7's check of who acts. by "" is a token
// without a member: the account's own credential from before members,
// which acts as an owner.
func (a *Account) requireOwner(by string) error {
	if by == "" {
		return nil
	}
	if r, ok := a.Role(by); !ok || r != RoleOwner {
		return ErrForbidden
	}
	return nil
}

// MemberInviteLifetime is a member invite's default and longest lifetime.
const MemberInviteLifetime = 7 * 24 * time.Hour

// MaxMembers bounds an account's members and open member invites together
// (invariant 10). A team sharing Endpoints is rarely more than a few dozen
// people; 150 leaves room for a large one and keeps the account's state,
// with each member's MaxSessions, within one snapshot (MaxAccountEntries).
const MaxMembers = 150

// MaxAccountEntries is the most tokens, members and open member invites an
// account holds: MaxTokens API tokens, and per seat a member with their
// MaxSessions sessions (an open invite holds a seat with none). It is
// below MaxAccountSnapshotEntries, so every account within its caps takes
// snapshots and its commands read a bounded tail.
const MaxAccountEntries = MaxTokens + MaxMembers*(1+MaxSessions)

// seats counts the current members and the member invites open at now.
func (a *Account) seats(now time.Time) (members, invites int) {
	for _, m := range a.members {
		if !m.removed {
			members++
		}
	}
	for _, v := range a.invites {
		if !v.used && now.Before(v.expiresAt) {
			invites++
		}
	}
	return members, invites
}

// CanInvite refuses what InviteMember would refuse of the member by at
// now, whatever the invite: someone not an owner, or a full account
// (invariant 10).
func (a *Account) CanInvite(by string, now time.Time) error {
	if err := a.requireOwner(by); err != nil {
		return err
	}
	if members, invites := a.seats(now); members+invites >= MaxMembers {
		return &InvalidInputError{Field: "createMemberInvite", Reason: fmt.Sprintf(
			"this account has %s and %s, the most it may hold together is %d: remove a member, or wait for an open invite to expire",
			Counted(members, "member", "members"), Counted(invites, "open invite", "open invites"), MaxMembers)}
	}
	return nil
}

// Counted is n with the noun's singular or plural form ("1 delivery",
// "0 deliveries"): the one way the relay's messages and the command line
// count things.
func Counted[N ~int | ~int64 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprint(n) + " " + many
}

// InviteMember opens a one-time link to join the account with role, made
// at now. A full account (invariant 10) invites nobody.
func (a *Account) InviteMember(by, inviteID, codeHash string, role Role, now, expiresAt time.Time) error {
	if err := a.CanInvite(by, now); err != nil {
		return err
	}
	if len(codeHash) != 64 {
		return &InvalidInputError{Field: "code hash", Reason: "must be a hex SHA-256"}
	}
	if role != RoleOwner && role != RoleMember {
		return &InvalidInputError{Field: "role", Reason: "must be OWNER or MEMBER"}
	}
	a.raise(MemberInvited{AccountID: a.id, InviteID: inviteID, CodeHash: codeHash, Role: string(role), By: by,
		ExpiresAt: expiresAt.UTC().Format(time.RFC3339Nano)})
	return nil
}

// errBadMemberInvite is every member invite that cannot be used, in the
// same words, whatever account it belongs to.
var errBadMemberInvite = &InvalidInputError{Field: "code", Reason: "this invite link is unknown, expired or already used: ask for a new one"}

// ErrBadMemberInvite is the refusal of a member invite that cannot be used.
func ErrBadMemberInvite() error { return errBadMemberInvite }

// errAccountFull refuses a join past MaxMembers: an invite made before
// invariant 10 held, into an account already full.
var errAccountFull = &InvalidInputError{Field: "joinAccount", Reason: fmt.Sprintf(
	"this account has %d members, the most it may hold: ask one of its owners to remove a member first", MaxMembers)}

// CanJoin refuses what Join would refuse before the new member's password
// is hashed: an invite that cannot be used, or a full account.
func (a *Account) CanJoin(inviteID string, now time.Time) error {
	inv, ok := a.invites[inviteID]
	if !ok || inv.used || !now.Before(inv.expiresAt) {
		return errBadMemberInvite
	}
	if members, _ := a.seats(now); members >= MaxMembers {
		return errAccountFull
	}
	return nil
}

// Join spends a member invite on a new member (invariants 9 and 10) and
// opens their first session.
func (a *Account) Join(inviteID string, m NewMember, session SessionToken, now time.Time) error {
	if err := a.CanJoin(inviteID, now); err != nil {
		return err
	}
	if err := m.check(); err != nil {
		return err
	}
	inv := a.invites[inviteID]
	a.raise(MemberInviteUsed{AccountID: a.id, InviteID: inviteID, MemberID: m.ID})
	a.raise(MemberJoined{AccountID: a.id, MemberID: m.ID, Login: NormalLogin(m.Login), Role: string(inv.role), PasswordSealed: m.PasswordSealed,
		By: a.inviters[inviteID], InviteID: inviteID})
	a.raise(a.sessionEvent(m.ID, session))
	return nil
}

// owners counts the current owners.
func (a *Account) owners() int {
	n := 0
	for _, m := range a.members {
		if !m.removed && m.role == RoleOwner {
			n++
		}
	}
	return n
}

// errLastOwner protects invariant 7's last owner.
var errLastOwner = &InvalidInputError{Field: "member", Reason: "the account's last owner can be neither removed nor demoted: make another member an owner first"}

// RemoveMember removes a member and revokes every token they hold
// (invariant 8). Another account's member id, or an unknown one, is
// ErrNotFound.
func (a *Account) RemoveMember(by, memberID string) error {
	if err := a.requireOwner(by); err != nil {
		return err
	}
	m, ok := a.members[memberID]
	if !ok || m.removed {
		return ErrNotFound
	}
	if m.role == RoleOwner && a.owners() == 1 {
		return errLastOwner
	}
	a.raise(MemberRemoved{AccountID: a.id, MemberID: memberID, By: by})
	for _, id := range a.tokenOrder {
		if a.tokens[id] && a.tokenMember[id] == memberID {
			a.raise(TokenRevoked{AccountID: a.id, TokenID: id, By: by})
		}
	}
	return nil
}

// ChangePassword gives a member a new password (its sealed hash,
// invariant 6) and ends the member's other sessions: a browser signed in
// with the old password is signed out. keep is the session asking, which
// stays.
func (a *Account) ChangePassword(memberID, sealed, keep string) error {
	m, ok := a.members[memberID]
	if !ok || m.removed {
		return ErrNotFound
	}
	if err := validSealedPassword(sealed); err != nil {
		return err
	}
	a.raise(MemberPasswordChanged{AccountID: a.id, MemberID: memberID, PasswordSealed: sealed})
	for _, id := range a.tokenOrder {
		if a.tokens[id] && a.sessions[id] && a.tokenMember[id] == memberID && id != keep {
			a.raise(TokenRevoked{AccountID: a.id, TokenID: id, By: memberID})
		}
	}
	return nil
}

// ChangeRole gives a member another role; the same role raises nothing.
func (a *Account) ChangeRole(by, memberID string, role Role) error {
	if err := a.requireOwner(by); err != nil {
		return err
	}
	m, ok := a.members[memberID]
	if !ok || m.removed {
		return ErrNotFound
	}
	if role != RoleOwner && role != RoleMember {
		return &InvalidInputError{Field: "role", Reason: "must be OWNER or MEMBER"}
	}
	if m.role == role {
		return nil
	}
	if m.role == RoleOwner && a.owners() == 1 {
		return errLastOwner
	}
	a.raise(MemberRoleChanged{AccountID: a.id, MemberID: memberID, Role: string(role), By: by})
	return nil
}

// LoginClaim is a login's stream: who holds the login now, if anyone.
type LoginClaim struct {
	aggregate
	accountID, memberID string
	held                bool
}

// LoadLoginClaim rebuilds a login's claim from its stream (nil or empty:
// never claimed).
func LoadLoginClaim(events []Event) *LoginClaim {
	c := &LoginClaim{aggregate: newAggregate()}
	for _, e := range events {
		c.apply(e)
		c.loaded()
	}
	return c
}

func (c *LoginClaim) raise(e Event) { c.apply(e); c.changes = append(c.changes, e) }

func (c *LoginClaim) apply(e Event) {
	switch e := e.(type) {
	case LoginClaimed:
		c.accountID, c.memberID, c.held = e.AccountID, e.MemberID, true
	case LoginReleased:
		c.held = false
	}
}

// errLoginTaken refuses a login someone holds. Its words say no more than
// the refusal must (that this login cannot be had), and sign-up and
// joining are rate-limited per client address as sign-in is, which bounds
// how fast logins can be probed (docs/accounts.md).
var errLoginTaken = &InvalidInputError{Field: "login", Reason: "this login is not available on this relay: choose another"}

// Claim takes the login for a member (invariant 5).
func (c *LoginClaim) Claim(accountID, memberID string) error {
	if c.held {
		return errLoginTaken
	}
	c.raise(LoginClaimed{AccountID: accountID, MemberID: memberID})
	return nil
}

// Release frees the login if memberID holds it.
func (c *LoginClaim) Release(memberID string) {
	if c.held && c.memberID == memberID {
		c.raise(LoginReleased{AccountID: c.accountID, MemberID: memberID})
	}
}
