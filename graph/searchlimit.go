package graph

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/relayhq/relay/ratelimit"
)

// A search that matches headers or bodies reads events from the log (up to
// projections.DefaultSearchLogBytes a page): seconds of CPU and tens of MiB
// per page where any other read costs milliseconds. So such searches are
// admitted by key (the signed-in account, else the anonymous client's
// address, as the anonymous rate limit counts it):
//   - at most SearchLimits.PerKey of a key at once (DefaultSearchesPerKey),
//   - at most SearchLimits.Rate of a key a minute (DefaultSearchRate),
//   - at most SearchLimits.Global of all keys at once (DefaultGlobalSearches:
//     half the cores), a few more waiting for a turn (maxSearchWaiters).
//
// Beyond each: RATE_LIMITED with retryAfterSeconds. Searches the views
// answer alone (method, path, status, time…) are not limited here: they
// read no log, and run on the views' search pool.
const (
	// DefaultSearchesPerKey is how many log-reading searches one account
	// (or anonymous address) may have running or waiting at once: the
	// console's Load more and a CLI --grep run one at a time.
	DefaultSearchesPerKey = 2
	// maxSearchWaiters bounds the admitted searches waiting for a global
	// turn; past it one is refused rather than queued.
	maxSearchWaiters = 64
	// searchBusyRetry is the retryAfterSeconds of a search refused for
	// concurrency: a running search ends within its byte budget.
	searchBusyRetry = time.Second
	// maxSearchKeys bounds the per-key buckets of the search rate.
	maxSearchKeys = 100_000
)

// DefaultSearchRate is how many log-reading searches a key may start a
// minute: a CLI --grep reads up to 20 pages in one go.
var DefaultSearchRate = ratelimit.Rate{N: 60, Per: time.Minute, Burst: 30}

// DefaultGlobalSearches is how many log-reading searches run at once
// across all accounts: half the cores (at least one), so ordinary reads
// and ingress always have the other half. A search reads the log on one
// goroutine, so it takes at most one core.
func DefaultGlobalSearches() int {
	return max(1, runtime.GOMAXPROCS(0)/2)
}

// SearchLimits bound the searches that read the log; zero fields take
// their defaults.
type SearchLimits struct {
	PerKey int
	Global int
	Rate   ratelimit.Rate
}

// searchGate admits log-reading searches (see SearchLimits).
type searchGate struct {
	once    sync.Once
	perKey  int
	slots   chan struct{} // a token per running search, Global at most
	rate    *ratelimit.Keyed
	mu      sync.Mutex
	held    map[string]int // per key: admitted searches, waiting or running
	waiting int            // admitted searches waiting for a slot
}

func (g *searchGate) init(l SearchLimits) {
	g.once.Do(func() {
		if l.PerKey <= 0 {
			l.PerKey = DefaultSearchesPerKey
		}
		if l.Global <= 0 {
			l.Global = DefaultGlobalSearches()
		}
		if l.Rate == (ratelimit.Rate{}) {
			l.Rate = DefaultSearchRate
		}
		g.perKey = l.PerKey
		g.slots = make(chan struct{}, l.Global)
		g.rate = ratelimit.NewKeyed(l.Rate, maxSearchKeys)
		g.held = map[string]int{}
	})
}

// admitSearch admits a search that reads the log for the request's key,
// waiting for a global turn if need be, or refuses it with a
// RateLimitedError. release ends it.
func (r *Resolver) admitSearch(ctx context.Context) (release func(), err error) {
	g := &r.searches
	g.init(r.SearchLimits)
	key := r.searchKey(ctx)
	g.mu.Lock()
	switch {
	case g.held[key] >= g.perKey:
		g.mu.Unlock()
		return nil, &RateLimitedError{RetryAfter: searchBusyRetry, Reason: "too many searches of headers or bodies at once"}
	case g.waiting >= maxSearchWaiters:
		g.mu.Unlock()
		return nil, &RateLimitedError{RetryAfter: searchBusyRetry, Reason: "the relay is busy with searches of headers or bodies"}
	}
	if ok, retry := g.rate.Allow(key, time.Now()); !ok {
		g.mu.Unlock()
		return nil, &RateLimitedError{RetryAfter: retry, Reason: "too many searches of headers or bodies this minute"}
	}
	g.held[key]++
	g.waiting++
	g.mu.Unlock()
	done := func(waited bool) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if waited {
			g.waiting--
		}
		if g.held[key]--; g.held[key] <= 0 {
			delete(g.held, key)
		}
	}
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		done(true)
		return nil, ctx.Err()
	}
	g.mu.Lock()
	g.waiting--
	g.mu.Unlock()
	return func() {
		<-g.slots
		done(false)
	}, nil
}

// searchKey is who a search counts against: the signed-in account, else
// the anonymous client's address, as clientkey.Of makes it (so the rate's
// buckets group it by network; an account's key is no address).
func (r *Resolver) searchKey(ctx context.Context) string {
	if acc, _, err := r.credential(ctx); err == nil {
		return "account:" + acc.ID
	}
	client, _ := ctx.Value(clientKey).(string)
	return client
}
