package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed holds a token bucket per key. Its map never holds more than max
// buckets: a bucket left alone long enough to refill completely is the same
// as a new one, so it is dropped whenever the map is full (losing nothing);
// if the map is still full, keys without a bucket share one overflow bucket
// of the same rate, which stays conservative under a flood of keys instead
// of letting each new key start with a full burst. It is safe for
// concurrent use.
type Keyed struct {
	limit rate.Limit
	burst int
	max   int
	idle  time.Duration // time a bucket takes to refill from empty

	mu        sync.Mutex
	buckets   map[string]*bucket
	overflow  *rate.Limiter
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time     // latest Allow for the key
	idle time.Duration // its own refill time when AllowRate set its rate; 0: k.idle
}

// NewKeyed returns buckets of rate r holding at most max keys.
func NewKeyed(r Rate, max int) *Keyed {
	if max < 1 {
		max = 1
	}
	return &Keyed{
		limit:    r.Limit(),
		burst:    r.Burst,
		max:      max,
		idle:     r.RefillTime(),
		buckets:  make(map[string]*bucket),
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
// burst whenever they differ from what it had. Keys beyond max share the
// overflow bucket at the rate NewKeyed was given.
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
	lim := k.limiter(key, now)
	if b, own := k.buckets[key]; own {
		if lim.Limit() != r.Limit() {
			lim.SetLimitAt(now, r.Limit())
		}
		if lim.Burst() != r.Burst {
			lim.SetBurstAt(now, r.Burst)
		}
		b.idle = r.RefillTime()
	}
	return lim
}

// limiter returns key's bucket, making one when the map has room. The
// caller holds mu.
func (k *Keyed) limiter(key string, now time.Time) *rate.Limiter {
	if b, ok := k.buckets[key]; ok {
		b.last = now
		return b.lim
	}
	if len(k.buckets) >= k.max {
		k.sweep(now)
	}
	if len(k.buckets) >= k.max {
		return k.overflow
	}
	b := &bucket{lim: rate.NewLimiter(k.limit, k.burst), last: now}
	k.buckets[key] = b
	return b.lim
}

// sweep drops the buckets idle long enough to be full again. It runs at
// most once per refill time, so a full map of busy keys does not make
// every new key pay for a scan.
func (k *Keyed) sweep(now time.Time) {
	if !k.lastSweep.IsZero() && now.Sub(k.lastSweep) < k.idle {
		return
	}
	k.lastSweep = now
	for key, b := range k.buckets {
		idle := k.idle
		if b.idle > 0 {
			idle = b.idle
		}
		if now.Sub(b.last) >= idle {
			delete(k.buckets, key)
		}
	}
}
