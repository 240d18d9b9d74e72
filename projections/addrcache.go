package projections

import (
	"sync"

	"github.com/relayhq/relay/readmodel"
)

// addressCacheSize bounds the cache; when it is full it starts over, which
// keeps it simple and its memory fixed.
const addressCacheSize = 4096

// addressCache keeps the rows Address read, because ingress resolves an
// address on every public request and nearly always the same few. A batch
// that changes an address (created, expired, reconfigured, deleted) drops
// it after committing; a batch that only moves its last activity updates the
// cached copy, so a cached row is never older than the table. Both happen
// before the batch's position is published, so a caller of WaitFor never
// reads a row older than what it waited for.
//
// A read that raced with a batch does not fill the cache: gen counts
// batches, and put keeps a row only if no batch committed since the read
// began (its row could predate that batch's changes).
type addressCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[string]readmodel.Address
}

func (c *addressCache) get(id string) (a readmodel.Address, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok = c.m[id]
	return a, c.gen, ok
}

func (c *addressCache) put(id string, a readmodel.Address, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil || len(c.m) >= addressCacheSize {
		c.m = make(map[string]readmodel.Address)
	}
	c.m[id] = a
}

// committed applies a committed batch: changed addresses are dropped, the
// activity times (Unix nanoseconds) move cached rows forward, and stored
// holds the change of inspectors' stored bytes.
func (c *addressCache) committed(changed []string, activity, stored map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, id := range changed {
		delete(c.m, id)
	}
	for id, d := range stored {
		if a, ok := c.m[id]; ok {
			a.StoredBytes += d
			c.m[id] = a
		}
	}
	for id, at := range activity {
		a, ok := c.m[id]
		if !ok {
			continue
		}
		if t := fromNanos(at); t.After(a.LastActivityAt) {
			a.LastActivityAt = t
			if !a.ExpiresAt.IsZero() {
				a.ExpiresAt = t.Add(a.TTL)
			}
			c.m[id] = a
		}
	}
}

// clear empties the cache (the views were reset).
func (c *addressCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.m = nil
}
