package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/relayhq/relay/internal/clientkey"
)

// Keyed holds a token bucket per key, in a map of at most max buckets,
// and is safe for concurrent use.
//
// A bucket as full as a new one is dropped when room is needed (losing
// nothing), however recently its key asked: a key keeps its bucket only by
// spending tokens, not by asking and being refused.
//
// Keys of client addresses (clientkey.Of) are grouped by network
// (clientkey.Network: a /24, an IPv6 /48): one network's keys hold at most
// 1/networkShare of the map, and a key that finds no room (its network at
// its share, or the map full) shares its network's overflow bucket. So a
// flood of keys from one network (a /48 holds 65 536 /64s) starves that
// network only, and filling the map takes networkShare networks. Keys of
// no network (accounts, public addresses), and networks past max, share
// one last overflow bucket. Every overflow bucket has the rate NewKeyed was
// given and stays conservative under a flood of keys, instead of letting
// each new key start with a full burst.
type Keyed struct {
	limit rate.Limit
	burst int
	max   int
	share int           // buckets the keys of one network may hold
	idle  time.Duration // time a bucket takes to refill from empty
	every time.Duration // the least time between two sweeps

	mu        sync.Mutex
	buckets   map[string]*bucket
	held      map[string]int           // per network: buckets its keys hold
	shared    map[string]*rate.Limiter // per network: its overflow bucket
	overflow  *rate.Limiter
	lastSweep time.Time
}

// networkShare: one network's keys hold at most 1/networkShare of a map
// (1 562 of 100 000). A site's clients rarely number more; an attacker
// needs networkShare networks to fill the map.
const networkShare = 64

type bucket struct {
	lim     *rate.Limiter
	network string // clientkey.Network of its key
}

// NewKeyed returns buckets of rate r holding at most size keys.
func NewKeyed(r Rate, size int) *Keyed {
	size = max(size, 1)
	// A sweep scans the map: at most once a token's time (a bucket that
	// spent one is full again by then), and once a second.
	every := time.Second
	if l := r.Limit(); l > 0 && l != rate.Inf {
		every = max(every, time.Duration(float64(time.Second)/float64(l)))
	}
	return &Keyed{
		limit:    r.Limit(),
		burst:    r.Burst,
		max:      size,
		share:    max(1, size/networkShare),
		idle:     r.RefillTime(),
		every:    every,
		buckets:  make(map[string]*bucket),
		held:     make(map[string]int),
		shared:   make(map[string]*rate.Limiter),
		overflow: rate.NewLimiter(r.Limit(), r.Burst),
	}
}

// Allow takes one token from key's bucket at now. When there is none it
// returns false and how long until there is one.
func (k *Keyed) Allow(key string, now time.Time) (ok bool, retryAfter time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	lim := k.limiter(key, now)
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return false, k.idle
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now) // nothing is sent later: give the token back
		return false, d
	}
	return true, 0
}

// AllowRate is Allow with key's own rate r (an account's quota, which
// the operator may change at any time): a key's bucket takes r's rate and
// burst whenever they differ from what it had. Keys without a bucket of
// their own share an overflow bucket at the rate NewKeyed was given.
func (k *Keyed) AllowRate(key string, r Rate, now time.Time) (ok bool, retryAfter time.Duration) {
	if r.Off() {
		return true, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	lim := k.rated(key, r, now)
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return false, r.RefillTime()
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// AllowN is AllowRate taking n tokens at once (a GraphQL operation's
// cost points). It never waits: without n tokens it returns false and how
// long until the bucket holds them; n larger than r's burst can never pass,
// and is refused with the time the bucket takes to fill completely (the
// caller decides whether to charge at most a full bucket instead).
func (k *Keyed) AllowN(key string, r Rate, n int, now time.Time) (ok bool, retryAfter time.Duration) {
	if r.Off() || n <= 0 {
		return true, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	lim := k.rated(key, r, now)
	res := lim.ReserveN(now, n)
	if !res.OK() {
		return false, r.RefillTime()
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Len is how many keys have a bucket of their own.
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.buckets)
}

// rated returns key's bucket with r's rate and burst (see AllowRate).
// The caller holds mu.
func (k *Keyed) rated(key string, r Rate, now time.Time) *rate.Limiter {
	_, had := k.buckets[key]
	lim := k.limiter(key, now)
	if b, own := k.buckets[key]; own && !had && (r.Limit() != k.limit || r.Burst != k.burst) {
		// A new bucket starts full at its own rate's burst: made at the
		// map's and raised after, it held only the map's burst, so an
		// account's burst of 1 000 began with 100.
		b.lim = rate.NewLimiter(r.Limit(), r.Burst)
		return b.lim
	}
	if _, own := k.buckets[key]; own {
		if lim.Limit() != r.Limit() {
			lim.SetLimitAt(now, r.Limit())
		}
		if lim.Burst() != r.Burst {
			lim.SetBurstAt(now, r.Burst)
		}
	}
	return lim
}

// limiter returns key's bucket, making one when the map and its
// network's share have room, else the overflow bucket it shares. The
// caller holds mu.
func (k *Keyed) limiter(key string, now time.Time) *rate.Limiter {
	if b, ok := k.buckets[key]; ok {
		return b.lim
	}
	network := clientkey.Network(key)
	room := func() bool {
		return len(k.buckets) < k.max && (network == "" || k.held[network] < k.share)
	}
	if !room() {
		k.sweep(now)
	}
	if room() {
		b := &bucket{lim: rate.NewLimiter(k.limit, k.burst), network: network}
		k.buckets[key] = b
		if network != "" {
			k.held[network]++
		}
		return b.lim
	}
	if network == "" {
		return k.overflow
	}
	if lim, ok := k.shared[network]; ok {
		return lim
	}
	if len(k.shared) >= k.max {
		return k.overflow
	}
	lim := rate.NewLimiter(k.limit, k.burst)
	k.shared[network] = lim
	return lim
}

// sweep drops the buckets as full as new ones. It runs at most once per
// k.every, so a full map of busy keys does not make every new key pay for
// a scan.
func (k *Keyed) sweep(now time.Time) {
	if !k.lastSweep.IsZero() && now.Sub(k.lastSweep) < k.every {
		return
	}
	k.lastSweep = now
	for key, b := range k.buckets {
		if !full(b.lim, now) {
			continue
		}
		delete(k.buckets, key)
		if b.network != "" {
			if k.held[b.network]--; k.held[b.network] <= 0 {
				delete(k.held, b.network)
			}
		}
	}
	for network, lim := range k.shared {
		if full(lim, now) {
			delete(k.shared, network)
		}
	}
}

// full reports whether lim holds its whole burst at now: a new bucket.
func full(lim *rate.Limiter, now time.Time) bool {
	return lim.TokensAt(now) >= float64(lim.Burst())
}
