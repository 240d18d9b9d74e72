package systemtest

// BenchmarkNoisySearch: account A runs the worst searches it is allowed
// (32 at once, each a bodyContains that matches nothing over 500
// deliveries of 256 KiB, sent again as soon as it is answered) while
// account B reads its history page and its account and sends deliveries.
// Idle and noisy windows alternate (other programs on a shared machine
// then weigh on both alike); it reports B's p50 and p99 per operation in
// each. A refused search is sent again after retryAfterSeconds
// (honours-retry-after) or after 100 ms (ignores-retry-after: the refusals
// are then a flood of their own). docs/benchmarks.md has the command and
// the figures.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

const (
	// noisyWindow is one idle or one noisy window; noisyRounds pairs of
	// them are measured.
	noisyWindow = 5 * time.Second
	noisyRounds = 3
	// noisyDeliveries of noisyBody bytes are A's history.
	noisyDeliveries = 500
	noisyBody       = 256 << 10
	// noisySearchers is how many searches A keeps going at once.
	noisySearchers = 32
)

func BenchmarkNoisySearch(b *testing.B) {
	for _, honour := range []bool{true, false} {
		name := "honours-retry-after"
		if !honour {
			name = "ignores-retry-after"
		}
		b.Run(name, func(b *testing.B) { benchNoisySearch(b, honour) })
	}
}

func benchNoisySearch(b *testing.B, honour bool) {
	r := harness.Start(b, "", "--log-level", "error", "--address-rate", "off")
	tokA := hostileGraphQL(b, r, attackerIP, "", `mutation{ signUp(name: "noisy"){ token } }`, "signUp", "token")
	epA := hostileGraphQL(b, r, attackerIP, tokA, `mutation{ createEndpoint(input:{name:"a", mode: LOG}){ id } }`, "createEndpoint", "id")
	tokB := hostileGraphQL(b, r, "127.0.0.1", "", `mutation{ signUp(name: "quiet"){ token } }`, "signUp", "token")
	epB := hostileGraphQL(b, r, "127.0.0.1", tokB, `mutation{ createEndpoint(input:{name:"b", mode: LOG}){ id } }`, "createEndpoint", "id")
	fillEndpoint(b, r, epA, noisyDeliveries, bytes.Repeat([]byte("b"), noisyBody))
	fillEndpoint(b, r, epB, 50, jsonBody)
	if _, err := harness.WaitIdle(r.PID(), 200*time.Millisecond, 30*time.Second); err != nil {
		b.Fatal(err)
	}

	idle, during := newQuietResult(), newQuietResult()
	var idleCPU, duringCPU harness.CPUUsage
	var searches noisyCount
	measure := func(into *quietResult, cpu *harness.CPUUsage) {
		m, err := harness.StartCPU(r.PID())
		if err != nil {
			b.Fatal(err)
		}
		quietAccount(context.Background(), r, tokB, epB, noisyWindow, into)
		u, err := m.Stop()
		if err != nil {
			b.Fatal(err)
		}
		cpu.Wall += u.Wall
		cpu.Machine += u.Machine
		if len(cpu.PerPID) == 0 {
			cpu.PerPID = []time.Duration{0}
		}
		cpu.PerPID[0] += u.PerPID[0]
	}
	for range noisyRounds {
		measure(idle, &idleCPU)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range noisySearchers {
			wg.Go(func() { noisySearches(ctx, r, tokA, epA, honour, &searches) })
		}
		measure(during, &duringCPU)
		cancel()
		wg.Wait()
	}

	peak, err := harness.ProcPeakRSSKiB(r.PID())
	if err != nil {
		b.Fatal(err)
	}
	for _, op := range []string{"page", "me", "ingest"} {
		i, d := idle.lat[op], during.lat[op]
		b.ReportMetric(ms(pct(i, 50)), op+"-idle-p50-ms")
		b.ReportMetric(ms(pct(i, 99)), op+"-idle-p99-ms")
		b.ReportMetric(ms(pct(d, 50)), op+"-during-p50-ms")
		b.ReportMetric(ms(pct(d, 99)), op+"-during-p99-ms")
	}
	cores := float64(runtime.NumCPU())
	b.ReportMetric(100*idleCPU.PerPID[0].Seconds()/idleCPU.Wall.Seconds(), "relay-idle-cpu-%")
	b.ReportMetric(100*duringCPU.PerPID[0].Seconds()/duringCPU.Wall.Seconds(), "relay-during-cpu-%")
	b.ReportMetric(100*idleCPU.Others().Seconds()/(idleCPU.Wall.Seconds()*cores), "others-idle-cpu-%")
	b.ReportMetric(100*duringCPU.Others().Seconds()/(duringCPU.Wall.Seconds()*cores), "others-during-cpu-%")
	b.ReportMetric(float64(idle.failed.Load()+during.failed.Load()), "quiet-failed")
	b.ReportMetric(float64(searches.answered.Load()), "searches-answered")
	b.ReportMetric(float64(searches.cut.Load()), "searches-cut")
	b.ReportMetric(float64(searches.limited.Load()), "searches-limited")
	b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
	b.ReportMetric(0, "ns/op")
	if first := during.first.Load(); first != nil {
		b.Logf("first failure of B: %s", *first)
	}
	if searches.answered.Load() == 0 {
		b.Errorf("no search of A was answered: %s", searches.firstOther())
	}
}

