package ingress

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/ratelimit"
)

// maxLimitedAccounts bounds the account rate limiter's buckets and the
// per-account refusal counts this node keeps.
const maxLimitedAccounts = 10_000

// Reasons a request was refused by its account's quota.
const (
	RefusedStorage = "storage"
	RefusedRate    = "rate"
)

// quotaRefusals counts, per account and reason, the requests this node
// refused by the account's quota since it started. Accounts beyond
// maxLimitedAccounts are counted only in the totals.
type quotaRefusals struct {
	mu     sync.Mutex
	counts map[string]map[string]int64
	totals map[string]int64
}

func (q *quotaRefusals) add(accountID, reason string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.totals == nil {
		q.totals, q.counts = map[string]int64{}, map[string]map[string]int64{}
	}
	q.totals[reason]++
	c, ok := q.counts[accountID]
	if !ok {
		if len(q.counts) >= maxLimitedAccounts {
			return
		}
		c = map[string]int64{}
		q.counts[accountID] = c
	}
	c[reason]++
}

// QuotaRefusals returns an account's refusals on this node by reason.
func (s *Server) QuotaRefusals(accountID string) map[string]int64 {
	s.quotaRefused.mu.Lock()
	defer s.quotaRefused.mu.Unlock()
	out := map[string]int64{}
	for reason, n := range s.quotaRefused.counts[accountID] {
		out[reason] = n
	}
	return out
}

// QuotaRefusalTotals returns every account's refusals on this node by
// reason (the metrics' totals, without per-account labels).
func (s *Server) QuotaRefusalTotals() map[string]int64 {
	s.quotaRefused.mu.Lock()
	defer s.quotaRefused.mu.Unlock()
	out := map[string]int64{RefusedStorage: 0, RefusedRate: 0}
	for reason, n := range s.quotaRefused.totals {
		out[reason] = n
	}
	return out
}

// limitAccount applies an Endpoint's account quota: stored bytes, the
// relay's storage for sign-ups when the account is in it, then deliveries
// per second across its Endpoints. It reports whether the
// request may go on; when not, it has answered (507 Insufficient Storage,
// or 429 with Retry-After) and counted the refusal, and nothing is
// recorded. Like the inspector quota, stored bytes count from each receipt's
// commit (projections' unapplied ledger), so only requests in flight may
// pass the storage quota, by their size.
func (s *Server) limitAccount(w http.ResponseWriter, route Route) bool {
	if route.Kind != domain.AddressEndpoint || route.AccountID == "" {
		return true
	}
	if route.AccountStorage > 0 && route.AccountStoredBytes >= route.AccountStorage {
		s.quotaRefused.add(route.AccountID, RefusedStorage)
		writeText(w, http.StatusInsufficientStorage, fmt.Sprintf(
			"Insufficient Storage: this account's storage quota (%s) is used up; nothing more is recorded until its operator raises it or deliveries are deleted\n",
			humanize.IBytes(uint64(route.AccountStorage))))
		return false
	}
	if route.InSignupStorage {
		if err := s.cfg.SignupStorage.Check(route.SignupStored, route.SignupNetworkStored, route.AccountNetwork); err != nil {
			s.quotaRefused.add(route.AccountID, RefusedStorage)
			refuseStorage(w, err)
			return false
		}
	}
	if route.AccountRate.Off() {
		return true
	}
	ok, retry := s.accountLimits.AllowRate(route.AccountID, route.AccountRate, s.deps.Recorder.Now())
	if ok {
		return true
	}
	s.quotaRefused.add(route.AccountID, RefusedRate)
	w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(retry)))
	writeText(w, http.StatusTooManyRequests, fmt.Sprintf(
		"Too Many Requests: this account's rate (%s across its Endpoints) is exceeded; nothing was recorded\n", route.AccountRate))
	return false
}

// withinDiskReserve refuses a delivery while the relay's free disk is
// below its reserve (an Endpoint's) or below twice it (a guest
// inspector's, anonymous work goes first): it answers 507 and nothing is
// recorded. The reserve reads the disk at most once a second, whatever the
// rate of requests.
func (s *Server) withinDiskReserve(w http.ResponseWriter, route Route) bool {
	refuseAt := diskreserve.Full
	if route.Kind == domain.AddressInspector {
		refuseAt = diskreserve.Low
	}
	if s.deps.Disk.State().Level < refuseAt {
		return true
	}
	s.deps.Disk.Refused(diskreserve.RefusedDelivery)
	w.Header().Set("Retry-After", "60")
	// The figures are the operator's (log, metrics): they would tell a
	// sender how much more fills the disk.
	writeText(w, http.StatusInsufficientStorage, "Insufficient Storage: the relay's disk is nearly full; nothing was recorded, try again later\n")
	return false
}

func newAccountLimits() *ratelimit.Keyed {
	// The rate given here is only the overflow bucket's, used when more
	// than maxLimitedAccounts accounts are busy at once: each account's
	// own rate comes with its route (AllowRate).
	return ratelimit.NewKeyed(ratelimit.Rate{N: 100, Per: time.Second, Burst: 100}, maxLimitedAccounts)
}
