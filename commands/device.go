package commands

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
	"github.com/relayhq/relay/readmodel"
)

// DeviceCode is what a device that asked to log in is given: its secret
// device code (to poll with), the user code its user types in the console,
// when both expire, and how often it may poll.
type DeviceCode struct {
	DeviceCode string
	UserCode   string // XXXX-XXXX
	ExpiresAt  time.Time
	Lifetime   time.Duration // from now to ExpiresAt
	Interval   time.Duration
}

// newUserCode returns a random user code in its normal form.
func newUserCode() string {
	const n = len(domain.UserCodeAlphabet)
	b := make([]byte, 8)
	out := make([]byte, 8)
	for i := 0; i < 8; {
		_, _ = rand.Read(b[:1])
		if int(b[0]) >= 256/n*n { // unbiased: reject the uneven tail
			continue
		}
		out[i] = domain.UserCodeAlphabet[int(b[0])%n]
		i++
	}
	return string(out)
}

// RequestDeviceCode opens a device code for a device named clientName
// asking from the client network network ("" when unknown) (RFC 8628
// §3.1). Both codes are returned once; only their hashes are recorded.
func (s *Service) RequestDeviceCode(ctx context.Context, clientName, network string) (DeviceCode, error) {
	if err := s.checkPendingDevices(ctx, network); err != nil {
		return DeviceCode{}, err
	}
	random, _ := NewToken()
	deviceCode := "rdc_" + strings.TrimPrefix(random, "rly_") // a device code is no API token: say so
	deviceHash := HashToken(deviceCode)
	userCode := newUserCode()
	id := NewEventID()
	expires := s.now().Add(domain.DeviceCodeLifetime)
	d, err := domain.RequestDeviceCode(id, deviceHash, HashToken(userCode), clientName, network, expires)
	if err != nil {
		return DeviceCode{}, err
	}
	if _, err := s.append(ctx, domain.DeviceStream(id), d.Expected(), domain.Trace{CorrelationID: id}, d.Changes()); err != nil {
		return DeviceCode{}, err
	}
	return DeviceCode{DeviceCode: deviceCode, UserCode: domain.DisplayUserCode(userCode), ExpiresAt: expires, Lifetime: domain.DeviceCodeLifetime, Interval: domain.DevicePollInterval}, nil
}

// pendingDevices counts the device codes waiting for a decision, of the
// relay and of one client network (projections.Accounts).
type pendingDevices interface {
	PendingDeviceCodes(ctx context.Context, now time.Time, most int) (int, error)
	NetworkPendingDeviceCodes(ctx context.Context, network string, now time.Time, most int) (int, error)
}

// checkPendingDevices refuses a new device code while the relay's budget
// of codes waiting for a decision (Config.MaxPendingDeviceCodes) is full,
// or the share of it of the client network asking
// (domain.DeviceCodeNetworkShare; network "" has none of its own): the
// codes are kept in the log for good and anyone may ask for one, so the
// budget bounds what many networks together append, and the share keeps
// a few networks from holding every other's device login refused.
// Codes asked for but not yet in the views may pass it, by their number.
func (s *Service) checkPendingDevices(ctx context.Context, network string) error {
	pv, ok := s.views.(pendingDevices)
	if !ok {
		return nil
	}
	most := s.cfg.MaxPendingDeviceCodes
	if most <= 0 {
		most = domain.MaxPendingDeviceCodes
	}
	now := s.now()
	n, err := pv.PendingDeviceCodes(ctx, now, most)
	if err != nil {
		return err
	}
	if n >= most {
		return &domain.DeviceCodesFullError{Max: most}
	}
	if network == "" {
		return nil
	}
	share := domain.DeviceCodeNetworkShare(most)
	if n, err = pv.NetworkPendingDeviceCodes(ctx, network, now, share); err != nil {
		return err
	}
	if n >= share {
		return &domain.DeviceCodesFullError{Max: most, Network: network, Share: share}
	}
	return nil
}

// errUnknownUserCode is every user code the relay cannot act on in the
// same words, so that guessing learns nothing but "no".
var errUnknownUserCode = &domain.InvalidInputError{Field: "userCode", Reason: "no such code waits for approval: check it, or run `relay login` again for a new one"}

// PendingDevice returns the device code a user code names while it waits
// for a decision (for the console to show what is being approved).
func (s *Service) PendingDevice(ctx context.Context, userCode string) (readmodel.DeviceCode, error) {
	normal := domain.NormalUserCode(userCode)
	if normal == "" {
		return readmodel.DeviceCode{}, &domain.InvalidInputError{Field: "userCode", Reason: "a code is 8 letters, such as BCDF-GHJK"}
	}
	d, err := s.views.DeviceByHash(ctx, HashToken(normal), true)
	if errors.Is(err, domain.ErrNotFound) {
		return readmodel.DeviceCode{}, errUnknownUserCode
	}
	if err != nil {
		return readmodel.DeviceCode{}, err
	}
	switch {
	case !s.now().Before(d.ExpiresAt):
		return readmodel.DeviceCode{}, &domain.InvalidInputError{Field: "userCode", Reason: "this code expired: run `relay login` again for a new one"}
	case d.Status != readmodel.DevicePending:
		return readmodel.DeviceCode{}, &domain.InvalidInputError{Field: "userCode", Reason: "this code was already used"}
	}
	return d, nil
}

