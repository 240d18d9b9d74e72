package graph

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/relayhq/relay/ratelimit"
)

// Every filtered page of history is a search: its candidates are read
// from the views' search pool (projections.searchConns connections for all
// accounts), walking up to 100 000 deliveries of the address. One that
// matches headers or bodies then reads events from the log (up to
// projections.DefaultSearchLogBytes a page): seconds of CPU and tens of MiB
// per page where any other read costs milliseconds. So searches are
// admitted by key (the signed-in account, else the anonymous client's
// address, as the anonymous rate limit counts it):
//   - at most SearchLimits.PerKey of a key at once, running or waiting, of
//     each kind: pages the views answer alone, and pages that read the log.
//     However many pages a key asks for at once, it has at most that many
//     of each kind on the search pool, running or waiting for a connection,
//     and the views let it hold at most all but one of the pool's
//     connections (history names the key with readmodel.WithReader):
//     another account's page never waits behind that key's walks;
//   - of those that read the log, at most SearchLimits.Rate of a key a
//     minute (DefaultSearchRate), and at most SearchLimits.Global of all
//     keys at once (DefaultGlobalSearches: half the cores), a few more
//     waiting for a turn (maxSearchWaiters).
//
// Beyond each: RATE_LIMITED with retryAfterSeconds.
const (
	// DefaultSearchesPerKey is how many filtered pages of each kind (the
	// views' alone, reading the log) one account (or anonymous address) may
	// have running or waiting at once: the console's Load more and a CLI
	// --grep ask for one page at a time.
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

// searchGate admits filtered pages (see SearchLimits).
type searchGate struct {
	once    sync.Once
	perKey  int
	slots   chan struct{} // a token per running log search, Global at most
	rate    *ratelimit.Keyed
	mu      sync.Mutex
	held    map[searchPlace]int // admitted searches, waiting or running
	waiting int                 // admitted log searches waiting for a slot
}

// searchPlace is what a search counts against: its key's searches of one
// kind. A page the views answer alone has places of its own, so that a
// key's slow searches of bodies do not refuse its filter on a status.
type searchPlace struct {
	key      string
	readsLog bool
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
		g.held = map[searchPlace]int{}
	})
}

// admitSearch admits a filtered page for key (searchKey), or refuses it
// with a RateLimitedError; release ends it. A page that reads the log
// (readsLog) also takes a token of the key's rate and waits for a global
// turn.
func (r *Resolver) admitSearch(ctx context.Context, key string, readsLog bool) (release func(), err error) {
	g := &r.searches
	g.init(r.SearchLimits)
	place := searchPlace{key: key, readsLog: readsLog}
	g.mu.Lock()
	switch {
	case g.held[place] >= g.perKey && !readsLog:
		g.mu.Unlock()
		return nil, &RateLimitedError{RetryAfter: searchBusyRetry, Reason: "too many filtered pages of history at once"}
	case g.held[place] >= g.perKey:
		g.mu.Unlock()
		return nil, &RateLimitedError{RetryAfter: searchBusyRetry, Reason: "too many searches of headers or bodies at once"}
	case !readsLog:
		// Its turn is a connection of the views' search pool, which it
		// waits for there.
		g.held[place]++
		g.mu.Unlock()
		return func() { g.leave(place) }, nil
	case g.waiting >= maxSearchWaiters:
		g.mu.Unlock()
		return nil, &RateLimitedError{RetryAfter: searchBusyRetry, Reason: "the relay is busy with searches of headers or bodies"}
	}
	if ok, retry := g.rate.Allow(place.key, time.Now()); !ok {
		g.mu.Unlock()
		return nil, &RateLimitedError{RetryAfter: retry, Reason: "too many searches of headers or bodies this minute"}
	}
	g.held[place]++
	g.waiting++
	g.mu.Unlock()
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
		g.leave(place)
		return nil, ctx.Err()
	}
	g.mu.Lock()
	g.waiting--
	g.mu.Unlock()
	return func() {
		<-g.slots
		g.leave(place)
	}, nil
}

// leave gives back an admitted search's place.
func (g *searchGate) leave(place searchPlace) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[place]--; g.held[place] <= 0 {
		delete(g.held, place)
	}
}
