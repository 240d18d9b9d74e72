package graph

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// sizedCache is an LRU bounded by bytes as well as by entries: it keeps
// no entry that weighs more than maxEntry and evicts the least recently
// used ones while the total passes maxTotal. gqlgen's own lru counts
// entries only, so a few huge documents would stay in memory.
type sizedCache[T any] struct {
	mu       sync.Mutex
	lru      *simplelru.LRU[string, sized[T]]
	weigh    func(key string, value T) int
	maxEntry int
	maxTotal int
	total    int
}

type sized[T any] struct {
	value T
	size  int
}

var _ graphql.Cache[any] = (*sizedCache[any])(nil)

func newSizedCache[T any](entries, maxEntry, maxTotal int, weigh func(string, T) int) *sizedCache[T] {
	c := &sizedCache[T]{weigh: weigh, maxEntry: maxEntry, maxTotal: maxTotal}
	lru, err := simplelru.NewLRU(entries, func(_ string, v sized[T]) { c.total -= v.size })
	if err != nil {
		panic("sizedCache: " + err.Error()) // only for entries <= 0, a programming error
	}
	c.lru = lru
	return c
}

func (c *sizedCache[T]) Get(_ context.Context, key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.lru.Get(key)
	return v.value, ok
}

func (c *sizedCache[T]) Add(_ context.Context, key string, value T) {
	size := c.weigh(key, value)
	if size > c.maxEntry {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(key)
	c.lru.Add(key, sized[T]{value: value, size: size})
	c.total += size
	for c.total > c.maxTotal {
		c.lru.RemoveOldest()
	}
}

// bytes is the total weight held; for tests.
func (c *sizedCache[T]) bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}
