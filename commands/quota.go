package commands

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/readmodel"
)

// MaxAccountStorage bounds a storage quota one can set: far above any
// disk, low enough that sums of quotas never overflow an int64.
const MaxAccountStorage = 1 << 50 // 1 PiB

// UsageWindow is the recent window an account's usage counts deliveries in.
const UsageWindow = 24 * time.Hour

// QuotaDefaults are the relay's limits for accounts without an override
// (relay serve --account-storage, --account-rate, --account-api-cost);
// zero values: unlimited.
type QuotaDefaults struct {
	Storage int64
	Rate    ratelimit.Rate
	// APICost is the GraphQL cost points an account's operations may
	// spend (the cost --max-query-cost bounds per operation).
	APICost ratelimit.Rate
}

// ParseStorageQuota reads a storage quota as the operator writes it: a
// size ("5GiB", "500MB"), "off" or "0" for unlimited, "default" for the
// relay's --account-storage. It returns AccountQuotaSet.StorageBytes.
func ParseStorageQuota(s string) (int64, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "default":
		return domain.QuotaDefault, nil
	case "off", "0", "unlimited":
		return 0, nil
	}
	bad := &domain.InvalidInputError{Field: "storage", Reason: fmt.Sprintf(
		"%q is not a size: want e.g. 5GiB or 500MB (at most 1PiB), off for unlimited, or default", s)}
	if strings.HasPrefix(s, "-") {
		return 0, bad
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > MaxAccountStorage {
		return 0, bad
	}
	return int64(n), nil
}

// ParseRateQuota reads a rate quota: "N/UNIT[,burst=B]" ("100/s"), "off"
// for unlimited, "default" for the relay's --account-rate. It returns
// AccountQuotaSet.Rate in the rate's canonical form.
func ParseRateQuota(s string) (string, error) {
	return parseRateQuota("rate", s)
}

// ParseAPICostQuota reads an API cost quota like ParseRateQuota (N is
// cost points, "default" the relay's --account-api-cost). It returns
// AccountQuotaSet.APICost.
func ParseAPICostQuota(s string) (string, error) {
	return parseRateQuota("api_cost", s)
}

func parseRateQuota(field, s string) (string, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "default":
		return "", nil
	case "off":
		return "off", nil
	}
	r, err := ratelimit.Parse(s)
	if err != nil {
		return "", &domain.InvalidInputError{Field: field, Reason: err.Error() + ", or default"}
	}
	return r.String(), nil
}

// EffectiveQuota is the storage quota (0: unlimited) and the rate an
// account's override gives with the relay's defaults. An override rate
// that no longer parses (it was checked when set) falls back to the default.
func EffectiveQuota(d QuotaDefaults, storageOverride int64, rateOverride string) (int64, ratelimit.Rate) {
	storage := d.Storage
	if storageOverride != domain.QuotaDefault {
		storage = storageOverride
	}
	return storage, overrideRate(d.Rate, rateOverride)
}

// EffectiveAPICost is the API cost budget an account's override gives
// with the relay's default (Off: unlimited), read like EffectiveQuota's rate.
func EffectiveAPICost(d QuotaDefaults, override string) ratelimit.Rate {
	return overrideRate(d.APICost, override)
}

func overrideRate(def ratelimit.Rate, override string) ratelimit.Rate {
	if override != "" {
		if v, err := ratelimit.Parse(override); err == nil {
			return v
		}
	}
	return def
}

// Usage is an account's usage with the limits in force.
type Usage struct {
	readmodel.AccountUsage
	Storage int64 // bytes; 0: unlimited
	Rate    ratelimit.Rate
	APICost ratelimit.Rate
}

// QuotaViews is what the quota commands read of the views.
type QuotaViews interface {
	AccountUsage(ctx context.Context, id string, since time.Time) (readmodel.AccountUsage, error)
	// TopUsage lists up to n accounts, most stored bytes first, and the
	// totals over every account.
	TopUsage(ctx context.Context, n int) ([]readmodel.AccountUsage, readmodel.AccountUsage, error)
}