// DecideDevice approves (or denies) the device a user code names, for the
// account: once approved, the device's next poll receives a new token of
// the account.
func (s *Service) DecideDevice(ctx context.Context, accountID, memberID, userCode string, approve bool) (readmodel.DeviceCode, error) {
	d, err := s.PendingDevice(ctx, userCode)
	if err != nil {
		return readmodel.DeviceCode{}, err
	}
	err = conflict.Retry(ctx, conflictTries, func(int) error {
		events, err := s.load(ctx, domain.DeviceStream(d.ID))
		if err != nil {
			return err
		}
		agg := domain.LoadDeviceAuthorization(events)
		if approve {
			err = agg.ApproveBy(accountID, memberID, s.now())
		} else {
			err = agg.Deny(accountID, s.now())
		}
		if err != nil {
			return err
		}
		_, err = s.append(ctx, domain.DeviceStream(d.ID), agg.Expected(), domain.Trace{CorrelationID: d.ID}, agg.Changes())
		return err
	})
	if err != nil {
		return readmodel.DeviceCode{}, err
	}
	return s.views.DeviceByHash(ctx, HashToken(domain.NormalUserCode(userCode)), true)
}

// PollDevice is the device's poll (RFC 8628 §3.4): while the code waits it
// is domain.ErrAuthorizationPending (ErrSlowDown when polled more often
// than the interval), ErrAccessDenied once denied, ErrExpiredToken once
// expired or used; once approved, the first poll receives a new token of
// the approver's account named after the device, and the code is used up.
func (s *Service) PollDevice(ctx context.Context, deviceCode string) (readmodel.Account, string, error) {
	d, err := s.views.DeviceByHash(ctx, HashToken(deviceCode), false)
	if errors.Is(err, domain.ErrNotFound) {
		return readmodel.Account{}, "", &domain.InvalidInputError{Field: "deviceCode", Reason: "unknown device code"}
	}
	if err != nil {
		return readmodel.Account{}, "", err
	}
	now := s.now()
	if s.pollTooSoon(d.ID, now) {
		return readmodel.Account{}, "", domain.ErrSlowDown
	}
	switch {
	case d.Status == readmodel.DeviceDenied:
		return readmodel.Account{}, "", domain.ErrAccessDenied
	case d.Status == readmodel.DeviceRedeemed || !now.Before(d.ExpiresAt):
		return readmodel.Account{}, "", domain.ErrExpiredToken
	case d.Status == readmodel.DevicePending:
		return readmodel.Account{}, "", domain.ErrAuthorizationPending
	}
	// Approved: use the code up first (its stream's revision makes the
	// redemption single), then issue the token it was redeemed for.
	tokenID := NewEventID()
	var accountID, memberID, name string
	err = conflict.Retry(ctx, conflictTries, func(int) error {
		events, err := s.load(ctx, domain.DeviceStream(d.ID))
		if err != nil {
			return err
		}
		agg := domain.LoadDeviceAuthorization(events)
		if err := agg.Redeem(tokenID, now); err != nil {
			return err
		}
		accountID, memberID, name = agg.AccountID(), agg.MemberID(), agg.ClientName()
		_, err = s.append(ctx, domain.DeviceStream(d.ID), agg.Expected(), domain.Trace{CorrelationID: d.ID}, agg.Changes())
		return err
	})
	if err != nil {
		return readmodel.Account{}, "", err
	}
	_, token, err := s.issueToken(ctx, accountID, tokenID, name, 0, d.ID, memberID, "")
	if err != nil {
		return readmodel.Account{}, "", err
	}
	acc, err := s.views.Account(ctx, accountID)
	return acc, token, err
}

// pollTooSoon notes a poll of a device code and reports whether it came
// sooner than the interval allows (a second early is let through: the
// device's clock and the network are not exact).
func (s *Service) pollTooSoon(id string, now time.Time) bool {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	last, seen := s.polls[id]
	s.polls[id] = now
	// Forget polls of codes long expired once the map has doubled since the
	// last sweep (at least 10 000): each sweep is paid for by as many new
	// codes, where a sweep at every poll past 10 000 live codes cost every
	// poll a walk of them all.
	if len(s.polls) > max(10_000, 2*s.pollsKept) {
		for k, at := range s.polls {
			if now.Sub(at) > domain.DeviceCodeLifetime {
				delete(s.polls, k)
			}
		}
		s.pollsKept = len(s.polls)
		s.pollSweeps++
	}
	return seen && now.Sub(last) < domain.DevicePollInterval-time.Second
}
