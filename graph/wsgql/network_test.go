package wsgql

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/gqlws"
)

// socketFrom opens a socket to url from the loopback address from and
// reports "open" once the server acknowledged it (kept open until the test
// ends), or the status and body it was refused with.
func socketFrom(t *testing.T, url, from string) string {
	t.Helper()
	d := websocket.Dialer{
		Subprotocols:   []string{gqlws.Subprotocol},
		NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext,
	}
	c, resp, err := d.DialContext(t.Context(), url, nil)
	if err != nil {
		if resp == nil {
			t.Fatalf("dial from %s: %v", from, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WriteJSON(map[string]any{"type": "connection_init"}); err != nil {
		t.Fatal(err)
	}
	var ack message
	if err := c.ReadJSON(&ack); err != nil || ack.Type != gqlws.ConnectionAck {
		t.Fatalf("ack from %s: %v %+v", from, err, ack)
	}
	return "open"
}

// TestSocketsPerNetwork: the addresses of one /24 hold at most
// clientkey.NetworkShare × MaxSocketsPerClient sockets over all of them
// (when MaxSocketsPerNetwork is not set); the next socket from that network
// is refused 429 before the upgrade while one from another /24 opens.
func TestSocketsPerNetwork(t *testing.T) {
	const perIP = 2
	url, _ := serve(t, (&flood{}).server(Config{MaxSocketsPerClient: perIP}))
	tally := map[string]int{}
	for host := 2; host <= 6; host++ { // 127.0.0.2–6: ten sockets, two per address
		for range perIP {
			tally[socketFrom(t, url, fmt.Sprintf("127.0.0.%d", host))]++
		}
	}
	t.Logf("127.0.0.2–6, %d sockets each under a cap of %d per address: %v", perIP, perIP, tally)
	const want = 4 * perIP // clientkey.NetworkShare × MaxSocketsPerClient
	if tally["open"] != want || tally["429 too many WebSocket connections from this network"] != 5*perIP-want {
		t.Fatalf("127.0.0.2–6: %v; want %d open and the rest refused for the network", tally, want)
	}
	if got := socketFrom(t, url, "127.0.1.2"); got != "open" {
		t.Fatalf("a socket from another /24 (127.0.1.2): %q, want open", got)
	}
	if got := socketFrom(t, url, "127.0.0.2"); got != "429 too many WebSocket connections from this address" {
		t.Fatalf("a third socket from 127.0.0.2: %q, want refused for the address", got)
	}
}