// SetAccountQuota records the operator's override of an account's quota
// (the caller checked the admin token). storage and rate are as the
// operator wrote them (see ParseStorageQuota, ParseRateQuota,
// ParseAPICostQuota); nil keeps the current value. An unknown account is
// domain.ErrNotFound.
func (s *Service) SetAccountQuota(ctx context.Context, accountID string, storage, rate, apiCost *string) error {
	var (
		bytes              int64
		rateText, costText string
		err                error
	)
	if storage != nil {
		if bytes, err = ParseStorageQuota(*storage); err != nil {
			return err
		}
	}
	if rate != nil {
		if rateText, err = ParseRateQuota(*rate); err != nil {
			return err
		}
	}
	if apiCost != nil {
		if costText, err = ParseAPICostQuota(*apiCost); err != nil {
			return err
		}
	}
	return conflict.Retry(ctx, conflictTries, func(int) error {
		a, err := s.loadAccount(ctx, accountID)
		if err != nil {
			return err
		}
		if a.ID() == "" {
			return domain.ErrNotFound
		}
		cur, ok := a.Quota()
		if !ok {
			cur = domain.AccountQuotaSet{StorageBytes: domain.QuotaDefault}
		}
		st, rt, ct := cur.StorageBytes, cur.Rate, cur.APICost
		if storage != nil {
			st = bytes
		}
		if rate != nil {
			rt = rateText
		}
		if apiCost != nil {
			ct = costText
		}
		if err := a.SetQuota(st, rt, ct); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.AccountStream(accountID), a.Expected(), domain.Trace{CorrelationID: accountID}, a.Changes())
		return err
	})
}

// AccountUsage reads an account's usage with its limits in force.
// The figures agree with the quota: they are read once the views have
// applied what the log holds, since a quota that refused a request a
// moment ago counted receipts the views may not have applied yet.
func (s *Service) AccountUsage(ctx context.Context, views QuotaViews, accountID string) (Usage, error) {
	if err := s.readCurrent(ctx); err != nil {
		return Usage{}, err
	}
	return s.usage(ctx, views, accountID)
}

