package domain

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Device authorization (RFC 8628): a program without a browser (`relay
// login`) asks for a device code, shows its user the short user code, and
// polls until a signed-in person approves or denies that code in the
// console. The approval gives the program a new token of the approver's
// account, named after the program's machine.
//
// DeviceAuthorization invariants:
//  1. Both codes are stored as SHA-256 hashes only.
//  2. A code is decided once (approved or denied) and, once approved,
//     redeemed for a token once: a code is single-use.
//  3. Nothing happens to a code past its expiry but reading it.

// The polling outcomes of RFC 8628 §3.5, as errors.
var (
	ErrAuthorizationPending = errors.New("authorization pending: the code is not approved yet")
	ErrSlowDown             = errors.New("slow down: poll less often")
	ErrExpiredToken         = errors.New("the device code expired or was already used: start again")
	ErrAccessDenied         = errors.New("the request was denied")
)

// DeviceCodeLifetime is how long a device code may be approved and redeemed.
const DeviceCodeLifetime = 10 * time.Minute

// DevicePollInterval is the least time between two polls of one code.
const DevicePollInterval = 5 * time.Second

// MaxPendingDeviceCodes is how many device codes may wait for a decision
// at once on the relay (commands.Config.MaxPendingDeviceCodes when set).
// requestDeviceCode takes no token, and its event is kept for good, so
// clients of many networks, each within --anonymous-rate, could append
// without end: with at most this many waiting, each for
// DeviceCodeLifetime, the relay appends at most 6 000 an hour (~1.8 MB),
// however many networks ask.
const MaxPendingDeviceCodes = 1000

// DeviceCodeNetworkShare is how many of most device codes waiting at once
// one client network (IPv4 /24, IPv6 /48) may hold: a sixteenth
// (GuestNetworkShares, 62 of MaxPendingDeviceCodes), at least one. Without
// it the clients of a few networks filled the relay's budget and kept
// every other team's device login refused for DeviceCodeLifetime.
func DeviceCodeNetworkShare(most int) int { return max(1, most/GuestNetworkShares) }

// DeviceCodesFullError refuses a device code while the relay's budget of
// codes waiting for a decision is full, or the share of it of the client
// network asking (Network, Share); the oldest expires within
// DeviceCodeLifetime. It matches ErrStorageQuota (QUOTA_EXCEEDED).
type DeviceCodesFullError struct {
	Max     int
	Network string // "" when the whole budget is full
	Share   int
}

func (e *DeviceCodesFullError) Error() string {
	if e.Network != "" {
		return fmt.Sprintf("device logins asked for from your network (%s) already wait for approval, its share of this relay's (%d of the %d it keeps waiting): try again in a few minutes, or sign in with a token (relay login --token)",
			e.Network, e.Share, e.Max)
	}
	return fmt.Sprintf("%d device logins already wait for approval on this relay, the most it keeps waiting: try again in a few minutes, or sign in with a token (relay login --token)", e.Max)
}

// Is makes errors.Is(err, ErrStorageQuota) true: a budget is used up.
func (e *DeviceCodesFullError) Is(target error) bool { return target == ErrStorageQuota }

// UserCodeAlphabet holds no vowels (no words) and no look-alike digits, as
// RFC 8628 §6.1 suggests; eight of them give 20^8 ≈ 2.6·10^10 codes.
const UserCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// NormalUserCode is a user code as typed (any case, with or without the
// dash or spaces) in its one stored form, or "" when it cannot be one.
func NormalUserCode(s string) string {
	var b strings.Builder
	for _, c := range strings.ToUpper(s) {
		switch {
		case c == '-' || c == ' ':
		case strings.ContainsRune(UserCodeAlphabet, c):
			b.WriteRune(c)
		default:
			return ""
		}
	}
	if b.Len() != 8 {
		return ""
	}
	return b.String()
}

// DisplayUserCode is a normal user code as shown: XXXX-XXXX.
func DisplayUserCode(normal string) string {
	if len(normal) != 8 {
		return normal
	}
	return normal[:4] + "-" + normal[4:]
}

// ValidateClientName checks the name a device gives itself (its hostname),
// which names the token it receives.
func ValidateClientName(name string) error {
	if err := ValidateTokenName(name); err != nil {
		return &InvalidInputError{Field: "clientName", Reason: "must be 1 to 100 characters on one line"}
	}
	return nil
}

