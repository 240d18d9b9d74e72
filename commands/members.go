package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/readmodel"
)

// SessionLifetime is how long a browser stays signed in after signing in
// with a password: a working week and a weekend, after which the person
// signs in again.
const SessionLifetime = 7 * 24 * time.Hour

// Session is a member signed in: the session's token (for the cookie,
// never stored) and when it expires.
type Session struct {
	Account   readmodel.Account
	Member    readmodel.Member
	Token     string
	ExpiresAt time.Time
}

// errBadCredentials is every refused sign-in in the same words, whether
// the login is unknown or the password wrong.
var errBadCredentials = fmt.Errorf("%w: wrong login or password", domain.ErrUnauthenticated)

// newSession makes a session token for a new sign-in.
func (s *Service) newSession() (domain.SessionToken, string) {
	token, hash := NewToken()
	return domain.SessionToken{ID: NewEventID(), Hash: hash, ExpiresAt: s.now().Add(SessionLifetime)}, token
}

// newMember checks a login and password, hashes the password and seals
// the hash.
func (s *Service) newMember(ctx context.Context, login, password string) (domain.NewMember, error) {
	if err := domain.ValidateLogin(login); err != nil {
		return domain.NewMember{}, err
	}
	if err := domain.ValidatePassword(password); err != nil {
		return domain.NewMember{}, err
	}
	sealed, err := s.sealedPassword(ctx, password)
	if err != nil {
		return domain.NewMember{}, err
	}
	return domain.NewMember{ID: NewEventID(), Login: login, PasswordSealed: sealed}, nil
}

// sealedPassword is a password's argon2id hash sealed under the relay's
// secrets key (domain invariant 6): the log never holds the hash in plain,
// so nobody who reads it (an owner through the API, an export) can guess
// at the password offline. Without a key nothing is hashed: UNAVAILABLE.
func (s *Service) sealedPassword(ctx context.Context, password string) (string, error) {
	key := s.cfg.Secrets
	if key == nil {
		return "", fmt.Errorf("%w: this relay has no secrets key to keep a password with", domain.ErrUnavailable)
	}
	hash, err := HashPassword(ctx, password)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	sealed, err := key.Seal(hash)
	if err != nil {
		return "", fmt.Errorf("seal password hash: %w", err)
	}
	return sealed, nil
}

// passwordHash is the argon2id hash a member's password is checked
// against: the views keep it as the log does, sealed (opened here), or in
// plain from events written before hashes were sealed. A hash sealed under
// another secrets key (a node given a key of its own) cannot be checked:
// the log says why, with both key IDs; the person is told sign-in is
// unavailable, not that their password is wrong.
func (s *Service) passwordHash(m readmodel.Member) (string, error) {
	stored := m.PasswordHash
	if strings.HasPrefix(stored, "$argon2id$") {
		return stored, nil
	}
	key := s.cfg.Secrets
	if key == nil {
		return "", fmt.Errorf("%w: this relay has no secrets key to check a password with", domain.ErrUnavailable)
	}
	hash, err := key.Open(stored)
	if err != nil {
		s.log.Error("cannot check a member's password", "account_id", m.AccountID, "member_id", m.ID, "error", err)
		return "", fmt.Errorf("%w: signing in with a password is unavailable on this relay (its log says why)", domain.ErrUnavailable)
	}
	return hash, nil
}

// claimLogin takes a login on the relay for a member; its stream's
// expected revision keeps it unique when two nodes race.
func (s *Service) claimLogin(ctx context.Context, accountID, memberID, login string) error {
	stream := domain.LoginStream(domain.LoginKeyHash(login))
	return conflict.Retry(ctx, conflictTries, func(int) error {
		events, err := s.load(ctx, stream)
		if err != nil && !errors.Is(err, domain.ErrNotFound) {
			return err
		}
		c := domain.LoadLoginClaim(events)
		if err := c.Claim(accountID, memberID); err != nil {
			return err
		}
		_, err = s.append(ctx, stream, c.Expected(), domain.Trace{CorrelationID: accountID}, c.Changes())
		return err
	})
}

// releaseLogin frees a login its member no longer holds (removed, or the
// join that claimed it failed). A failure is logged: the login then stays
// taken, which refuses nobody access to anything they had.
func (s *Service) releaseLogin(ctx context.Context, accountID, memberID, login string) {
	stream := domain.LoginStream(domain.LoginKeyHash(login))
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		events, err := s.load(ctx, stream)
		if err != nil {
			return err
		}
		c := domain.LoadLoginClaim(events)
		c.Release(memberID)
		_, err = s.append(ctx, stream, c.Expected(), domain.Trace{CorrelationID: accountID}, c.Changes())
		return err
	})
	if err != nil {
		s.log.WarnContext(ctx, "release login", "account", accountID, "member_id", memberID, "error", err)
	}
}

