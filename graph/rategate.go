package graph

import (
	"sync"
	"time"

	"github.com/relayhq/relay/ratelimit"
)

// maxGateKeys bounds the keys (accounts, client addresses) each rateGate
// keeps a bucket for; ratelimit.Keyed groups them by network past that.
const maxGateKeys = 100_000

// rateGate is a per-key rate of the Resolver (agent sessions, bulk
// mutations, replays, tokens made and revoked), made on first use from the rate the Resolver was
// given or, when that is off, its default: one way for each of them to
// hold its buckets.
type rateGate struct {
	once    sync.Once
	rate    ratelimit.Rate
	buckets *ratelimit.Keyed
}

// allow takes one from key's bucket of the rate (configured, else def,
// times scale), or says how long until there is one.
func (g *rateGate) allow(configured, def ratelimit.Rate, scale int, key string, now time.Time) (ok bool, retry time.Duration) {
	g.once.Do(func() {
		g.rate = configured
		if g.rate.Off() {
			g.rate = def
		}
		g.rate.N *= scale
		g.rate.Burst *= scale
		g.buckets = ratelimit.NewKeyed(g.rate, maxGateKeys)
	})
	return g.buckets.Allow(key, now)
}
