package ingress

import (
	"context"
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
