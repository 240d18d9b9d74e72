package systemtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestAnsweredDeliveriesSurviveSIGKILL kills the server in the middle of a
// concurrent load: every request that was answered 204 must be in the
// history after a restart, because the append is durable before the answer.
func TestAnsweredDeliveriesSurviveSIGKILL(t *testing.T) {
	r := harness.Start(t, "", loadFlags...)
	loadThenStop(t, r, func() { r.Kill(t) })
}

// TestSIGTERMDrainsInFlightRequests stops the server gracefully under load:
// it exits 0 and loses no answered delivery.
func TestSIGTERMDrainsInFlightRequests(t *testing.T) {
	r := harness.Start(t, "", loadFlags...)
	loadThenStop(t, r, func() {
		r.Stop(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if code, err := r.ExitCode(ctx); err != nil || code != 0 {
			t.Errorf("exit after SIGTERM: code %d, %v\n%s", code, err, r.Output())
		}
	})
}

// loadFlags lift the per-address rate limit and the inspector quota for
// tests that load one address on purpose.
var loadFlags = []string{"--address-rate", "off", "--inspector-quota", "off"}

// loadThenStop runs a concurrent load on an inspector, stops the server with
// stop once the load is under way, restarts it, and checks that every
// request answered 204 is in the history.
func loadThenStop(t *testing.T, r *harness.Relay, stop func()) {
	t.Helper()
	id, _ := createInspector(t, r)
	host := r.AddressHost(id)

	var (
		mu       sync.Mutex
		answered = map[string]bool{}
		count    atomic.Int64
		wg       sync.WaitGroup
		quit     = make(chan struct{})
	)
	const workers, maxPerWorker = 16, 2000
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < maxPerWorker; i++ {
				select {
				case <-quit:
					return
				default:
				}
				path := fmt.Sprintf("/load/%d/%d", w, i)
				resp, err := r.TrySendRaw(harness.RawRequest{Method: "POST", Target: path, Host: host, Body: []byte(`{"n":1}`)})
				if err != nil {
					return // the server is gone
				}
				if resp.Status == 204 {
					mu.Lock()
					answered[path] = true
					mu.Unlock()
					count.Add(1)
				}
			}
		}(w)
	}
	// Kill once the load is well under way.
	harness.Eventually(t, 60*time.Second, "300 answered requests", func() bool { return count.Load() >= 300 })
	stop()
	close(quit)
	wg.Wait()

	r.Restart(t)
	// After the restart the views catch up with the log before serving.
	got := map[string]bool{}
	for _, d := range history(t, r, id, 500) {
		got[d.Path] = true
	}
	missing := 0
	for p := range answered {
		if !got[p] {
			missing++
			if missing < 5 {
				t.Errorf("answered 204 but not in history after restart: %s", p)
			}
		}
	}
	t.Logf("answered before the stop: %d; history after restart: %d rows", len(answered), len(got))
	if missing > 0 {
		t.Fatalf("%d answered deliveries lost", missing)
	}
}
