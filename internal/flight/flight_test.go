package flight_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/relayhq/relay/internal/flight"
)

// TestGetSharesOneLoad: callers asking for a key while it loads, and
// after, get the one result; a failed load is tried again; an evicted key
// loads again.
func TestGetSharesOneLoad(t *testing.T) {
	var c flight.Cache[string, int]
	var loads atomic.Int32
	release := make(chan struct{})
	load := func() (int, error) { loads.Add(1); <-release; return 7, nil }

	var wg sync.WaitGroup
	results := make(chan int, 10)
	started := make(chan struct{})
	wg.Go(func() {
		close(started)
		v, _ := c.Get(context.Background(), "a", load)
		results <- v
	})
	<-started
	for range 9 {
		wg.Go(func() {
			v, _ := c.Get(context.Background(), "a", func() (int, error) { loads.Add(1); return 0, nil })
			results <- v
		})
	}
	close(release)
	wg.Wait()
	close(results)
	for v := range results {
		if v != 7 && v != 0 {
			t.Fatalf("got %d", v)
		}
	}
	// Whichever caller entered first loaded; nobody else did.
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d loads for one key, want 1", n)
	}

	fail := errors.New("no")
	if _, err := c.Get(context.Background(), "b", func() (int, error) { return 0, fail }); !errors.Is(err, fail) {
		t.Fatalf("err = %v", err)
	}
	if v, err := c.Get(context.Background(), "b", func() (int, error) { return 2, nil }); err != nil || v != 2 {
		t.Fatalf("after a failed load: %d, %v", v, err)
	}

	for i := range flight.DefaultSize {
		_, _ = c.Get(context.Background(), string(rune('c'+i)), func() (int, error) { return i, nil })
	}
	loads.Store(0)
	if v, _ := c.Get(context.Background(), "a", func() (int, error) { loads.Add(1); return 8, nil }); v != 8 || loads.Load() != 1 {
		t.Fatalf("an evicted key gave %d after %d loads, want a new load", v, loads.Load())
	}
}

// TestGetWaiterLeavesWithItsContext: a caller waiting for another's load
// returns when its own context ends.
func TestGetWaiterLeavesWithItsContext(t *testing.T) {
	var c flight.Cache[string, int]
	release := make(chan struct{})
	defer close(release)
	loading := make(chan struct{})
	go func() {
		_, _ = c.Get(context.Background(), "a", func() (int, error) { close(loading); <-release; return 1, nil })
	}()
	<-loading
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(ctx, "a", func() (int, error) { return 2, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
}
