package record

import "sync"

// folded is a stream's state folded up to a revision: next is the
// revision its next event would have, clone a copy to fold on or keep.
type folded[S any] interface {
	nextRevision() uint64
	clone() S
}

// foldedStates keeps, per stream, its state folded up to a revision, so
// that the next reader folds only what follows; at most max streams, an
// entry a few hundred bytes.
type foldedStates[S folded[S]] struct {
	max int
	mu  sync.Mutex
	m   map[string]S
}

// get returns a copy of the stream's state to fold on; false: none kept.
func (c *foldedStates[S]) get(id string) (S, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[id]
	if !ok {
		return st, false
	}
	return st.clone(), true
}

// put keeps a copy of st unless a state folded further is kept already
// (two readers of one stream may fold it at once). Past max, any one
// entry makes room: it is read again from the log when needed.
func (c *foldedStates[S]) put(id string, st S) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[id]; ok && old.nextRevision() >= st.nextRevision() {
		return
	}
	if c.m == nil {
		c.m = map[string]S{}
	}
	if _, ok := c.m[id]; !ok && len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[id] = st.clone()
}

// drop forgets a stream's state (after a failed read: a stream deleted or
// unreadable is read again from its start).
func (c *foldedStates[S]) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}