// session reads back what a sign-in made.
func (s *Service) session(ctx context.Context, accountID, memberID, token string, expires time.Time) (Session, error) {
	acc, err := s.views.Account(ctx, accountID)
	if err != nil {
		return Session{}, err
	}
	m, err := s.views.Member(ctx, accountID, memberID)
	if err != nil {
		return Session{}, err
	}
	return Session{Account: acc, Member: m, Token: token, ExpiresAt: expires}, nil
}

// SignUpWithPassword creates an account with its first owner, who signs
// in at once. Sign-up modes, network and the storage for sign-ups apply
// as to SignUp.
func (s *Service) SignUpWithPassword(ctx context.Context, name, login, password, invite, network string) (Session, error) {
	if err := s.checkDisk(diskreserve.Low); err != nil {
		return Session{}, err
	}
	mode := s.signupMode()
	switch {
	case mode == domain.SignupClosed:
		return Session{}, &domain.InvalidInputError{Field: "signUp", Reason: "sign-up is closed on this relay; ask its operator for a token"}
	case mode == domain.SignupInvite && strings.TrimSpace(invite) == "":
		return Session{}, &domain.InvalidInputError{Field: "invite", Reason: "sign-up on this relay is by invite: ask an account holder or the operator for one"}
	}
	from := domain.AccountFrom{Origin: domain.AccountOriginInvite}
	if mode == domain.SignupOpen {
		if err := s.checkSignupStorage(network); err != nil {
			return Session{}, err
		}
		from = domain.AccountFrom{Origin: domain.AccountOriginOpen, Network: network}
	}
	owner, err := s.newMember(ctx, login, password)
	if err != nil {
		return Session{}, err
	}
	id := NewEventID()
	sess, token := s.newSession()
	a, err := domain.SignUpOwner(id, name, owner, sess, from)
	if err != nil {
		return Session{}, err
	}
	if err := s.claimLogin(ctx, id, owner.ID, login); err != nil {
		return Session{}, err
	}
	if mode == domain.SignupInvite {
		if err := s.spendInvite(ctx, id, invite); err != nil {
			s.releaseLogin(ctx, id, owner.ID, login)
			return Session{}, err
		}
	}
	if _, err := s.append(ctx, domain.AccountStream(id), a.Expected(), domain.Trace{CorrelationID: id}, a.Changes()); err != nil {
		s.releaseLogin(ctx, id, owner.ID, login)
		return Session{}, err
	}
	return s.session(ctx, id, owner.ID, token, sess.ExpiresAt)
}

// SignIn checks a login and password and opens a session. An unknown
// login and a wrong password are refused alike, after the same argon2
// work.
func (s *Service) SignIn(ctx context.Context, login, password string) (Session, error) {
	if len(password) > domain.MaxPasswordBytes || len(login) > 400 {
		return Session{}, errBadCredentials
	}
	m, err := s.views.MemberByLogin(ctx, domain.LoginKey(login))
	switch {
	case errors.Is(err, domain.ErrNotFound):
		if _, err := VerifyPassword(ctx, dummyHash(), password); err != nil {
			return Session{}, err
		}
		return Session{}, errBadCredentials
	case err != nil:
		return Session{}, err
	}
	hash, err := s.passwordHash(m)
	if err != nil {
		return Session{}, err
	}
	ok, err := VerifyPassword(ctx, hash, password)
	if err != nil {
		return Session{}, err
	}
	if !ok {
		return Session{}, errBadCredentials
	}
	tok, token, err := s.issueToken(ctx, m.AccountID, NewEventID(), "browser session", SessionLifetime, m.AccountID, m.ID, domain.TokenKindSession)
	if err != nil {
		return Session{}, err
	}
	return s.session(ctx, m.AccountID, m.ID, token, tok.ExpiresAt)
}

