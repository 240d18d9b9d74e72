package ingress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ratelimit"
)

// maxLimitedAddresses bounds the rate limiter's map of public addresses and
// the refusal counts kept between two appends of them.
const maxLimitedAddresses = 10_000

// DefaultRefusalInterval is how often refusal counts are appended to the
// log when Config.RefusalInterval is zero.
const DefaultRefusalInterval = 10 * time.Second

// refusals counts the requests the address rate limit refused since the
// last append, per address. An address beyond maxLimitedAddresses is not
// counted (the log would grow with the flood it measures); lost counts
// are logged. Nor is an address whose owner's storage is used up (an
// inspector at its quota or past the guests' storage, an Endpoint whose
// account is at its quota): its counts would be kept for good past the
// bound that counts them, so they are only counted here, in full
// (unrecorded, the metrics').
type refusals struct {
	mu         sync.Mutex
	counts     map[string]*refusalCount
	lost       int64
	unrecorded atomic.Int64
}

type refusalCount struct {
	kind     domain.AddressKind
	n        int64
	from, to time.Time
}

func (r *refusals) add(address string, kind domain.AddressKind, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.counts[address]
	if !ok {
		if len(r.counts) >= maxLimitedAddresses {
			r.lost++
			return
		}
		if r.counts == nil {
			r.counts = map[string]*refusalCount{}
		}
		c = &refusalCount{kind: kind, from: now}
		r.counts[address] = c
	}
	c.n++
	c.to = now
}

// take returns the counts so far and starts new ones.
func (r *refusals) take() (map[string]*refusalCount, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts, lost := r.counts, r.lost
	r.counts, r.lost = nil, 0
	return counts, lost
}

// limitAddress applies the address rate limit. It reports whether the
// request may go on; when not, it has answered 429 with Retry-After and
// counted the refusal. A refused request is not recorded as a delivery.
func (s *Server) limitAddress(w http.ResponseWriter, route Route) bool {
	if s.addressLimits == nil {
		return true
	}
	now := s.deps.Recorder.Now()
	ok, retry := s.addressLimits.Allow(route.ID, now)
	if ok {
		return true
	}
	if s.storageFull(route) {
		s.refused.unrecorded.Add(1)
	} else {
		s.refused.add(route.ID, route.Kind, now)
	}
	w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(retry)))
	writeText(w, http.StatusTooManyRequests, "Too Many Requests: this address's rate limit is exceeded\n")
	return false
}

// storageFull reports whether what counts an address's bytes kept for
// good is used up: an inspector's quota or the guests' storage (its
// network's share), an Endpoint's account's storage quota. Its refusal
// counts are then not appended to the log.
func (s *Server) storageFull(route Route) bool {
	if route.Kind == domain.AddressEndpoint {
		return route.AccountStorage > 0 && route.AccountStoredBytes >= route.AccountStorage
	}
	return s.cfg.InspectorQuota > 0 && route.StoredBytes >= s.cfg.InspectorQuota ||
		s.cfg.GuestStorage.Check(route.GuestStored, route.GuestNetworkStored, route.Network) != nil
}

// GuestRefusals returns the deliveries to guest inspectors this node
// refused (507) because the storage for guests, or a client network's
// share of it, was used up, by reason (domain.GuestRefusedBudget,
// domain.GuestRefusedNetwork).
func (s *Server) GuestRefusals() map[string]int64 { return s.guestRefused.Counts() }

// RefusalsNotRecorded returns how many rate-limit refusals this node
// counted only in memory since it started, because their address's
// storage (its inspector's quota, the guests' storage, its account's
// quota) was used up.
func (s *Server) RefusalsNotRecorded() int64 { return s.refused.unrecorded.Load() }

// retrySeconds rounds a wait up to whole seconds, at least 1.
func retrySeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// overQuota reports whether an inspector's stored bytes reached its quota;
// then it has answered 429, and the request is not recorded. The views
// count what is applied and the ledger what is not yet (projections), so
// only requests in flight may pass it, by their size.
func (s *Server) overQuota(w http.ResponseWriter, route Route) bool {
	if s.cfg.InspectorQuota <= 0 || route.StoredBytes < s.cfg.InspectorQuota {
		return false
	}
	writeText(w, http.StatusTooManyRequests, fmt.Sprintf(
		"Too Many Requests: this inspector's storage quota (%s) is used up; nothing more is recorded\n",
		humanize.IBytes(uint64(s.cfg.InspectorQuota))))
	return true
}

// overGuestStorage reports whether the relay's guest inspectors together,
// or those the inspector's client network created, hold the storage the
// relay gives guests (Config.GuestStorage); then it has answered 507, and
// the request is not recorded. Accounts' Endpoints go on: one party's
// guests cannot bring the relay to its disk reserve, which refuses them.
func (s *Server) overGuestStorage(w http.ResponseWriter, route Route) bool {
	err := s.cfg.GuestStorage.Check(route.GuestStored, route.GuestNetworkStored, route.Network)
	if err == nil {
		return false
	}
	s.guestRefused.Count(err)
	refuseStorage(w, err)
	return true
}

// refuseStorage answers 507 to a request that a storage budget shared by
// client networks refuses (domain.SharedStorageError: the guests' or the
// sign-ups'), with the refusal's reason and a Retry-After
// of an hour: space comes back as retention deletes deliveries.
func refuseStorage(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "3600")
	writeText(w, http.StatusInsufficientStorage, "Insufficient Storage: "+err.Error()+"\n")
}

// RecordRefusals records, every interval until ctx ends, one
// address.rate_limited.v1 per address whose requests the rate limit
// refused in the interval, and the rest once more as it ends.
func (s *Server) RecordRefusals(ctx context.Context) error {
	if s.addressLimits == nil {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.cfg.RefusalInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.appendRefusals(context.WithoutCancel(ctx))
			return nil
		case <-t.C:
			s.appendRefusals(ctx)
		}
	}
}

func (s *Server) appendRefusals(ctx context.Context) {
	counts, lost := s.refused.take()
	if lost > 0 {
		s.log.WarnContext(ctx, "ingress: rate-limit refusals not counted per address (too many addresses)", "refused", lost)
	}
	for address, c := range counts {
		err := s.deps.Recorder.RecordRefusals(ctx, address, c.kind, c.n, c.from, c.to)
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.ErrorContext(ctx, "ingress: record rate-limit refusals", "address", address, "refused", c.n, "error", err)
		}
	}
}

func newAddressLimits(r ratelimit.Rate) *ratelimit.Keyed {
	if r.Off() {
		return nil
	}
	return ratelimit.NewKeyed(r, maxLimitedAddresses)
}
