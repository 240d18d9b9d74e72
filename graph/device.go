package graph

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/readmodel"
)

// DevicePath is the console page where a user approves a device code.
const DevicePath = "/device"

// DeviceDecisionRate bounds what one account may try with user codes
// (look one up, approve, deny): a few codes a minute is all a person
// types, and a user code must not be guessable by trying many.
var DeviceDecisionRate = ratelimit.Rate{N: 10, Per: time.Minute, Burst: 10}

// maxDeviceDeciders bounds the per-account buckets of DeviceDecisionRate.
const maxDeviceDeciders = 100_000

func (r *Resolver) requestDeviceCode(ctx context.Context, clientName string) (*model.DeviceCode, error) {
	// Input first: a malformed name spends none of the address's rate.
	if err := domain.ValidateClientName(clientName); err != nil {
		return nil, err
	}
	if err := r.limitAnonymous(ctx); err != nil {
		return nil, err
	}
	d, err := r.Service.RequestDeviceCode(ctx, clientName, clientNetwork(ctx))
	if err != nil {
		return nil, err
	}
	return &model.DeviceCode{DeviceCode: d.DeviceCode, UserCode: d.UserCode, VerificationPath: DevicePath, VerificationURL: r.consoleLink(DevicePath),
		ExpiresIn: int(d.Lifetime.Seconds()), Interval: int(d.Interval.Seconds())}, nil
}

func (r *Resolver) pollDeviceCode(ctx context.Context, deviceCode string) (*model.DeviceLogin, error) {
	acc, token, err := r.Service.PollDevice(ctx, deviceCode)
	if err != nil {
		return nil, err
	}
	return &model.DeviceLogin{Account: &model.Account{ID: acc.ID, Name: acc.Name}, Token: token}, nil
}

// deviceDecider is the signed-in account that may try one more user code.
func (r *Resolver) deviceDecider(ctx context.Context) (readmodel.Account, error) {
	acc, err := r.account(ctx)
	if err != nil {
		return readmodel.Account{}, err
	}
	r.deviceOnce.Do(func() { r.deviceLimit = ratelimit.NewKeyed(DeviceDecisionRate, maxDeviceDeciders) })
	if ok, retry := r.deviceLimit.Allow(acc.ID, time.Now()); !ok {
		return readmodel.Account{}, &RateLimitedError{RetryAfter: retry}
	}
	return acc, nil
}

func (r *Resolver) deviceAuthorization(ctx context.Context, userCode string) (*model.DeviceAuthorization, error) {
	if _, err := r.deviceDecider(ctx); err != nil {
		return nil, err
	}
	d, err := r.Service.PendingDevice(ctx, userCode)
	if err != nil {
		return nil, err
	}
	return deviceModel(d), nil
}

func (r *Resolver) decideDevice(ctx context.Context, userCode string, approve bool) (*model.DeviceAuthorization, error) {
	acc, err := r.deviceDecider(ctx)
	if err != nil {
		return nil, err
	}
	_, tok, _ := r.credential(ctx)
	d, err := r.Service.DecideDevice(ctx, acc.ID, tok.MemberID, userCode, approve)
	if err != nil {
		return nil, err
	}
	return deviceModel(d), nil
}

func deviceModel(d readmodel.DeviceCode) *model.DeviceAuthorization {
	return &model.DeviceAuthorization{ClientName: d.ClientName, RequestedAt: d.CreatedAt, ExpiresAt: d.ExpiresAt, Status: d.Status}
}

// InvitePath is the console page where an invite's holder signs up.
const InvitePath = "/?invite="

// Bounds of the sign-up invites one account makes (the operator's, made
// with the admin token, are not bounded): each invite lets one stranger
// create an account, so an account holds at most MaxOpenInvites unused
// and unexpired at once, and makes them no faster than DefaultInviteRate.
const MaxOpenInvites = 20

// DefaultInviteRate: see MaxOpenInvites (Resolver.InviteRate).
var DefaultInviteRate = ratelimit.Rate{N: 10, Per: time.Hour, Burst: 10}

// maxInviters bounds the per-account buckets of the invite rate.
const maxInviters = 100_000

// limitInvites refuses an account's invite past MaxOpenInvites or
// the invite rate with RATE_LIMITED, saying which and when to try again.
func (r *Resolver) limitInvites(ctx context.Context, accountID string) error {
	now := time.Now()
	open, first, err := r.Views.OpenInvites(ctx, accountID, now)
	if err != nil {
		return err
	}
	if open >= MaxOpenInvites {
		return &RateLimitedError{RetryAfter: first.Sub(now),
			Reason: fmt.Sprintf("this account has %d open invites, the most it may hold: one must be used or expire first", open)}
	}
	return r.limitInviteRate(accountID, "", now)
}

// limitInviteRate takes one of the invite rate's tokens of the account's
// bucket of a kind ("" sign-up invites, memberInviteKind member invites).
func (r *Resolver) limitInviteRate(accountID, kind string, now time.Time) error {
	rate := r.InviteRate
	if rate.Off() {
		rate = DefaultInviteRate
	}
	r.inviteOnce.Do(func() { r.inviteLimit = ratelimit.NewKeyed(rate, maxInviters) })
	if ok, retry := r.inviteLimit.Allow(kind+accountID, now); !ok {
		return &RateLimitedError{RetryAfter: retry, Reason: fmt.Sprintf("this account made %sinvites as fast as it may (%s)", kind, rate)}
	}
	return nil
}

// memberInviteKind keys an account's member invites apart from its
// sign-up invites in the invite rate's buckets. Each member invite is
// appended to the account's stream, which every command of the account
// reads whole: unrated, 3 000 of them took 49 s and made a createToken
// read 6 pages of it instead of 1.
const memberInviteKind = "member "

func (r *Resolver) createInvite(ctx context.Context, expiresIn *string) (*model.Invite, error) {
	createdBy := ""
	admin := r.isAdmin(ctx)
	if !admin {
		// Owners only: an invite brings a stranger onto the relay.
		acc, _, err := r.owner(ctx)
		if err != nil {
			return nil, err
		}
		createdBy = acc.ID
	}
	// The input is checked before the rate is taken from: a refused invite
	// does not spend one of the hour's.
	var lifetime time.Duration
	if expiresIn != nil {
		var err error
		if lifetime, err = domain.ParseInviteLifetime(*expiresIn, domain.InviteLifetime); err != nil {
			return nil, err
		}
	}
	if !admin {
		if err := r.limitInvites(ctx, createdBy); err != nil {
			return nil, err
		}
	}
	code, expires, err := r.Service.CreateInvite(ctx, createdBy, lifetime)
	if err != nil {
		return nil, err
	}
	return &model.Invite{Code: code, Path: InvitePath + code, URL: r.consoleLink(InvitePath + code), ExpiresAt: expires}, nil
}

// consoleLink is the whole URL of a console page when the console has a
// host of its own, or nil: the client puts the path on the URL it uses.
func (r *Resolver) consoleLink(path string) *string {
	if r.ConsoleURL == "" {
		return nil
	}
	u := strings.TrimSuffix(r.ConsoleURL, "/") + path
	return &u
}
