package domain

import (
	"strings"
	"time"

	"github.com/relayhq/relay/domain/duration"
)

// SignupMode says who may create an account on a relay: anyone (open),
// whoever holds an invite an account or the operator made (invite), or
// only the operator (closed: `relay accounts create`).
type SignupMode string

const (
	SignupOpen   SignupMode = "open"
	SignupInvite SignupMode = "invite"
	SignupClosed SignupMode = "closed"
)

// ParseSignupMode reads --signup: open, invite or closed, with the older
// boolean spellings (true: open, false: closed).
func ParseSignupMode(s string) (SignupMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "open", "true", "1", "yes":
		return SignupOpen, nil
	case "invite":
		return SignupInvite, nil
	case "closed", "false", "0", "no":
		return SignupClosed, nil
	}
	return "", &InvalidInputError{Field: "signup", Reason: "must be open, invite or closed (true and false mean open and closed)"}
}

// Invite invariants:
//  1. Its code is stored as a SHA-256 hash only.
//  2. It creates one account at most, before it expires.

// Invite lets one person sign up on a relay whose sign-up is by invite.
type Invite struct {
	aggregate
	id        string
	expiresAt time.Time
	used      bool
}

// InviteLifetime is an invite's default and longest lifetime.
const InviteLifetime = 7 * 24 * time.Hour

// ParseInviteLifetime reads an invite's expiresIn (a sign-up invite's or a
// member invite's): a duration such as 2d or 12h, at most longest (its
// default when absent). It is the whole check of the input, so the API
// refuses a bad one before it takes from the invite rate.
func ParseInviteLifetime(s string, longest time.Duration) (time.Duration, error) {
	d, err := ParseTokenLifetime(s)
	if err != nil {
		return 0, err
	}
	return d, CheckInviteLifetime(d, longest)
}

// CheckInviteLifetime refuses an invite's lifetime over longest.
func CheckInviteLifetime(d, longest time.Duration) error {
	if d > longest {
		return &InvalidInputError{Field: "expiresIn", Reason: "an invite lasts at most " + duration.Format(longest)}
	}
	return nil
}

// CreateInvite makes an invite, by its code's hash; createdBy is the
// inviting account's id, or "" for the operator.
func CreateInvite(id, codeHash, createdBy string, expiresAt time.Time) (*Invite, error) {
	if len(codeHash) != 64 {
		return nil, &InvalidInputError{Field: "code hash", Reason: "must be a hex SHA-256"}
	}
	v := &Invite{aggregate: newAggregate()}
	v.raise(InviteCreated{InviteID: id, CodeHash: codeHash, CreatedBy: createdBy, ExpiresAt: expiresAt.UTC().Format(time.RFC3339Nano)})
	return v, nil
}

// LoadInvite rebuilds an invite from its stream.
func LoadInvite(events []Event) *Invite {
	v := &Invite{aggregate: newAggregate()}
	for _, e := range events {
		v.apply(e)
		v.loaded()
	}
	return v
}

func (v *Invite) raise(e Event) { v.apply(e); v.changes = append(v.changes, e) }

func (v *Invite) apply(e Event) {
	switch e := e.(type) {
	case InviteCreated:
		v.id = e.InviteID
		v.expiresAt, _ = time.Parse(time.RFC3339Nano, e.ExpiresAt)
	case InviteUsed:
		v.used = true
	}
}

// errBadInvite is every invite that cannot be used, in the same words.
var errBadInvite = &InvalidInputError{Field: "invite", Reason: "this invite is unknown, expired or already used: ask for a new one"}

// ErrBadInvite is the refusal of an invite that cannot be used.
func ErrBadInvite() error { return errBadInvite }

// Use spends the invite on the account accountID.
func (v *Invite) Use(accountID string, now time.Time) error {
	if v.used || v.id == "" || !now.Before(v.expiresAt) {
		return errBadInvite
	}
	v.raise(InviteUsed{InviteID: v.id, AccountID: accountID})
	return nil
}
