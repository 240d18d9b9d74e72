package ingress

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBacklogCountIsSharedAfterExpiry: deliveries to a QUEUE Endpoint
// that find its counted backlog expired together wait for one count of
// the views, not one each; before, each ran its own (a stampede on every
// busy Endpoint once a second).
func TestBacklogCountIsSharedAfterExpiry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		callers int
		expired bool // a count was made before and has expired
	}{
		{name: "first count", callers: 32},
		{name: "after expiry", callers: 32, expired: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				counts  atomic.Int64
				arrived = make(chan struct{}, tc.callers)
				release = make(chan struct{})
			)
			s := New(Config{MaxQueueBacklog: 10}, Deps{QueueDepth: func(ctx context.Context, endpointID string) (int, error) {
				counts.Add(1)
				<-release
				return 7, nil
			}})
			if tc.expired {
				s.backlogs.counts = map[string]backlogCount{"ep": {n: 3, at: time.Now().Add(-2 * backlogTTL)}}
			}
			var wg sync.WaitGroup
			for range tc.callers {
				wg.Go(func() {
					arrived <- struct{}{}
					if n, full := s.queueFull(t.Context(), "ep"); n != 7 || full {
						t.Errorf("queueFull = %d, %v; want 7, false", n, full)
					}
				})
			}
			for range tc.callers {
				<-arrived
			}
			// Every caller is on its way; give them time to reach the count
			// (the assertion is on how many counts ran, not on time).
			time.Sleep(100 * time.Millisecond)
			close(release)
			wg.Wait()
			t.Logf("%d concurrent checks ran %d counts", tc.callers, counts.Load())
			if got := counts.Load(); got != 1 {
				t.Errorf("%d concurrent checks ran %d counts of the backlog, want 1", tc.callers, got)
			}
		})
	}
}

// TestBacklogCountAfterTheCacheIsEmptied: once the cache of counts is
// emptied (past 100 000 Endpoints), an Endpoint's next check counts its
// backlog again rather than take the count shared before: a stale count
// would let its backlog grow past the bound.
func TestBacklogCountAfterTheCacheIsEmptied(t *testing.T) {
	depth := map[string]int{"ep": 3}
	var counts int
	s := New(Config{MaxQueueBacklog: 10}, Deps{QueueDepth: func(ctx context.Context, endpointID string) (int, error) {
		counts++
		return depth[endpointID], nil
	}})
	if n, full := s.queueFull(t.Context(), "ep"); n != 3 || full {
		t.Fatalf("queueFull = %d, %v; want 3, false", n, full)
	}
	s.backlogs.mu.Lock()
	for i := range 100_001 {
		s.backlogs.counts[fmt.Sprintf("other-%d", i)] = backlogCount{at: time.Now()}
	}
	delete(s.backlogs.counts, "ep")
	s.backlogs.mu.Unlock()
	s.queueFull(t.Context(), "one-more") // empties the cache
	depth["ep"] = 12
	if n, full := s.queueFull(t.Context(), "ep"); n != 12 || !full {
		t.Errorf("after the cache was emptied queueFull = %d, %v; want 12, true (counts made: %d)", n, full, counts)
	}
}
