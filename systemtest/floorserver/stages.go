package main

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// stages times the two waits of each proxied request that no work of the
// server's own can shorten: the agent's hop (the frame written to the
// agent until its answer is read back: the agent, its HTTP call to the
// local handler, and the socket both ways) and the durable commit (the
// answer's record queued until the log has synced it, and with -storage
// least the request's record too, which is mostly synced by then). Together with the
// HTTP exchange they are the floor of one sender's latency.
// GET /floor/stages answers their medians since the last such request.
type stages struct {
	mu           sync.Mutex
	hop, commits []time.Duration
}

// maxStageSamples bounds what stages keeps between two reads.
const maxStageSamples = 1 << 17

func (s *stages) add(hop, commit time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.hop) < maxStageSamples {
		s.hop, s.commits = append(s.hop, hop), append(s.commits, commit)
	}
}

// serve answers the medians, in ms, and starts over.
func (s *stages) serve(c echo.Context) error {
	s.mu.Lock()
	hop, commits := s.hop, s.commits
	s.hop, s.commits = nil, nil
	s.mu.Unlock()
	return c.String(200, fmt.Sprintf("n %d\nagent-hop-p50-ms %.4f\ncommit-p50-ms %.4f\n", len(hop), median(hop), median(commits)))
}

func median(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[len(d)/2]) / float64(time.Millisecond)
}
