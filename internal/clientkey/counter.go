package clientkey

import "sync"

// Counter counts what each client holds open (connections, requests in
// flight, sockets) against a cap: the one per-client count behind those
// bounds. The zero value is ready; an entry goes when its count reaches 0.
type Counter struct {
	mu sync.Mutex
	n  map[string]int
}

// Take counts one more for key if it holds fewer than max.
func (c *Counter) Take(key string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] >= max {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return true
}

// Release counts one less for key.
func (c *Counter) Release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] <= 1 {
		delete(c.n, key)
		return
	}
	c.n[key]--
}

// Held is what key holds now.
func (c *Counter) Held(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// Clients is how many keys hold anything.
func (c *Counter) Clients() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.n)
}
