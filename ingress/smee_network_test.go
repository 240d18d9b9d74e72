package ingress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// quietFeed is a feed in which nothing happens: its streams stay open
// with nothing to send.
type quietFeed struct{}

func (quietFeed) Watch(string) (<-chan readmodel.Change, func()) {
	return make(chan readmodel.Change), func() {}
}

func (quietFeed) Delivery(context.Context, string) (readmodel.Delivery, error) {
	return readmodel.Delivery{}, fmt.Errorf("no deliveries")
}

func (quietFeed) CreatedAfter(context.Context, string, string, int) ([]string, error) {
	return nil, nil
}

// openStream opens the smee stream of host from the loopback address from
// and reports "open" (the stream stays open until the test ends) or the
// status and body it was refused with.
func openStream(t *testing.T, e *env, from, host string) string {
	t.Helper()
	c := dialFrom(t, from, e.addr)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", host)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("stream from %s: %v", from, err)
	}
	if resp.StatusCode == http.StatusOK {
		return "open"
	}
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
}

// TestSmeeStreamsPerNetwork: the addresses of one /24 hold at most
// MaxStreamsPerNetwork smee streams over all of them, each address
// MaxStreamsPerClient; the next stream from that network is refused 429
// while one from another /24 opens. 127.0.0.2–5 open 128 streams each
// and 127.0.0.6 one more, over five inspectors (each under
// MaxStreamsPerAddress).
func TestSmeeStreamsPerNetwork(t *testing.T) {
	e := newEnvWith(t, Config{}, func(d *Deps) { d.Feed = quietFeed{} })
	const addresses = 5
	ids := make([]string, addresses)
	for i := range addresses {
		id := fmt.Sprintf("smee%0*d", i+1, i) // lengths differ: env.appendEvents names events by it
		ids[i] = id
		e.addInspector(id, time.Hour)
		e.routes.set(Route{ID: id, Kind: domain.AddressInspector, Smee: true, LastActivityAt: e.clock.Now()})
	}
	const perClient, perNetwork = 128, 4 * 128 // MaxStreamsPerClient, MaxStreamsPerNetwork
	if perClient != MaxStreamsPerClient || perNetwork != MaxStreamsPerNetwork {
		t.Fatalf("the test is written for %d streams per client and %d per network", perClient, perNetwork)
	}
	tally := map[string]int{}
	for i := range perNetwork + 1 {
		from := fmt.Sprintf("127.0.0.%d", 2+i/perClient)
		tally[openStream(t, e, from, ids[i%addresses]+".localhost")]++
	}
	t.Logf("%d streams from 127.0.0.2–6, at most %d each: %v", perNetwork+1, perClient, tally)
	want := fmt.Sprintf("429 Too Many Requests: %d streams are open from your network (127.0.0.0/24)", perNetwork)
	if tally["open"] != perNetwork || tally[want] != 1 {
		t.Fatalf("%d streams from one /24: %v; want %d open and 1 refused for the network", perNetwork+1, tally, perNetwork)
	}
	if got := openStream(t, e, "127.0.1.2", ids[0]+".localhost"); got != "open" {
		t.Fatalf("a stream from another /24 (127.0.1.2): %q, want open", got)
	}
	if n := e.srv.streams.clients.NetworkHeld("127.0.0.0/24"); n != perNetwork {
		t.Fatalf("127.0.0.0/24 holds %d streams, want %d", n, perNetwork)
	}
}
