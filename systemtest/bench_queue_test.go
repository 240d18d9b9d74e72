package systemtest

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// BenchmarkQueueIngest compares a QUEUE Endpoint's ingest (record durably,
// answer 202 with the delivery's id; no listener, so nothing is sent) with
// a bare net/http server, as BenchmarkInspectorIngest does for an
// inspector. relay/bare is the share of the plain HTTP rate kept.
//
//	go test -run '^$' -bench 'QueueIngest$' -benchtime 20000x -timeout 30m ./systemtest
func BenchmarkQueueIngest(b *testing.B) {
	bare := benchTarget{name: "bare", addr: benchServer(b, http.StatusAccepted, nil), host: "bare.test", want: http.StatusAccepted}
	r := harness.Start(b, "", append(profArgs(), "--queue-backlog", "10000000")...)
	keepLog(b, r)
	var su struct{ SignUp struct{ Token string } }
	r.MustGraphQL(b, "", `mutation{ signUp(name: "bench"){ token } }`, nil, &su)
	var out struct{ CreateEndpoint struct{ ID string } }
	r.MustGraphQL(b, su.SignUp.Token, `mutation{ createEndpoint(input: {name: "q", mode: QUEUE}){ id } }`, nil, &out)
	relay := benchTarget{
		name: "relay", addr: "127.0.0.1:" + strconv.Itoa(r.Port), host: r.AddressHost(out.CreateEndpoint.ID),
		want: http.StatusAccepted, procs: []benchProc{{"relay", r.PID()}},
	}
	benchCompare(b, bare, relay, "relay/bare", nil)
}

// BenchmarkQueueDrain queues b.N deliveries with no listener, then starts
// a real agent and measures how fast the queue drains into a local handler
// that answers 200 at once: unordered (100 in flight, 1 000/s) and strict
// (one at a time).
//
//	go test -run '^$' -bench 'QueueDrain' -benchtime 2000x -timeout 30m ./systemtest
func BenchmarkQueueDrain(b *testing.B) {
	for _, mode := range []struct {
		name     string
		ordering string
	}{{"unordered", "UNORDERED"}, {"strict", "STRICT"}} {
		b.Run(mode.name, func(b *testing.B) {
			var got atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got.Add(1)
				w.WriteHeader(http.StatusOK)
			}))
			b.Cleanup(srv.Close)
			local := strings.TrimPrefix(srv.URL, "http://")
			r := harness.Start(b, "", append(profArgs(), "--queue-backlog", "10000000", "--address-rate", "off")...)
			keepLog(b, r)
			var su struct{ SignUp struct{ Token string } }
			r.MustGraphQL(b, "", `mutation{ signUp(name: "bench"){ token } }`, nil, &su)
			var out struct{ CreateEndpoint struct{ ID string } }
			r.MustGraphQL(b, su.SignUp.Token, `mutation($o: QueueOrdering!){ createEndpoint(input: {name: "q", mode: QUEUE,
				queue: {ordering: $o, maxInFlight: 100, ratePerSecond: 1000}}){ id } }`, map[string]any{"o": mode.ordering}, &out)
			t := benchTarget{name: "relay", addr: "127.0.0.1:" + strconv.Itoa(r.Port), host: r.AddressHost(out.CreateEndpoint.ID), want: http.StatusAccepted}
			if err := t.load(b.N, 16).Err(); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			r.StartAgent(b, su.SignUp.Token, out.CreateEndpoint.ID, local)
			deadline := start.Add(benchLimit)
			for got.Load() < int64(b.N) {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d delivered after %s", got.Load(), b.N, benchLimit)
				}
				time.Sleep(5 * time.Millisecond)
			}
			took := time.Since(start)
			b.ReportMetric(float64(b.N)/took.Seconds(), "delivered/s")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %d deliveries drained in %s (agent start included)", mode.name, b.N, took.Round(time.Millisecond))
		})
	}
}

// BenchmarkQueueFirstAttempt sends one delivery at a time to a QUEUE
// Endpoint with an agent connected, each after the queue has been empty
// for a while, and measures how long after its 202 the local handler gets
// it: what a quiet relay's queue adds to one webhook.
//
//	go test -run '^$' -bench 'QueueFirstAttempt' -benchtime 40x ./systemtest
func BenchmarkQueueFirstAttempt(b *testing.B) {
	arrived := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- time.Now()
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(srv.Close)
	r := harness.Start(b, "", profArgs()...)
	keepLog(b, r)
	var su struct{ SignUp struct{ Token string } }
	r.MustGraphQL(b, "", `mutation{ signUp(name: "bench"){ token } }`, nil, &su)
	var out struct{ CreateEndpoint struct{ ID string } }
	r.MustGraphQL(b, su.SignUp.Token, `mutation{ createEndpoint(input: {name: "q", mode: QUEUE}){ id } }`, nil, &out)
	r.StartAgent(b, su.SignUp.Token, out.CreateEndpoint.ID, strings.TrimPrefix(srv.URL, "http://"))
	client := &http.Client{Timeout: 10 * time.Second}
	var waits []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(250 * time.Millisecond) // the last attempt's decision is in, the queue empty
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/", strings.NewReader(`{"n":`+strconv.Itoa(i)+`}`))
		if err != nil {
			b.Fatal(err)
		}
		req.Host = r.AddressHost(out.CreateEndpoint.ID)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		answered := time.Now()
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("status %d, want 202", resp.StatusCode)
		}
		select {
		case at := <-arrived:
			waits = append(waits, at.Sub(answered))
		case <-time.After(10 * time.Second):
			b.Fatalf("delivery %d not sent in 10 s", i)
		}
	}
	b.StopTimer()
	ms := func(p int) float64 { return float64(pct(waits, p).Microseconds()) / 1000 }
	b.ReportMetric(ms(50), "p50-ms")
	b.ReportMetric(ms(90), "p90-ms")
	b.ReportMetric(ms(100), "max-ms")
	b.ReportMetric(0, "ns/op")
}
