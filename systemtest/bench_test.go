package systemtest

// Benchmarks of the real relay binary against a bare net/http server on the
// same machine, in the same run. docs/benchmarks.md has the commands, the
// figures and what they mean.

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// jsonBody is a 1 KiB JSON webhook payload.
var jsonBody = func() []byte {
	b := []byte(`{"type":"payment_intent.succeeded","data":{"pad":"`)
	b = append(b, bytes.Repeat([]byte("x"), 1024-len(b)-3)...)
	return append(b, `"}}`...)
}()

// Bounds of every benchmark load: warm-up size and the time one load may take.
const (
	benchWarmup = 500
	benchLimit  = 3 * time.Minute
	// benchQuiet and benchSettle bound the wait for a server to finish
	// the work a load left behind (views catching up) before its CPU is read.
	benchQuiet  = 300 * time.Millisecond
	benchSettle = 30 * time.Second
)

// benchServer starts a net/http server on 127.0.0.1 that reads the body and
// answers status with body: the least any webhook receiver can do.
func benchServer(b *testing.B, status int, body []byte) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		if len(body) > 0 {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// benchTarget is one server a benchmark sends the same requests to.
type benchTarget struct {
	name string // metric prefix: "bare", "relay", "direct", …
	addr string // host:port to dial
	host string // Host header
	want int    // status every answer must have
	// procs are the processes whose CPU the load costs, besides this test
	// process (the load generator and any in-process handler).
	procs []benchProc
	// tls, when set, sends the requests over https (HTTP/1.1, kept alive)
	// with this client configuration.
	tls *tls.Config
}

// benchProc is a process whose CPU a benchmark reports.
type benchProc struct {
	name string
	pid  int
}

// load sends n requests to t with concurrency c, bounded by benchLimit.
func (t benchTarget) load(n, c int) harness.LoadResult {
	client := harness.LoadClient(c)
	defer client.CloseIdleConnections()
	scheme := "http"
	if t.tls != nil {
		client.Transport.(*http.Transport).TLSClientConfig = t.tls
		scheme = "https"
	}
	return harness.RunLoad(client, harness.LoadSpec{
		Requests: n, Concurrency: c, Limit: benchLimit,
		NewRequest: func(i int) *http.Request {
			req, _ := http.NewRequest(http.MethodPost, scheme+"://"+t.addr+"/webhooks/stripe?n="+strconv.Itoa(i), bytes.NewReader(jsonBody))
			req.Host = t.host
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Stripe-Signature", "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd")
			return req
		},
		OK: func(resp *http.Response) bool { return resp.StatusCode == t.want },
	})
}

// benchRun is one measured load of one target.
type benchRun struct {
	res     harness.LoadResult
	cpu     harness.CPUUsage // PerPID[0] is this process, then t.procs in order
	written []int64          // bytes each of t.procs had written to storage
}

// measure loads t and reads the CPU it cost, including the work the servers
// finish after the last answer (it waits for them to go quiet).
func measure(b *testing.B, t benchTarget, n, c int) benchRun {
	b.Helper()
	pids := []int{os.Getpid()}
	for _, p := range t.procs {
		pids = append(pids, p.pid)
	}
	written := func() []int64 {
		out := make([]int64, len(t.procs))
		for i, p := range t.procs {
			n, err := harness.ProcWrittenBytes(p.pid)
			if err != nil {
				b.Fatal(err)
			}
			out[i] = n
		}
		return out
	}
	before := written()
	m, err := harness.StartCPU(pids...)
	if err != nil {
		b.Fatal(err)
	}
	res := t.load(n, c)
	if err := res.Err(); err != nil {
		b.Fatalf("%s c=%d: %v", t.name, c, err)
	}
	for _, p := range t.procs {
		idle, err := harness.WaitIdle(p.pid, benchQuiet, benchSettle)
		if err != nil {
			b.Fatal(err)
		}
		if !idle {
			b.Logf("%s: %s still busy %s after the load", t.name, p.name, benchSettle)
		}
	}
	cpu, err := m.Stop()
	if err != nil {
		b.Fatal(err)
	}
	after := written()
	for i := range after {
		after[i] -= before[i]
	}
	return benchRun{res: res, cpu: cpu, written: after}
}

// warm sends a short load to every target once, so that connections,
// caches and the Go runtime are warm before anything is measured.
func warm(b *testing.B, c int, targets ...benchTarget) {
	b.Helper()
	for _, t := range targets {
		if err := t.load(benchWarmup, c).Err(); err != nil {
			b.Fatalf("warm-up of %s: %v", t.name, err)
		}
	}
}

// reportLatency reports a run's rate and latency under the target's name.
func reportLatency(b *testing.B, name string, r benchRun) {
	b.Helper()
	b.ReportMetric(r.res.RPS(), name+"-req/s")
	b.ReportMetric(ms(r.res.P50), name+"-p50-ms")
	b.ReportMetric(ms(r.res.P99), name+"-p99-ms")
}

// reportCPU reports CPU-ms per 1000 requests of each process of a run, the
// storage writes per request of those that write, and how busy the rest of
// the machine was meanwhile (in % of all cores).
func reportCPU(b *testing.B, t benchTarget, r benchRun) {
	b.Helper()
	per1k := func(d time.Duration) float64 { return ms(d) * 1000 / float64(r.res.Requests) }
	b.ReportMetric(per1k(r.cpu.PerPID[0]), "loadgen-cpu-ms/1k")
	for i, p := range t.procs {
		b.ReportMetric(per1k(r.cpu.PerPID[i+1]), p.name+"-cpu-ms/1k")
		if r.written[i] > 0 {
			b.ReportMetric(float64(r.written[i])/1024/float64(r.res.Requests), p.name+"-disk-KiB/req")
		}
	}
	b.ReportMetric(othersPct(r.cpu), "others-cpu-%")
}

// othersPct is the machine's busy time outside the measured processes (and
// this one) during a measurement, in % of all cores.
func othersPct(u harness.CPUUsage) float64 {
	return 100 * u.Others().Seconds() / (u.Wall.Seconds() * float64(runtime.NumCPU()))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchLevels are the concurrencies the paired benchmarks load at: 1, 16
// and 64, or the comma-separated list in RELAY_BENCH_LEVELS (to look at the
// levels between them).
var benchLevels = func() []int {
	list := os.Getenv("RELAY_BENCH_LEVELS")
	if list == "" {
		return []int{1, 16, 64}
	}
	var levels []int
	for _, f := range strings.Split(list, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > benchMaxLevel {
			panic(fmt.Sprintf("RELAY_BENCH_LEVELS=%q: want concurrencies from 1 to %d, comma-separated", list, benchMaxLevel))
		}
		levels = append(levels, c)
	}
	return levels
}()

// benchMaxLevel bounds RELAY_BENCH_LEVELS: each level opens as many
// keep-alive connections to the relay and to the bare server.
const benchMaxLevel = 1024

// benchCompare runs base and got at concurrency 1, 16 and 64 (each op is one
// request to each) and reports both latencies, got's rate as a share of
// base's under the name ratio, got's CPU, and whatever extra adds.
func benchCompare(b *testing.B, base, got benchTarget, ratio string, extra func(b *testing.B, base, got benchRun)) {
	b.Helper()
	for _, c := range benchLevels {
		b.Run(fmt.Sprintf("c=%d", c), benchPair(c, base, got, ratio, extra))
	}
}

// benchPair is the sub-benchmark of benchCompare at concurrency c: it warms
// both targets once, then loads base and got with b.N requests each.
func benchPair(c int, base, got benchTarget, ratio string, extra func(b *testing.B, base, got benchRun)) func(b *testing.B) {
	warmed := false // the framework calls the function with b.N = 1 first
	return func(b *testing.B) {
		if !warmed {
			warm(b, c, base, got)
			warmed = true
		}
		baseRun := measure(b, base, b.N, c)
		gotRun := measure(b, got, b.N, c)
		reportLatency(b, base.name, baseRun)
		reportLatency(b, got.name, gotRun)
		b.ReportMetric(gotRun.res.RPS()/baseRun.res.RPS(), ratio)
		if extra != nil {
			extra(b, baseRun, gotRun)
		}
		reportCPU(b, got, gotRun)
		b.ReportMetric(0, "ns/op") // the op is two loads; its time means nothing
	}
}

// BenchmarkInspectorIngest compares durable inspector ingest through the real
// relay binary with a bare net/http server that reads the body and answers
// 204: same client, same 1 KiB JSON body, same machine, same run. Each op is
// one request to each. relay/bare is the share of the machine's plain HTTP
// rate the relay keeps while recording every request durably.
//
//	go test -run '^$' -bench 'InspectorIngest$' -benchtime 20000x -timeout 30m ./systemtest
func BenchmarkInspectorIngest(b *testing.B) {
	bare := benchTarget{name: "bare", addr: benchServer(b, http.StatusNoContent, nil), host: "bare.test", want: http.StatusNoContent}
	benchCompare(b, bare, benchStartInspector(b, "relay"), "relay/bare", nil)
}

// benchStartInspector starts a relay with one guest inspector and returns
// the target named name that sends the load to it (answered 204 by the
// relay, which records every request).
func benchStartInspector(b *testing.B, name string) benchTarget {
	b.Helper()
	r := harness.Start(b, "", profArgs()...)
	keepLog(b, r)
	var out struct{ CreateInspector struct{ ID string } }
	r.MustGraphQL(b, "", `mutation{ createInspector{ id } }`, nil, &out)
	return benchTarget{
		name: name, addr: "127.0.0.1:" + strconv.Itoa(r.Port), host: r.AddressHost(out.CreateInspector.ID),
		want: http.StatusNoContent, procs: []benchProc{{"relay", r.PID()}},
	}
}

// BenchmarkInspectorIngestTLS compares inspector ingest through two real
// relays, one serving plain HTTP and one serving TLS (a wildcard
// certificate from a test CA, ECDSA P-256), with the same client on
// kept-alive HTTP/1.1 connections. https/http is the share of the plain
// rate the relay keeps over TLS; relay-cpu-ms/1k is the TLS relay's CPU,
// http-relay-cpu-ms/1k the plain one's.
//
//	go test -run '^$' -bench InspectorIngestTLS -benchtime 5000x -count 3 -timeout 30m ./systemtest
func BenchmarkInspectorIngestTLS(b *testing.B) {
	inspector := func(r *harness.Relay) string {
		var out struct{ CreateInspector struct{ ID string } }
		r.MustGraphQL(b, "", `mutation{ createInspector{ id } }`, nil, &out)
		return out.CreateInspector.ID
	}
	plain := harness.Start(b, "", profArgs()...)
	ca := harness.NewCA(b)
	cert, key := ca.Issue(b, b.TempDir(), 1, "*.localhost", "localhost")
	secure := harness.StartTLS(b, "", ca, cert, key, profArgs()...)
	keepLog(b, plain)
	keepLog(b, secure)
	base := benchTarget{
		name: "http", addr: "127.0.0.1:" + strconv.Itoa(plain.Port), host: plain.AddressHost(inspector(plain)),
		want: http.StatusNoContent, procs: []benchProc{{"relay", plain.PID()}},
	}
	id := inspector(secure)
	got := benchTarget{
		name: "https", addr: "127.0.0.1:" + strconv.Itoa(secure.Port), host: secure.AddressHost(id),
		want: http.StatusNoContent, procs: []benchProc{{"relay", secure.PID()}},
		tls: &tls.Config{RootCAs: ca.Pool, ServerName: id + ".localhost"},
	}
	benchCompare(b, base, got, "https/http", func(b *testing.B, base, _ benchRun) {
		b.ReportMetric(ms(base.cpu.PerPID[1])*1000/float64(base.res.Requests), "http-relay-cpu-ms/1k")
	})
}

// BenchmarkInspectorMemory sends b.N deliveries to one inspector (use
// -benchtime 100000x) in ten equal steps and reports the relay's resident
// memory after the first 2000 and after all b.N: history lives on disk, so
// RSS must stay flat however long it grows. It also reports the rate of the
// first and the last step, which shows whether ingest slows as history grows.
//
//	go test -run '^$' -bench InspectorMemory -benchtime 100000x -timeout 30m ./systemtest
func BenchmarkInspectorMemory(b *testing.B) {
	switch {
	case b.N < 4000:
		// The framework's first call has b.N = 1; skipping there would
		// skip the whole benchmark, so small calls just do nothing.
		b.Logf("b.N = %d: too few deliveries to measure (use -benchtime 100000x)", b.N)
		b.ReportMetric(0, "ns/op")
		return
	case b.N > 1_000_000:
		b.Fatalf("b.N = %d: use -benchtime Nx with N at most 1000000", b.N)
	}
	r := harness.Start(b, "", loadFlags...)
	var out struct{ CreateInspector struct{ ID string } }
	r.MustGraphQL(b, "", `mutation{ createInspector{ id } }`, nil, &out)
	relay := benchTarget{
		name: "relay", addr: "127.0.0.1:" + strconv.Itoa(r.Port), host: r.AddressHost(out.CreateInspector.ID),
		want: http.StatusNoContent, procs: []benchProc{{"relay", r.PID()}},
	}
	const c = 16
	rss := func() float64 {
		if _, err := harness.WaitIdle(r.PID(), benchQuiet, benchSettle); err != nil {
			b.Fatal(err)
		}
		kib, err := harness.ProcRSSKiB(r.PID())
		if err != nil {
			b.Fatal(err)
		}
		return float64(kib) / 1024
	}
	send := func(n int) harness.LoadResult {
		res := relay.load(n, c)
		if err := res.Err(); err != nil {
			b.Fatal(err)
		}
		return res
	}

	first := send(2000)
	rssWarm := rss()
	step := (b.N - 2000 + 9) / 10
	var last harness.LoadResult
	for sent := 2000; sent < b.N; sent += step {
		last = send(min(step, b.N-sent))
		b.Logf("after %6d deliveries: %6.0f req/s, p50 %.2f ms, p99 %.2f ms, RSS %.1f MiB, data %.1f MiB",
			sent+last.Requests, last.RPS(), ms(last.P50), ms(last.P99), rss(), dirMiB(b, r.Data))
	}
	b.ReportMetric(rssWarm, "rss-MiB-after-2k")
	b.ReportMetric(rss(), "rss-MiB-after-N")
	b.ReportMetric(first.RPS(), "first-2k-req/s")
	b.ReportMetric(last.RPS(), "last-step-req/s")
	b.ReportMetric(dirMiB(b, r.Data), "data-MiB")
	b.ReportMetric(0, "ns/op")
}

// dirMiB is the size of the files in dir.
func dirMiB(b *testing.B, dir string) float64 {
	b.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, e := range entries {
		if info, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
	}
	return float64(total) / (1 << 20)
}

// keepLog writes the relay's output to RELAY_BENCH_LOG (with --log-level
// debug from profArgs) once the benchmark ends.
func keepLog(b *testing.B, r *harness.Relay) {
	b.Helper()
	if p := os.Getenv("RELAY_BENCH_LOG"); p != "" {
		b.Cleanup(func() {
			if err := os.WriteFile(p, []byte(r.Output()), 0o644); err != nil {
				b.Errorf("keep relay log: %v", err)
			}
		})
	}
}

// profArgs passes RELAY_BENCH_CPUPROFILE, RELAY_BENCH_TRACE and
// RELAY_BENCH_MEMPROFILE on to the relay's hidden --cpuprofile, --trace and
// --memprofile flags, and turns on debug logs
// for RELAY_BENCH_LOG. Benchmarks load one address on purpose: the address
// rate, the inspector quota and the account's rate and storage quota are
// lifted (loadFlags).
func profArgs() []string {
	args := append([]string(nil), loadFlags...)
	if p := os.Getenv("RELAY_BENCH_CPUPROFILE"); p != "" {
		args = append(args, "--cpuprofile", p)
	}
	if os.Getenv("RELAY_BENCH_LOG") != "" {
		args = append(args, "--log-level", "debug")
	}
	if p := os.Getenv("RELAY_BENCH_TRACE"); p != "" {
		args = append(args, "--trace", p)
	}
	if p := os.Getenv("RELAY_BENCH_MEMPROFILE"); p != "" {
		args = append(args, "--memprofile", p)
	}
	return args
}