// DeviceAuthorization is one device code, from request to redemption.
type DeviceAuthorization struct {
	aggregate
	id        string
	expiresAt time.Time
	decided   bool
	approved  bool
	redeemed  bool
	accountID string
	memberID  string
	name      string
}

// RequestDeviceCode opens a device code, stored by the hashes of its two
// codes, for a device asking from the client network network ("" when
// unknown), whose share of the codes waiting it counts in.
func RequestDeviceCode(id, deviceCodeHash, userCodeHash, clientName, network string, expiresAt time.Time) (*DeviceAuthorization, error) {
	if len(deviceCodeHash) != 64 || len(userCodeHash) != 64 {
		return nil, &InvalidInputError{Field: "code hash", Reason: "must be a hex SHA-256"}
	}
	if err := ValidateClientName(clientName); err != nil {
		return nil, err
	}
	d := &DeviceAuthorization{aggregate: newAggregate()}
	d.raise(DeviceCodeRequested{DeviceID: id, DeviceCodeHash: deviceCodeHash, UserCodeHash: userCodeHash,
		ClientName: strings.TrimSpace(clientName), ExpiresAt: expiresAt.UTC().Format(time.RFC3339Nano), Network: network})
	return d, nil
}

// LoadDeviceAuthorization rebuilds a device code from its stream.
func LoadDeviceAuthorization(events []Event) *DeviceAuthorization {
	d := &DeviceAuthorization{aggregate: newAggregate()}
	for _, e := range events {
		d.apply(e)
		d.loaded()
	}
	return d
}

func (d *DeviceAuthorization) raise(e Event) { d.apply(e); d.changes = append(d.changes, e) }

func (d *DeviceAuthorization) apply(e Event) {
	switch e := e.(type) {
	case DeviceCodeRequested:
		d.id, d.name = e.DeviceID, e.ClientName
		d.expiresAt, _ = time.Parse(time.RFC3339Nano, e.ExpiresAt)
	case DeviceApproved:
		d.decided, d.approved, d.accountID, d.memberID = true, true, e.AccountID, e.MemberID
	case DeviceDenied:
		d.decided, d.accountID = true, e.AccountID
	case DeviceRedeemed:
		d.redeemed = true
	}
}

// ClientName and AccountID describe the code (AccountID once decided).
func (d *DeviceAuthorization) ClientName() string { return d.name }
func (d *DeviceAuthorization) AccountID() string  { return d.accountID }

// MemberID is the member who approved the code ("" for none).
func (d *DeviceAuthorization) MemberID() string { return d.memberID }

// decide approves or denies a pending code for an account.
func (d *DeviceAuthorization) decide(accountID, memberID string, approve bool, now time.Time) error {
	if !now.Before(d.expiresAt) {
		return &InvalidInputError{Field: "userCode", Reason: "this code expired: run `relay login` again for a new one"}
	}
	if d.decided {
		return &InvalidInputError{Field: "userCode", Reason: "this code was already used"}
	}
	if approve {
		d.raise(DeviceApproved{DeviceID: d.id, AccountID: accountID, MemberID: memberID})
	} else {
		d.raise(DeviceDenied{DeviceID: d.id, AccountID: accountID})
	}
	return nil
}

// Approve lets the device have a token of the account.
func (d *DeviceAuthorization) Approve(accountID string, now time.Time) error {
	return d.decide(accountID, "", true, now)
}

// ApproveBy lets the device have a token of the account acting for the
// member memberID.
func (d *DeviceAuthorization) ApproveBy(accountID, memberID string, now time.Time) error {
	return d.decide(accountID, memberID, true, now)
}

// Deny refuses the device.
func (d *DeviceAuthorization) Deny(accountID string, now time.Time) error {
	return d.decide(accountID, "", false, now)
}

// Redeem turns an approved code into the token tokenID, once; before that
// it says how the poll stands (RFC 8628 §3.5).
func (d *DeviceAuthorization) Redeem(tokenID string, now time.Time) error {
	switch {
	case d.redeemed:
		return ErrExpiredToken
	case d.decided && !d.approved:
		return ErrAccessDenied
	case !now.Before(d.expiresAt):
		return ErrExpiredToken
	case !d.decided:
		return ErrAuthorizationPending
	}
	d.raise(DeviceRedeemed{DeviceID: d.id, AccountID: d.accountID, TokenID: tokenID})
	return nil
}
