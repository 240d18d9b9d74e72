package graph_test

import (
	"fmt"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
)

// TestComparisonsAreBounded: a tenant's own delivery whose body is the
// largest JSON array a comparison walks, retried with an edited body of
// [], makes every comparison decode and walk 131 071 differences. One
// operation holds at most nine comparisons (the tenth is over the cost
// budget), and they run at most half the cores at once, so that what they
// hold at their peak is a few comparisons' worth, not one per alias.
func TestComparisonsAreBounded(t *testing.T) {
	e := newEnv(t)
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000"}`)
	auth := acct.auth
	epID := acct.endpoint
	body := []byte("[" + strings.Repeat("0,", 256<<9-2) + "0]") // 131 071 elements, 256 KiB less one byte
	empty := []byte("[]")
	e.seed(t, domain.DeliveryStream("d1"), time.Now().Add(-time.Minute),
		domain.DeliveryReceived{DeliveryID: "d1", Address: epID, AddressKind: domain.AddressEndpoint, AccountID: acct.id,
			Method: "POST", Target: "/hook", Host: epID + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
			Body: body, BodySize: int64(len(body)), Complete: true},
		domain.ForwardRequested{DeliveryID: "d1", AttemptID: "d1-a1", EndpointID: epID, Retry: true, Edit: &domain.RequestEdit{Body: &empty}},
		domain.ForwardFailed{DeliveryID: "d1", AttemptID: "d1-a1", Status: 503, Error: "x", DurationMs: 1})

	// n aliased comparisons in one operation.
	query := func(n int) string {
		var b strings.Builder
		b.WriteString(`query { delivery(id: "d1") {`)
		for i := range n {
			fmt.Fprintf(&b, ` c%d: compare(a: "original", b: "1") { request { where } }`, i)
		}
		return b.String() + ` } }`
	}
	var out map[string]any
	err := e.c.Post(query(10), &out, auth)
	if err == nil || !strings.Contains(err.Error(), "QUERY_TOO_COMPLEX") {
		t.Fatalf("ten comparisons in one operation: %v, want QUERY_TOO_COMPLEX", err)
	}

	runtime.GC()
	var peak atomic.Uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(sample)
			peak.Store(max(peak.Load(), sample[0].Value.Uint64()))
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var nine struct {
		Delivery map[string]struct {
			Request []struct{ Where string }
		}
	}
	err = e.c.Post(query(9), &nine, auth)
	close(stop)
	<-sampled
	if err != nil {
		t.Fatalf("nine comparisons: %v", err)
	}
	c0 := nine.Delivery["c0"].Request
	if len(c0) != 101 || c0[100].Where != "…" {
		t.Fatalf("a comparison listed %d changes, want 100 and one that counts the rest", len(c0))
	}
	// One comparison of these bodies allocates ~23 MiB, all of it garbage
	// once it is done: at most half the cores' worth at once, each twice
	// over between collections, and the rest of the process.
	limit := uint64(graph.DefaultGlobalSearches())*2*24<<20 + 64<<20
	t.Logf("peak heap objects %d MiB, limit %d MiB", peak.Load()>>20, limit>>20)
	if peak.Load() > limit {
		t.Errorf("nine comparisons held %d MiB of heap at their peak, want at most %d", peak.Load()>>20, limit>>20)
	}
}

// TestComparisonOfManyHeadersOfOneName: a tenant's local process answers
// with thousands of lines of one header name (the log keeps 1 MiB of a
// response's header names and values, however many lines); comparing two
// such answers joins each name's values once, so its allocations follow
// the headers' size, not its square. Joining them one line at a time
// allocated 2.6 GB for 5 000 lines of 100 bytes a side.
func TestComparisonOfManyHeadersOfOneName(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000"}`)
	epID := acct.endpoint
	const lines = 5000
	answer := func(last string) []domain.Header {
		hs := make([]domain.Header, lines)
		for i := range hs {
			hs[i] = domain.Header{Name: "X-A", Value: strings.Repeat("v", 99) + last}
		}
		return hs
	}
	e.seed(t, domain.DeliveryStream("d1"), time.Now().Add(-time.Minute),
		domain.DeliveryReceived{DeliveryID: "d1", Address: epID, AddressKind: domain.AddressEndpoint, AccountID: acct.id,
			Method: "POST", Target: "/hook", Host: epID + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
			Body: []byte("{}"), BodySize: 2, Complete: true},
		domain.ForwardRequested{DeliveryID: "d1", AttemptID: "d1-a1", EndpointID: epID},
		domain.ForwardResponded{DeliveryID: "d1", AttemptID: "d1-a1", Status: 200, Headers: answer("1"), DurationMs: 1},
		domain.ForwardRequested{DeliveryID: "d1", AttemptID: "d1-a2", EndpointID: epID, Retry: true},
		domain.ForwardResponded{DeliveryID: "d1", AttemptID: "d1-a2", Status: 200, Headers: answer("2"), DurationMs: 1})

	query := `{"query":"{ delivery(id: \"d1\") { compare(a: \"1\", b: \"2\") { response { where } } } }"}`
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(allocs)
	before := allocs[0].Value.Uint64()
	var out struct {
		Data struct {
			Delivery struct {
				Compare struct{ Response []struct{ Where string } }
			}
		}
	}
	if err := postGraphQL(srv.URL, acct.token, query, &out); err != nil {
		t.Fatal(err)
	}
	metrics.Read(allocs)
	n := allocs[0].Value.Uint64() - before
	t.Logf("the comparison allocated %d MiB", n>>20)
	if r := out.Data.Delivery.Compare.Response; len(r) != 1 || r[0].Where != "header X-A" {
		t.Fatalf("changes %v, want the one header", r)
	}
	// Two answers of 0.5 MB are read from the log, decoded and joined:
	// a few times their size, never its square.
	if n > 64<<20 {
		t.Errorf("comparing two answers of %d lines of one header allocated %d MiB, want at most 64", lines, n>>20)
	}
}
