package domain

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Quota invariants (the operator's override of an account's limits):
//  1. StorageBytes is -1 (the relay's default), 0 (unlimited) or positive.
//  2. Only an existing account has a quota.
//  3. Setting the quota it already has raises nothing.

// QuotaDefault in AccountQuotaSet.StorageBytes means the relay's default.
const QuotaDefault = -1

// SetQuota records the operator's override of the account's quota.
// storage follows AccountQuotaSet.StorageBytes; rate and apiCost are
// already checked by the caller (their format belongs to the rate limiter,
// not the domain).
func (a *Account) SetQuota(storage int64, rate, apiCost string) error {
	if a.id == "" {
		return ErrNotFound
	}
	if storage < QuotaDefault {
		return &InvalidInputError{Field: "storage", Reason: "must be a size such as 5GiB, 0 or off for unlimited, or default"}
	}
	if a.quotaSet && a.quota.StorageBytes == storage && a.quota.Rate == rate && a.quota.APICost == apiCost {
		return nil
	}
	a.raise(AccountQuotaSet{AccountID: a.id, StorageBytes: storage, Rate: rate, APICost: apiCost})
	return nil
}

// Quota is the account's override; ok is false when none was ever set.
func (a *Account) Quota() (q AccountQuotaSet, ok bool) { return a.quota, a.quotaSet }

// ErrStorageQuota matches the refusal of something that would store more
// for an account whose storage quota is used up (StorageQuotaError).
var ErrStorageQuota = errors.New("the account's storage quota is used up")

// StorageQuotaError refuses a request that would store more (a retry, a
// redrive) for an account at its storage quota: Quota and Stored are the
// quota and the bytes its deliveries take.
type StorageQuotaError struct{ Quota, Stored int64 }

func (e *StorageQuotaError) Error() string {
	return fmt.Sprintf("this account's storage quota (%d bytes) is used up (its deliveries, settings and agent sessions take %d bytes in the log): nothing more is recorded until its operator raises it or deliveries are deleted",
		e.Quota, e.Stored)
}

// Is makes errors.Is(err, ErrStorageQuota) true.
func (e *StorageQuotaError) Is(target error) bool { return target == ErrStorageQuota }

// ErrDiskReserve refuses a sign-up, an inspector, an Endpoint, a retry or
// a redrive while the relay's free disk is below its reserve (twice it for
// new work). The figures are the operator's (log, metrics), not the
// caller's: they would tell a stranger how much more fills the disk.
var ErrDiskReserve = errors.New("the relay's disk is nearly full: nothing that would store more is accepted until space is freed; try again later " +
	"(for the relay's operator: its log and its relay_disk_* metrics give the free space and the reserve, which relay serve --min-free-disk sets)")

// GuestNetworkShares is how many client networks the relay's storage for
// guests is at least shared by: the inspectors one network (IPv4 /24,
// IPv6 /48) created hold at most GuestStorage.Total / GuestNetworkShares.
const GuestNetworkShares = 16

// GuestStorage is the log bytes every guest inspector's deliveries may
// take together (relay serve --guest-storage), and a share of it per
// client network. Guests have no account whose quota counts them: without
// it the relay's guests together were bounded by the disk alone, and when
// the disk reserve trips every team's deliveries are refused.
type GuestStorage struct {
	Total int64 // 0: no bound
}

// Check refuses more guest storage (a new inspector, a delivery to one)
// once the guests hold the whole (total) or the inspectors network created
// hold its share (ofNetwork; network "" has none of its own).
func (g GuestStorage) Check(total, ofNetwork int64, network string) error {
	return overShared(SharedGuests, g.Total, total, ofNetwork, network)
}

// SharedStorage names a relay-wide storage budget shared by client
// networks (SharedStorageError.Kind).
type SharedStorage int

const (
	SharedGuests  SharedStorage = iota // guest inspectors (GuestStorage)
	SharedSignups                      // accounts made by open sign-up (SignupStorage)
)

// sharedStorageWords are each budget's refusals, for the whole budget (of
// Total) and for a network's share (of Network, Share and Total). Clients
// and tests read them: they stay word for word.
var sharedStorageWords = [...]struct{ whole, network string }{
	SharedGuests: {
		whole:   "this relay's storage for guest inspectors (%d bytes) is used up: nothing more is recorded for guests until their deliveries expire; an account's Endpoints are not affected",
		network: "the guest inspectors created from your network (%s) hold their share of this relay's storage for guests (%d bytes of %d): nothing more is recorded for them until their deliveries expire; an account's Endpoints are not affected",
	},
	SharedSignups: {
		whole:   "this relay's storage for accounts made by open sign-up (%d bytes) is used up: no account is signed up and nothing more is recorded for them until their deliveries are deleted or expire, or the relay's operator gives an account a storage quota of its own (relay accounts set-quota --storage)",
		network: "the accounts signed up from your network (%s) hold their share of this relay's storage for open sign-ups (%d bytes of %d): no account is signed up from it and nothing more is recorded for them until their deliveries are deleted or expire, or the relay's operator gives an account a storage quota of its own (relay accounts set-quota --storage)",
	},
}

