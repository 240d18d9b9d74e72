package harness

import (
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// LoadResult summarises a bounded load run.
type LoadResult struct {
	Requests int
	Errors   int
	Elapsed  time.Duration
	P50, P99 time.Duration
}

// RPS is requests per second.
func (r LoadResult) RPS() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// Load sends n requests with the given concurrency; newReq builds request i
// and ok judges its answer. It is bounded in count, and every request has the
// client's timeout.
func Load(client *http.Client, n, concurrency int, newReq func(i int) *http.Request, ok func(*http.Response) bool) LoadResult {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				resp, err := client.Do(newReq(i))
				if err != nil {
					errs.Add(1)
					lat[i] = time.Since(t0)
					continue
				}
				drain(resp)
				if !ok(resp) {
					errs.Add(1)
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	return LoadResult{Requests: n, Errors: int(errs.Load()), Elapsed: elapsed, P50: lat[n/2], P99: lat[(n*99)/100]}
}

func drain(resp *http.Response) {
	buf := make([]byte, 32<<10)
	for {
		if _, err := resp.Body.Read(buf); err != nil {
			break
		}
	}
	resp.Body.Close()
}

// LoadClient is a keep-alive client sized for concurrency.
func LoadClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{MaxIdleConns: concurrency * 2, MaxIdleConnsPerHost: concurrency * 2, DisableCompression: true},
	}
}