// SetUpSignIn gives an account without members (made before them, or by
// `relay login --signup`) its first owner, who signs in at once.
func (s *Service) SetUpSignIn(ctx context.Context, accountID, login, password string) (Session, error) {
	a, err := s.loadAccount(ctx, accountID)
	if err != nil {
		return Session{}, err
	}
	if a.HasMembers() { // before a password is hashed and the login claimed for nothing
		return Session{}, a.SetUpOwner(domain.NewMember{}, domain.SessionToken{})
	}
	owner, err := s.newMember(ctx, login, password)
	if err != nil {
		return Session{}, err
	}
	if err := s.claimLogin(ctx, accountID, owner.ID, login); err != nil {
		return Session{}, err
	}
	sess, token := s.newSession()
	err = conflict.Retry(ctx, conflictTries, func(int) error {
		a, err := s.loadAccount(ctx, accountID)
		if err != nil {
			return err
		}
		if err := a.SetUpOwner(owner, sess); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.AccountStream(accountID), a.Expected(), domain.Trace{CorrelationID: accountID}, a.Changes())
		return err
	})
	if err != nil {
		s.releaseLogin(ctx, accountID, owner.ID, login)
		return Session{}, err
	}
	return s.session(ctx, accountID, owner.ID, token, sess.ExpiresAt)
}

// CanInviteMember refuses what InviteMember would refuse of the member by
// now, whatever the invite: someone not an owner of the account, or a full
// account. A caller checks it before it spends anything on the invite (the
// invite rate); InviteMember decides again at the append.
func (s *Service) CanInviteMember(ctx context.Context, accountID, by string) error {
	a, err := s.loadAccount(ctx, accountID)
	if err != nil {
		return fmt.Errorf("read the account: %w", err)
	}
	return a.CanInvite(by, s.now())
}

// InviteMember makes a one-time link to join the account with role,
// valid for lifetime (at most domain.MemberInviteLifetime; 0: that long).
// by is the inviting member ("" a token without one). The code is
// returned once; only its hash is recorded.
func (s *Service) InviteMember(ctx context.Context, accountID, by string, role domain.Role, lifetime time.Duration) (string, time.Time, error) {
	if lifetime <= 0 {
		lifetime = domain.MemberInviteLifetime
	}
	if err := domain.CheckInviteLifetime(lifetime, domain.MemberInviteLifetime); err != nil {
		return "", time.Time{}, err
	}
	random, _ := NewToken()
	code := "rjn_" + strings.TrimPrefix(random, "rly_")
	id := NewEventID()
	now := s.now()
	expires := now.Add(lifetime)
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		a, err := s.loadAccount(ctx, accountID)
		if err != nil {
			return err
		}
		if err := a.InviteMember(by, id, HashToken(code), role, now, expires); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.AccountStream(accountID), a.Expected(), domain.Trace{CorrelationID: accountID}, a.Changes())
		return err
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return code, expires, nil
}

// InvitePreview is what the join page shows before anyone joins: the
// account a member invite leads to, and the role.
type InvitePreview struct {
	AccountName string
	Role        domain.Role
	ExpiresAt   time.Time
}

// PreviewMemberInvite reads what an unused, unexpired member invite leads
// to; any other code is domain.ErrBadMemberInvite, as JoinAccount says.
func (s *Service) PreviewMemberInvite(ctx context.Context, code string) (InvitePreview, error) {
	inv, err := s.views.MemberInviteByHash(ctx, HashToken(strings.TrimSpace(code)))
	if errors.Is(err, domain.ErrNotFound) {
		return InvitePreview{}, domain.ErrBadMemberInvite()
	}
	if err != nil {
		return InvitePreview{}, err
	}
	if inv.UsedBy != "" || !s.now().Before(inv.ExpiresAt) {
		return InvitePreview{}, domain.ErrBadMemberInvite()
	}
	acc, err := s.views.Account(ctx, inv.AccountID)
	if err != nil {
		return InvitePreview{}, fmt.Errorf("read the invite's account: %w", err)
	}
	return InvitePreview{AccountName: acc.Name, Role: domain.Role(inv.Role), ExpiresAt: inv.ExpiresAt}, nil
}

// JoinAccount spends a member invite: the person becomes a member of the
// invite's account with its role, and signs in. Unknown, expired and used
// codes are refused in the same words.
func (s *Service) JoinAccount(ctx context.Context, code, login, password string) (Session, error) {
	inv, err := s.views.MemberInviteByHash(ctx, HashToken(strings.TrimSpace(code)))
	if errors.Is(err, domain.ErrNotFound) {
		return Session{}, domain.ErrBadMemberInvite()
	}
	if err != nil {
		return Session{}, err
	}
	if inv.UsedBy != "" || !s.now().Before(inv.ExpiresAt) { // before hashing and claiming for nothing
		return Session{}, domain.ErrBadMemberInvite()
	}
	// A full account too: Join decides again at the append.
	a, err := s.loadAccount(ctx, inv.AccountID)
	if err != nil {
		return Session{}, fmt.Errorf("read the invite's account: %w", err)
	}
	if err := a.CanJoin(inv.ID, s.now()); err != nil {
		return Session{}, err
	}
	m, err := s.newMember(ctx, login, password)
	if err != nil {
		return Session{}, err
	}
	if err := s.claimLogin(ctx, inv.AccountID, m.ID, login); err != nil {
		return Session{}, err
	}
	sess, token := s.newSession()
	err = conflict.Retry(ctx, conflictTries, func(int) error {
		a, err := s.loadAccount(ctx, inv.AccountID)
		if err != nil {
			return err
		}
		if err := a.Join(inv.ID, m, sess, s.now()); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.AccountStream(inv.AccountID), a.Expected(), domain.Trace{CorrelationID: inv.AccountID}, a.Changes())
		return err
	})
	if err != nil {
		s.releaseLogin(ctx, inv.AccountID, m.ID, login)
		return Session{}, err
	}
	return s.session(ctx, inv.AccountID, m.ID, token, sess.ExpiresAt)
}