// overShared is the one rule of the budgets shared by client networks:
// kind's budget of limit bytes (0: none) is used up once total reaches
// it, and a network's share (limit / GuestNetworkShares) once what that
// network made holds it (ofNetwork; network "" has no share of its own).
// It returns the refusal, nil while there is room.
func overShared(kind SharedStorage, limit, total, ofNetwork int64, network string) error {
	switch {
	case limit <= 0:
		return nil
	case total >= limit:
		return &SharedStorageError{Kind: kind, Total: limit}
	case network != "" && ofNetwork >= limit/GuestNetworkShares:
		return &SharedStorageError{Kind: kind, Total: limit, Network: network, Share: limit / GuestNetworkShares}
	}
	return nil
}

// SharedStorageError refuses what would store more in a relay-wide budget
// shared by client networks (Kind): the guests' (a guest inspector, a
// delivery to one; accounts' deliveries go on) or the accounts made by
// open sign-up (an open sign-up, more storage for such an account;
// accounts the operator made, invited or raised, and guests, go on). The
// budget's users together, or those of one client network, hold the
// storage they may.
type SharedStorageError struct {
	Kind    SharedStorage
	Total   int64
	Network string // "" when the whole is used up
	Share   int64
}

func (e *SharedStorageError) Error() string {
	w := sharedStorageWords[e.Kind]
	if e.Network != "" {
		return fmt.Sprintf(w.network, e.Network, e.Share, e.Total)
	}
	return fmt.Sprintf(w.whole, e.Total)
}

// Is makes errors.Is(err, ErrStorageQuota) true: a quota is used up.
func (e *SharedStorageError) Is(target error) bool { return target == ErrStorageQuota }

// Why a guest inspector, or a delivery to one, was refused (SharedStorageError.Reason).
const (
	GuestRefusedBudget  = "guests"  // every guest inspector together hold GuestStorage.Total
	GuestRefusedNetwork = "network" // the inspectors of one client network hold its share
)

// Reason is GuestRefusedNetwork when a client network's share was used
// up, else GuestRefusedBudget.
func (e *SharedStorageError) Reason() string {
	if e.Network != "" {
		return GuestRefusedNetwork
	}
	return GuestRefusedBudget
}

// GuestRefusals counts what the relay's storage for guests refused, by
// reason, for the operator's metrics (no network is kept: the series stay
// fixed however many networks are refused).
type GuestRefusals struct{ budget, network atomic.Int64 }

// Count counts err when it is a *SharedStorageError of the guests.
func (r *GuestRefusals) Count(err error) {
	var g *SharedStorageError
	switch {
	case !errors.As(err, &g) || g.Kind != SharedGuests:
	case g.Reason() == GuestRefusedNetwork:
		r.network.Add(1)
	default:
		r.budget.Add(1)
	}
}

// Counts returns the refusals so far by reason.
func (r *GuestRefusals) Counts() map[string]int64 {
	return map[string]int64{GuestRefusedBudget: r.budget.Load(), GuestRefusedNetwork: r.network.Load()}
}

// SignupStorage is the log bytes every account made by open sign-up may
// take together (relay serve --signup-storage), and a share of it per
// client network that signed up, as GuestStorage is for guests. Each such
// account also has its storage quota (--account-storage), but anyone may
// sign up again and again: without this bound one network's sign-ups
// together were bounded by the disk alone, and at the disk reserve every
// team's deliveries are refused. An account the operator made, one made
// with an invite, and one the operator gave a storage quota of its own
// (relay accounts set-quota --storage) are outside it (InSignupStorage).
type SignupStorage struct {
	Total int64 // 0: no bound
}

// InSignupStorage reports whether an account counts in the storage for
// sign-ups: made by open sign-up and without a storage quota of its own
// (storageQuota QuotaDefault). An account made before accounts recorded
// how they were made (origin "") is outside it: it may be the operator's,
// and an upgrade must not refuse a team that was served before it.
func InSignupStorage(origin string, storageQuota int64) bool {
	return origin == AccountOriginOpen && storageQuota == QuotaDefault
}

// Check refuses more storage for sign-ups (a new open sign-up, a delivery
// to or a setting of such an account) once those accounts hold the whole
// (total) or those network signed up hold its share (ofNetwork; network
// "" has none of its own).
func (g SignupStorage) Check(total, ofNetwork int64, network string) error {
	return overShared(SharedSignups, g.Total, total, ofNetwork, network)
}