// TopUsage reads the usage of up to n accounts, most stored bytes first,
// as AccountUsage reads one.
func (s *Service) TopUsage(ctx context.Context, views QuotaViews, n int) ([]Usage, error) {
	if err := s.readCurrent(ctx); err != nil {
		return nil, err
	}
	top, _, err := views.TopUsage(ctx, n)
	if err != nil {
		return nil, err
	}
	out := make([]Usage, 0, len(top))
	for _, row := range top {
		u, err := s.usage(ctx, views, row.AccountID)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

func (s *Service) usage(ctx context.Context, views QuotaViews, accountID string) (Usage, error) {
	u, err := views.AccountUsage(ctx, accountID, s.now().Add(-UsageWindow))
	if err != nil {
		return Usage{}, err
	}
	storage, r := EffectiveQuota(s.cfg.Quotas, u.StorageQuota, u.RateQuota)
	return Usage{AccountUsage: u, Storage: storage, Rate: r, APICost: EffectiveAPICost(s.cfg.Quotas, u.APICostQuota)}, nil
}

// checkEndpointCap refuses a new Endpoint to an account that has
// cfg.MaxEndpoints already. It reads the views: Endpoints created at the
// same moment may pass it by their number.
func (s *Service) checkEndpointCap(ctx context.Context, accountID string) error {
	if s.cfg.MaxEndpoints <= 0 {
		return nil
	}
	n, err := s.views.CountEndpoints(ctx, accountID)
	if err != nil {
		return fmt.Errorf("count endpoints of account %s: %w", accountID, err)
	}
	if n >= s.cfg.MaxEndpoints {
		return &domain.InvalidInputError{Field: "endpoints", Reason: fmt.Sprintf(
			"this account has %d Endpoints, the most this relay allows (relay serve --account-endpoints); delete one first", n)}
	}
	return nil
}

// checkEndpointName refuses an Endpoint name that another Endpoint of the
// account holds (not deleted), so a name names one Endpoint to every
// command that takes one. except is the Endpoint being renamed. It reads
// the views, as checkEndpointCap does: two Endpoints given one name at the
// same moment (on two nodes) may both pass it.
func (s *Service) checkEndpointName(ctx context.Context, accountID, name, except string) error {
	id, err := s.views.EndpointNamed(ctx, accountID, name)
	if err != nil {
		return err
	}
	if id != "" && id != except {
		return &domain.InvalidInputError{Field: "name", Reason: fmt.Sprintf("an Endpoint named %q exists (id %s): choose another name, or delete or rename that one", name, id)}
	}
	return nil
}

// storageViews reads an account's stored bytes and quota override as
// ingress does (the views plus the receipts they have not applied yet).
type storageViews interface {
	AccountQuota(ctx context.Context, id string) (readmodel.AccountUsage, error)
}

// checkStorage refuses what would store more for an account whose stored
// bytes have reached its storage quota (domain.StorageQuotaError), as
// ingress answers 507 to a new delivery. Views that keep no usage check
// nothing.
func (s *Service) checkStorage(ctx context.Context, accountID string) error {
	if err := s.checkDisk(diskreserve.Full); err != nil {
		return err
	}
	return s.CheckStorageQuota(ctx, accountID)
}

// CheckStorageQuota refuses what would append to an account's streams
// once it may store no more (StorageRefusal): an agent session's start,
// which the API layer records through the tunnel. Unlike checkStorage it
// does not ask the disk reserve, which lets agent sessions go on. Views
// that keep no usage check nothing.
func (s *Service) CheckStorageQuota(ctx context.Context, accountID string) error {
	sv, ok := s.views.(storageViews)
	if !ok {
		return nil
	}
	return StorageRefusal(ctx, sv, s.cfg.Quotas, s.cfg.SignupStorage, accountID)
}

// checkDisk refuses what grows the disk once the relay's free disk is at
// level (diskreserve.Low for new and anonymous work, Full for the rest), as
// ingress answers 507 to a delivery. Reads, deletions and quota changes
// never ask: retention must still be able to free space.
func (s *Service) checkDisk(level diskreserve.Level) error {
	if s.cfg.Disk.State().Level < level {
		return nil
	}
	s.cfg.Disk.Refused(diskreserve.RefusedAPI)
	return domain.ErrDiskReserve
}

// StorageRefusal is the one decision of whether an account may store
// more: nil when it may; else its stored bytes have reached its storage
// quota (domain.StorageQuotaError), or, for an account in the relay's
// storage for sign-ups (domain.InSignupStorage), those accounts or the
// ones its network signed up hold theirs (domain.SharedStorageError, the
// sign-ups'). It reads the account's quota row as ingress does (cached)
// and the views' in-memory sums, never the log; views that keep no such
// sums leave the storage for sign-ups unchecked. The API refuses with it
// (CheckStorageQuota), and the answers of retries, queued attempts and
// copies are recorded without their bodies by it.
func StorageRefusal(ctx context.Context, views storageViews, d QuotaDefaults, signups domain.SignupStorage, accountID string) error {
	u, err := views.AccountQuota(ctx, accountID)
	if err != nil {
		return fmt.Errorf("quota of account %s: %w", accountID, err)
	}
	if quota, _ := EffectiveQuota(d, u.StorageQuota, u.RateQuota); quota > 0 && u.StoredBytes >= quota {
		return &domain.StorageQuotaError{Quota: quota, Stored: u.StoredBytes}
	}
	if domain.InSignupStorage(u.Origin, u.StorageQuota) {
		return overSignupStorage(views, signups, u.Network)
	}
	return nil
}
