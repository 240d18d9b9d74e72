package harness

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLoadLimit bounds a load run whose spec sets no Limit.
const DefaultLoadLimit = 5 * time.Minute

// LoadSpec describes one bounded load run: at most Requests requests, at
// most Concurrency in flight, and no new request once Limit has passed.
type LoadSpec struct {
	Requests    int
	Concurrency int
	Limit       time.Duration // 0 means DefaultLoadLimit
	// NewRequest builds request i (0 ≤ i < Requests).
	NewRequest func(i int) *http.Request
	// OK judges an answer; a false answer counts as an error.
	OK func(*http.Response) bool
}

// LoadResult summarises a load run.
type LoadResult struct {
	Requests   int         // requests sent (each answered or failed)
	Errors     int         // transport failures and answers OK refused
	Statuses   map[int]int // answers by status code
	FirstError string      // the first failure, for diagnosis
	Stopped    bool        // Limit passed before every request was sent
	Elapsed    time.Duration
	P50, P99   time.Duration // latency of the requests sent, failures included
}

// RPS is requests per second.
func (r LoadResult) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Err describes what went wrong, or is nil when every request was sent
// and answered as expected.
func (r LoadResult) Err() error {
	switch {
	case r.Stopped:
		return fmt.Errorf("load stopped by its time limit after %d requests in %s (statuses %v, %d errors, first: %s)",
			r.Requests, r.Elapsed.Round(time.Millisecond), r.Statuses, r.Errors, r.FirstError)
	case r.Errors > 0:
		return fmt.Errorf("%d of %d requests failed (statuses %v); first: %s", r.Errors, r.Requests, r.Statuses, r.FirstError)
	}
	return nil
}

// Load sends n requests with the given concurrency within DefaultLoadLimit;
// newReq builds request i and ok judges its answer.
func Load(client *http.Client, n, concurrency int, newReq func(i int) *http.Request, ok func(*http.Response) bool) LoadResult {
	return RunLoad(client, LoadSpec{Requests: n, Concurrency: concurrency, NewRequest: newReq, OK: ok})
}

// RunLoad runs spec with client. It is bounded in count and in time, and
// every request also has the client's own timeout.
func RunLoad(client *http.Client, spec LoadSpec) LoadResult {
	limit := spec.Limit
	if limit <= 0 {
		limit = DefaultLoadLimit
	}
	n, workers := max(spec.Requests, 0), max(spec.Concurrency, 1)
	lat := make([]time.Duration, n)
	sent := make([]bool, n)
	var (
		next     atomic.Int64
		errs     atomic.Int64
		stopped  atomic.Bool
		mu       sync.Mutex
		statuses = map[int]int{}
		first    string
		wg       sync.WaitGroup
	)
	fail := func(msg string) {
		errs.Add(1)
		mu.Lock()
		if first == "" {
			first = msg
		}
		mu.Unlock()
	}
	start := time.Now()
	deadline := start.Add(limit)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if time.Now().After(deadline) {
					stopped.Store(true)
					return
				}
				req := spec.NewRequest(i)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					lat[i], sent[i] = time.Since(t0), true
					fail(fmt.Sprintf("request %d: %v", i, err))
					continue
				}
				good := spec.OK == nil || spec.OK(resp)
				snippet := drain(resp, !good)
				lat[i], sent[i] = time.Since(t0), true
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
				if !good {
					fail(fmt.Sprintf("request %d: %s %q", i, resp.Status, snippet))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	done := make([]time.Duration, 0, n)
	for i, ok := range sent {
		if ok {
			done = append(done, lat[i])
		}
	}
	slices.Sort(done)
	res := LoadResult{
		Requests: len(done), Errors: int(errs.Load()), Statuses: statuses, FirstError: first,
		Stopped: stopped.Load(), Elapsed: elapsed,
	}
	if len(done) > 0 {
		res.P50, res.P99 = done[len(done)/2], done[len(done)*99/100]
	}
	return res
}

// drain reads the answer to the end so the connection is reused; when keep
// is set it returns the first bytes, to explain a failure.
func drain(resp *http.Response, keep bool) string {
	defer resp.Body.Close()
	var snippet []byte
	if keep {
		snippet, _ = io.ReadAll(io.LimitReader(resp.Body, 200))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return string(snippet)
}

// LoadClient is a keep-alive client sized for concurrency.
func LoadClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{MaxIdleConns: concurrency * 2, MaxIdleConnsPerHost: concurrency * 2, DisableCompression: true},
	}
}
