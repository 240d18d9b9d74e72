package connguard_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/connguard"
)

// requestFrom sends a GET to srv from the loopback address from, on a
// connection of its own, and reports "held" once the handler holds it, or
// the status and body it was refused with.
func requestFrom(t *testing.T, srv *httptest.Server, h held, from string) string {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel) // ends a held request when the test ends
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan string, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return // held until the test ends
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		refused <- fmt.Sprintf("%d %s", resp.StatusCode, body)
	}()
	select {
	case <-h.started:
		return "held"
	case answer := <-refused:
		return answer
	case <-time.After(10 * time.Second):
		t.Fatalf("a request from %s was neither held nor refused", from)
		return ""
	}
}

// TestInFlightCapsEachNetwork: the addresses of one /24 have at most
// clientkey.NetworkShare × Max requests in flight over all of them (when
// MaxPerNetwork is not set); the next request from that network is refused
// 429 while one from another /24 is served, and a request that ends makes
// room in its network.
func TestInFlightCapsEachNetwork(t *testing.T) {
	const perIP = 2
	h := held{started: make(chan struct{}, 100), release: make(chan struct{})}
	f := &connguard.InFlight{Max: perIP}
	srv := httptest.NewServer(f.Handler(h))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(h.release) }) // before srv.Close: the handlers return

	tally := map[string]int{}
	for host := 2; host <= 6; host++ { // 127.0.0.2–6: ten requests, two per address
		for range perIP {
			tally[strings.TrimSuffix(requestFrom(t, srv, h, fmt.Sprintf("127.0.0.%d", host)), "\n")]++
		}
	}
	t.Logf("127.0.0.2–6, %d requests each under a cap of %d per address: %v", perIP, perIP, tally)
	const want = 4 * perIP // clientkey.NetworkShare × Max
	if tally["held"] != want || tally["429 Too Many Requests: too many requests in flight from your network"] != 5*perIP-want {
		t.Fatalf("127.0.0.2–6, %d requests each under a cap of %d per address: %v; want %d in flight and the rest refused for the network",
			perIP, perIP, tally, want)
	}
	if got := requestFrom(t, srv, h, "127.0.1.2"); got != "held" {
		t.Fatalf("a request from another /24 (127.0.1.2): %q, want it served", got)
	}
	// The per-address cap still comes first, with its own answer.
	if got := requestFrom(t, srv, h, "127.0.0.2"); got != "429 Too Many Requests: too many requests in flight from your address\n" {
		t.Fatalf("a third request from 127.0.0.2: %q, want refused for the address", got)
	}
}

// TestInFlightPerNetworkIsSet: MaxPerNetwork, when set, is the network's
// cap: with a cap of 3, the fourth request of 127.0.0.2–3 (two each) is
// refused, and 127.0.1.2's is served.
func TestInFlightPerNetworkIsSet(t *testing.T) {
	h := held{started: make(chan struct{}, 100), release: make(chan struct{})}
	f := &connguard.InFlight{Max: 2, MaxPerNetwork: 3}
	srv := httptest.NewServer(f.Handler(h))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(h.release) })
	for _, from := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.3"} {
		if got := requestFrom(t, srv, h, from); got != "held" {
			t.Fatalf("request from %s: %q, want held", from, got)
		}
	}
	if got := requestFrom(t, srv, h, "127.0.0.3"); got != "429 Too Many Requests: too many requests in flight from your network\n" {
		t.Fatalf("the network's fourth request under a cap of 3: %q", got)
	}
	if got := requestFrom(t, srv, h, "127.0.1.2"); got != "held" {
		t.Fatalf("another /24: %q, want held", got)
	}
}
