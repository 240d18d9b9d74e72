package projections

import (
	"sync"

	"github.com/relayhq/relay/readmodel"
)

// addressCacheSize bounds the cache; when it is full it starts over, which
// keeps it simple and its memory fixed. addressCacheBytes bounds the own
// answers it holds (up to 72 KiB each, set by anyone who knows an
// inspector's address): 4096 of the largest would otherwise hold 290 MiB.
const (
	addressCacheSize  = 4096
	addressCacheBytes = 16 << 20
)

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
	mu    sync.Mutex
	gen   uint64
	m     map[string]readmodel.Address
	bytes int64 // answerBytes of the rows in m
}

// answerBytes is what a row's own answer holds in memory, roughly.
func answerBytes(a readmodel.Address) int64 {
	n := int64(0)
	if ans := a.Answers.Answer; ans != nil {
		n += int64(len(ans.Body))
		for _, h := range ans.Headers {
			n += int64(len(h.Name) + len(h.Value))
		}
	}
	return n
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
	size := answerBytes(a)
	if c.m == nil || len(c.m) >= addressCacheSize || c.bytes+size > addressCacheBytes {
		c.m, c.bytes = make(map[string]readmodel.Address), 0
	}
	if old, ok := c.m[id]; ok {
		c.bytes -= answerBytes(old)
	}
	c.m[id] = a
	c.bytes += size
}

// committed applies a committed batch: changed addresses are dropped, the
// activity times (Unix nanoseconds) move cached rows forward, and stored
// holds the change of inspectors' stored bytes.
func (c *addressCache) committed(changed []string, activity, stored map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, id := range changed {
		if old, ok := c.m[id]; ok {
			c.bytes -= answerBytes(old)
			delete(c.m, id)
		}
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
	c.m, c.bytes = nil, 0
}
