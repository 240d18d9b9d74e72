package systemtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// jsonBody is a 1 KiB JSON webhook payload.
var jsonBody = func() []byte {
	b := []byte(`{"type":"payment_intent.succeeded","data":{"pad":"`)
	b = append(b, bytes.Repeat([]byte("x"), 1024-len(b)-3)...)
	return append(b, `"}}`...)
}()

// bareServer is the physical limit on this machine: a net/http server that
// reads the body and answers 204, nothing else.
func bareServer(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func reportLoad(b *testing.B, res harness.LoadResult) {
	b.Helper()
	if res.Errors > 0 {
		b.Fatalf("%d of %d requests failed", res.Errors, res.Requests)
	}
	b.ReportMetric(res.RPS(), "req/s")
	b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
}

// BenchmarkInspectorIngest compares durable inspector ingest through the real
// relay binary with a bare net/http server, same client, same machine.
//
//	go test -run '^$' -bench InspectorIngest -benchtime 20000x ./systemtest
func BenchmarkInspectorIngest(b *testing.B) {
	bare := bareServer(b)
	r := harness.Start(b, "")
	var out struct{ CreateInspector struct{ ID string } }
	r.MustGraphQL(b, "", `mutation{ createInspector{ id } }`, nil, &out)
	host := r.AddressHost(out.CreateInspector.ID)
	relayAddr := "127.0.0.1:" + strconv.Itoa(r.Port)
	for _, c := range []int{1, 16, 64} {
		for _, target := range []struct{ name, addr, host string }{{"bare", bare, "bare"}, {"relay", relayAddr, host}} {
			b.Run(fmt.Sprintf("%s/c=%d", target.name, c), func(b *testing.B) {
				client := harness.LoadClient(c)
				res := harness.Load(client, b.N, c, func(i int) *http.Request {
					req, _ := http.NewRequest(http.MethodPost, "http://"+target.addr+"/webhooks/"+strconv.Itoa(i), bytes.NewReader(jsonBody))
					req.Host = target.host
					req.Header.Set("Content-Type", "application/json")
					return req
				}, func(resp *http.Response) bool { return resp.StatusCode == http.StatusNoContent })
				reportLoad(b, res)
			})
		}
	}
}

// BenchmarkInspectorMemory sends b.N deliveries (use -benchtime 100000x) and
// reports the relay's resident memory before and after: history lives on
// disk, so RSS must stay flat however long it grows.
func BenchmarkInspectorMemory(b *testing.B) {
	r := harness.Start(b, "")
	var out struct{ CreateInspector struct{ ID string } }
	r.MustGraphQL(b, "", `mutation{ createInspector{ id } }`, nil, &out)
	host := r.AddressHost(out.CreateInspector.ID)
	addr := "127.0.0.1:" + strconv.Itoa(r.Port)
	client := harness.LoadClient(16)
	send := func(n int) harness.LoadResult {
		return harness.Load(client, n, 16, func(i int) *http.Request {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/m/"+strconv.Itoa(i), bytes.NewReader(jsonBody))
			req.Host = host
			return req
		}, func(resp *http.Response) bool { return resp.StatusCode == http.StatusNoContent })
	}
	warm := send(2000)
	rssWarm := rssKiB(b, r.PID())
	res := send(b.N)
	rssAfter := rssKiB(b, r.PID())
	if warm.Errors+res.Errors > 0 {
		b.Fatalf("%d requests failed", warm.Errors+res.Errors)
	}
	b.ReportMetric(float64(rssWarm)/1024, "rss-MiB-after-2k")
	b.ReportMetric(float64(rssAfter)/1024, "rss-MiB-after-N")
}

// rssKiB reads VmRSS of a process from /proc.
func rssKiB(b *testing.B, pid int) int {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(line)[1])
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
