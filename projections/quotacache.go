package projections

import (
	"sync"

	"github.com/relayhq/relay/readmodel"
)

// quotaCacheSize bounds the accounts the quota cache holds; when it is
// full it starts over, which keeps it simple and its memory fixed (a row
// is ~150 bytes).
const quotaCacheSize = 4096

// quotaCache keeps the rows AccountQuota read, because ingress reads one
// on every request to an Endpoint (a point read costs 15-30 µs, the cached
// copy well under one). Like addressCache: a batch that sets an account's
// quota drops it after committing, a batch that only moves its stored bytes
// and deliveries updates the cached copy, both before the batch's position
// is published; a read that raced with a batch does not fill the cache.
type quotaCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[string]readmodel.AccountUsage
}

func (c *quotaCache) get(id string) (u readmodel.AccountUsage, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok = c.m[id]
	return u, c.gen, ok
}

func (c *quotaCache) put(id string, u readmodel.AccountUsage, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil || len(c.m) >= quotaCacheSize {
		c.m = make(map[string]readmodel.AccountUsage)
	}
	c.m[id] = u
}

// committed applies a committed batch: accounts whose quota changed are
// dropped, the others' usage moves by the batch's deltas.
func (c *quotaCache) committed(changed []string, moves map[string]accountMove) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, id := range changed {
		delete(c.m, id)
	}
	for id, m := range moves {
		if u, ok := c.m[id]; ok {
			u.StoredBytes += m.bytes
			u.Deliveries += m.deliveries
			c.m[id] = u
		}
	}
}

// clear empties the cache (the views were reset).
func (c *quotaCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.m = nil
}
