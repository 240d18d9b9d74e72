// Package flight shares a load among the callers that ask for the same key
// at about the same time: the first one loads, the others wait for its
// result, and the latest few results are kept for those that come a little
// later. A stream fanned out to many readers (smee streams, the deliveries
// subscription) reads and encodes each item once this way, not once per
// reader.
package flight

import (
	"context"
	"sync"
)

// DefaultSize is how many results a Cache keeps when its Size is zero.
const DefaultSize = 8

// Cache holds the latest results by key; its zero value is ready to use.
// A failed load is not kept. What it holds is shared by every caller and
// must not be changed by them.
type Cache[K comparable, V any] struct {
	// Size is how many results are kept (DefaultSize when zero); it bounds
	// what the cache holds beyond the loads in progress.
	Size int

	mu      sync.Mutex
	entries map[K]*entry[V]
	order   []K // oldest first; at most Size
}

type entry[V any] struct {
	ready chan struct{} // closed when v and err are set
	v     V
	err   error
}

// Get returns key's result, loading it with load unless it is kept or
// being loaded. A caller waiting for another's load gives up when ctx
// ends; the load itself runs in the caller that started it, so load must
// not depend on that caller staying (give it a context of its own).
func (c *Cache[K, V]) Get(ctx context.Context, key K, load func() (V, error)) (V, error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		if c.entries == nil {
			c.entries = map[K]*entry[V]{}
		}
		e = &entry[V]{ready: make(chan struct{})}
		c.entries[key] = e
		c.order = append(c.order, key)
		if len(c.order) > c.size() {
			delete(c.entries, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.mu.Unlock()
	if !ok {
		e.v, e.err = load()
		close(e.ready)
		if e.err != nil {
			c.forget(key, e)
		}
	}
	select {
	case <-e.ready:
		return e.v, e.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

func (c *Cache[K, V]) size() int {
	if c.Size <= 0 {
		return DefaultSize
	}
	return c.Size
}

func (c *Cache[K, V]) forget(key K, e *entry[V]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[key] == e {
		delete(c.entries, key)
	}
}