// RemoveMember removes a member of the account: their tokens and sessions
// are revoked in the same append (so every node refuses them and closes
// their sockets), and their login is freed. Another account's member id is
// ErrNotFound, exactly like an unknown one.
func (s *Service) RemoveMember(ctx context.Context, accountID, by, memberID string) error {
	m, err := s.views.Member(ctx, accountID, memberID)
	if err != nil {
		return err
	}
	err = conflict.Retry(ctx, conflictTries, func(int) error {
		a, err := s.loadAccount(ctx, accountID)
		if err != nil {
			return err
		}
		if err := a.RemoveMember(by, memberID); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.AccountStream(accountID), a.Expected(), domain.Trace{CorrelationID: accountID}, a.Changes())
		return err
	})
	if err != nil {
		return err
	}
	s.releaseLogin(ctx, accountID, memberID, m.Login)
	return nil
}

// ChangePassword gives a member a new password once their current one is
// checked, and ends their other sessions (keep, the session asking, stays;
// "" when asked with an API token). A wrong current password is refused
// like a wrong sign-in, after the same argon2 work.
func (s *Service) ChangePassword(ctx context.Context, accountID, memberID, current, next, keep string) error {
	if err := domain.ValidateNewPassword(next); err != nil {
		return err
	}
	if len(current) > domain.MaxPasswordBytes {
		return errWrongCurrentPassword
	}
	m, err := s.views.Member(ctx, accountID, memberID)
	if err != nil {
		return err
	}
	hash, err := s.passwordHash(m)
	if err != nil {
		return err
	}
	ok, err := VerifyPassword(ctx, hash, current)
	if err != nil {
		return err
	}
	if !ok {
		return errWrongCurrentPassword
	}
	sealed, err := s.sealedPassword(ctx, next)
	if err != nil {
		return err
	}
	return conflict.Retry(ctx, conflictTries, func(int) error {
		a, err := s.loadAccount(ctx, accountID)
		if err != nil {
			return err
		}
		if err := a.ChangePassword(memberID, sealed, keep); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.AccountStream(accountID), a.Expected(), domain.Trace{CorrelationID: accountID}, a.Changes())
		return err
	})
}

var errWrongCurrentPassword = &domain.InvalidInputError{Field: "currentPassword", Reason: "is not your current password"}

// ChangeMemberRole gives a member of the account another role.
func (s *Service) ChangeMemberRole(ctx context.Context, accountID, by, memberID string, role domain.Role) (readmodel.Member, error) {
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		a, err := s.loadAccount(ctx, accountID)
		if err != nil {
			return err
		}
		if err := a.ChangeRole(by, memberID, role); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.AccountStream(accountID), a.Expected(), domain.Trace{CorrelationID: accountID}, a.Changes())
		return err
	})
	if err != nil {
		return readmodel.Member{}, err
	}
	return s.views.Member(ctx, accountID, memberID)
}

// spendInvite uses a sign-up invite for the account accountID (its
// stream's revision makes that single).
func (s *Service) spendInvite(ctx context.Context, accountID, invite string) error {
	inviteID, err := s.views.InviteByHash(ctx, HashToken(strings.TrimSpace(invite)))
	if errors.Is(err, domain.ErrNotFound) {
		return domain.ErrBadInvite()
	}
	if err != nil {
		return err
	}
	return conflict.Retry(ctx, conflictTries, func(int) error {
		events, err := s.load(ctx, domain.InviteStream(inviteID))
		if err != nil {
			return err
		}
		v := domain.LoadInvite(events)
		if err := v.Use(accountID, s.now()); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.InviteStream(inviteID), v.Expected(), domain.Trace{CorrelationID: accountID}, v.Changes())
		return err
	})
}