func pct(lat []time.Duration, p int) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// fillEndpoint sends n deliveries of body to an Endpoint, four at a time.
func fillEndpoint(b *testing.B, r *harness.Relay, endpoint string, n int, body []byte) {
	b.Helper()
	client := clientFrom("127.0.0.1", 4)
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/fill?i="+strconv.FormatInt(i, 10), bytes.NewReader(body))
				req.Host = r.AddressHost(endpoint)
				if err := expectStatus(client.Do(req))(http.StatusNoContent); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("fill %s: %v", endpoint, err)
	}
}

// quietResult is what B saw, by operation.
type quietResult struct {
	mu     sync.Mutex
	lat    map[string][]time.Duration
	failed atomic.Int64
	first  atomic.Pointer[string]
}

func newQuietResult() *quietResult { return &quietResult{lat: map[string][]time.Duration{}} }

// quietWorkers is how many of each of B's operations run at once, each
// every 50 ms: 40 of each a second.
const quietWorkers = 2

// quietAccount is B for d, adding to res: its history page, its account
// (me) and a delivery to its Endpoint, each from quietWorkers workers
// every 50 ms, one at a time per worker.
func quietAccount(ctx context.Context, r *harness.Relay, token, endpoint string, d time.Duration, res *quietResult) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	client := clientFrom("127.0.0.1", 3*quietWorkers)
	client.Timeout = 30 * time.Second
	defer client.CloseIdleConnections()
	base := "http://127.0.0.1:" + strconv.Itoa(r.Port)
	gql := func(query string) func() *http.Request {
		body, _ := json.Marshal(map[string]any{"query": query, "variables": map[string]any{"id": endpoint}})
		return func() *http.Request {
			req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
			req.Host = "localhost:" + strconv.Itoa(r.Port)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			return req
		}
	}
	ops := map[string]func() *http.Request{
		"page": gql(`query($id: ID!){ endpoint(id: $id){ deliveries(first: 20){ nodes{ id method path responseStatus } } } }`),
		"me":   gql(`{ me { id name } }`),
		"ingest": func() *http.Request {
			req, _ := http.NewRequest(http.MethodPost, base+"/hook", bytes.NewReader(jsonBody))
			req.Host = r.AddressHost(endpoint)
			req.Header.Set("Content-Type", "application/json")
			return req
		},
	}
	var wg sync.WaitGroup
	for op, mk := range ops {
		want := http.StatusOK
		if op == "ingest" {
			want = http.StatusNoContent
		}
		for range quietWorkers {
			wg.Go(func() {
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
					t0 := time.Now()
					err := expectStatus(client.Do(mk()))(want)
					took := time.Since(t0)
					res.mu.Lock()
					res.lat[op] = append(res.lat[op], took)
					res.mu.Unlock()
					if err != nil {
						res.failed.Add(1)
						s := op + ": " + err.Error()
						res.first.CompareAndSwap(nil, &s)
					}
				}
			})
		}
	}
	wg.Wait()
}

// noisyCount is what A's searches got.
type noisyCount struct {
	answered, cut, limited atomic.Int64
	other                  atomic.Pointer[string]
}

func (n *noisyCount) firstOther() string {
	if s := n.other.Load(); s != nil {
		return *s
	}
	return "none refused otherwise"
}

// noisySearches is one of A's searchers: a body search of its whole
// history that matches nothing, sent again as soon as it is answered, and
// when refused after retryAfterSeconds (honour) or 100 ms, until ctx ends.
func noisySearches(ctx context.Context, r *harness.Relay, token, endpoint string, honour bool, n *noisyCount) {
	client := clientFrom(attackerIP, 1)
	defer client.CloseIdleConnections()
	body, _ := json.Marshal(map[string]any{
		"query":     `query($id: ID!){ endpoint(id: $id){ deliveries(first: 100, filter: {bodyContains: "never there"}){ nodes{ id } searchCut pageInfo{ endCursor } } } }`,
		"variables": map[string]any{"id": endpoint},
	})
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/graphql", bytes.NewReader(body))
		req.Host = "localhost:" + strconv.Itoa(r.Port)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var out struct {
			Data struct {
				Endpoint struct{ Deliveries struct{ SearchCut bool } }
			}
			Errors []harness.GQLError
		}
		_ = json.Unmarshal(raw, &out)
		switch {
		case len(out.Errors) > 0 && out.Errors[0].Code() == "RATE_LIMITED":
			n.limited.Add(1)
			wait := 100 * time.Millisecond
			if secs, ok := out.Errors[0].Extensions["retryAfterSeconds"].(float64); ok && honour {
				wait = time.Duration(secs * float64(time.Second))
			}
			pause(ctx, wait)
		case len(out.Errors) > 0 || resp.StatusCode != http.StatusOK:
			s := fmt.Sprintf("%d %.200s", resp.StatusCode, raw)
			n.other.CompareAndSwap(nil, &s)
			pause(ctx, 100*time.Millisecond)
		default:
			n.answered.Add(1)
			if out.Data.Endpoint.Deliveries.SearchCut {
				n.cut.Add(1)
			}
		}
	}
}
