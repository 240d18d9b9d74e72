package connguard_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/relayhq/relay/internal/connguard"
	"github.com/relayhq/relay/internal/forwarded"
)

// held is a handler that holds every request until release is closed,
// telling started of each one it holds.
type held struct {
	started chan struct{}
	release chan struct{}
}

func (h held) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.started <- struct{}{}
	<-h.release
}

// TestInFlightPerClient: a client with Max requests in flight gets 429 and
// Retry-After for the next; another client (an IPv6 client by its /64, a
// sender behind a trusted proxy by the address the proxy names) is counted
// on its own; the trusted proxy's own requests are not counted; a request
// that ends frees its place.
func TestInFlightPerClient(t *testing.T) {
	h := held{started: make(chan struct{}, 100), release: make(chan struct{})}
	refused := 0
	trusted := forwarded.Trusted{netip.MustParsePrefix("10.0.0.1/32")}
	f := &connguard.InFlight{Max: 2, Unlimited: trusted.ContainsHost, OnRefuse: func() { refused++ }}
	handler := forwarded.Handler(forwarded.Resolver{Trusted: trusted}, f.Handler(h))

	var wg sync.WaitGroup
	// hold starts a request from peer (naming xff, if any) that the
	// handler holds, and waits until it does.
	hold := func(peer, xff string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(handler, peer, xff)
		}()
		<-h.started
	}
	hold("192.0.2.1:1000", "")
	hold("192.0.2.1:1001", "")
	if rec := serve(handler, "192.0.2.1:1002", ""); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("third request of one client: %d %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	// An IPv6 client counts by its /64.
	hold("[2001:db8::1]:1000", "")
	hold("[2001:db8::2]:1000", "")
	if rec := serve(handler, "[2001:db8::3]:1000", ""); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("third request of one /64: %d", rec.Code)
	}
	// Senders behind the trusted proxy count one by one, the proxy itself
	// not at all.
	hold("10.0.0.1:1000", "198.51.100.1")
	hold("10.0.0.1:1001", "198.51.100.1")
	if rec := serve(handler, "10.0.0.1:1002", "198.51.100.1"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("third request of one sender behind the proxy: %d", rec.Code)
	}
	hold("10.0.0.1:1003", "198.51.100.2")
	for range 3 {
		hold("10.0.0.1:1004", "")
	}
	// The same sender's forwarding header from an untrusted peer is
	// ignored: that peer is the client.
	hold("192.0.2.9:1000", "198.51.100.3")
	hold("192.0.2.9:1001", "198.51.100.4")
	if rec := serve(handler, "192.0.2.9:1002", "198.51.100.5"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("an untrusted peer naming other senders: %d", rec.Code)
	}
	if refused != 4 {
		t.Fatalf("OnRefuse called %d times, want 4", refused)
	}

	close(h.release)
	wg.Wait()
	// (the handler's release is closed: it no longer holds)
	if n := f.Clients(); n != 0 {
		t.Fatalf("%d clients still counted after every request ended", n)
	}
	if rec := serve(handler, "192.0.2.1:1003", ""); rec.Code != http.StatusOK {
		t.Fatalf("after the requests ended: %d", rec.Code)
	}
}

func serve(h http.Handler, peer, xff string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = peer
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
