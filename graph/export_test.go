package graph

// SearchesWaiting is how many admitted log-reading searches wait for a
// global turn, for tests that hold the running ones.
func (r *Resolver) SearchesWaiting() int {
	g := &r.searches
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}
