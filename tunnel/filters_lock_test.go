package tunnel

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestOneAccountsFiltersDoNotStallAnotherAccount: one account attaches 32
// sessions to its Endpoint (what one client address may hold: 32 sockets),
// 31 of them with 16 header filters of 32 values each (the filters' limits),
// and sends requests with ~7 000 lines of the one header they name (a
// 64 KiB header block). Matching them is that account's own work: it is
// done with Hub.mu released, and costs a lookup per listed value, so
// another account's forwards, which take the same lock, go on as before.
func TestOneAccountsFiltersDoNotStallAnotherAccount(t *testing.T) {
	e := newEnv(t)
	// Account B: one agent that answers at once.
	e.agent(t, SessionInfo{AgentID: "b-agent", EndpointID: "ep-b", AccountID: "acc-b", Target: "127.0.0.1:3000"}, okAnswer)

	// Account A: a primary without filters that answers, and 31 sessions
	// whose 16 filters are all evaluated, the last one failing (no copies).
	e.agent(t, SessionInfo{AgentID: "a-primary", EndpointID: "ep-a", AccountID: "acc-a", Target: "127.0.0.1:3000"}, okAnswer)
	vals := func(p string) []string {
		v := make([]string, 32)
		for i := range v {
			v[i] = fmt.Sprintf("%s%02d", p, i+1)
		}
		return v
	}
	var fs []domain.Filter
	for range 15 {
		fs = append(fs, domain.Filter{Kind: domain.FilterHeader, Name: "X-A", Values: vals("v")})
	}
	fs = append(fs, domain.Filter{Kind: domain.FilterHeader, Name: "X-A", Values: vals("w")})
	if err := domain.ValidateFilters(fs); err != nil {
		t.Fatal(err)
	}
	for i := range 31 {
		e.agent(t, SessionInfo{AgentID: fmt.Sprintf("a-%d", i), EndpointID: "ep-a", AccountID: "acc-a", Target: "127.0.0.1:3000", Filters: fs}, never)
	}
	// ~7 000 headers "X-A: zzz" fit a 64 KiB header block; the last matches.
	var heavy []domain.Header
	for range 7000 {
		heavy = append(heavy, domain.Header{Name: "X-A", Value: "zzz"})
	}
	heavy = append(heavy, domain.Header{Name: "X-A", Value: "v32"})

	bLatencies := func(n int) []time.Duration {
		var ds []time.Duration
		for range n {
			cmd := e.Receive(t, "ep-b", "acc-b")
			start := time.Now()
			out, err := e.hub.Forward(context.Background(), cmd)
			if err != nil || out.Status != 200 {
				t.Fatalf("B forward: %+v %v", out, err)
			}
			ds = append(ds, time.Since(start))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds
	}
	quiet := bLatencies(20)

	// Measure one of A's dispatches alone.
	cmd := e.Receive(t, "ep-a", "acc-a")
	cmd.Headers = heavy
	start := time.Now()
	if _, err := e.hub.Forward(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	t.Logf("one of A's forwards took %v", time.Since(start))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 { // two senders to A's Endpoint
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c := e.Receive(t, "ep-a", "acc-a")
				c.Headers = heavy
				_, _ = e.hub.Forward(context.Background(), c)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	busy := bLatencies(20)
	close(stop)
	wg.Wait()
	t.Logf("B's forwards: quiet median %v max %v; while A sends: median %v max %v", quiet[10], quiet[19], busy[10], busy[19])
	if busy[10] > 10*quiet[10]+20*time.Millisecond {
		t.Errorf("another account's forwards slowed from a median of %v to %v", quiet[10], busy[10])
	}
}
