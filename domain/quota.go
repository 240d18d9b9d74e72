package domain

import (
	"errors"
	"fmt"
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
	return fmt.Sprintf("this account's storage quota (%d bytes) is used up (its deliveries take %d bytes): nothing more is recorded until its operator raises it or deliveries are deleted",
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
