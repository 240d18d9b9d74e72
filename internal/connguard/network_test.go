package connguard

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// acceptAll accepts l's connections until it closes, handing each to the
// returned channel; the test closes them.
func acceptAll(t *testing.T, l *Listener) <-chan net.Conn {
	t.Helper()
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return accepted
}

// connect dials l from the loopback address from and reports what became
// of the connection: "accepted" (returned by Accept, kept open until the
// test ends) or the status and body of the answer it was refused with.
func connect(t *testing.T, l *Listener, accepted <-chan net.Conn, from string) (net.Conn, string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	refused := make(chan string, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return // accepted, and closed when the test ends
		}
		body, _ := io.ReadAll(resp.Body)
		refused <- fmt.Sprintf("%d %s", resp.StatusCode, body)
	}()
	select {
	case s := <-accepted:
		t.Cleanup(func() { s.Close() })
		return s, "accepted"
	case answer := <-refused:
		return nil, answer
	case <-time.After(10 * time.Second):
		t.Fatalf("a connection from %s was neither accepted nor refused", from)
		return nil, ""
	}
}

// TestListenerCapsEachNetwork: the addresses of one /24 hold at most
// clientkey.NetworkShare × the per-address cap over all of them; the next connection
// from that network is refused 429 while one from another /24 is
// accepted, and a connection closed in the network makes room in it.
func TestListenerCapsEachNetwork(t *testing.T) {
	const perIP = 2
	l := listen(t, perIP, 0)
	accepted := acceptAll(t, l)
	tally := map[string]int{}
	var first net.Conn
	for host := 2; host <= 6; host++ { // 127.0.0.2–6: ten connections, two per address
		for range perIP {
			s, got := connect(t, l, accepted, fmt.Sprintf("127.0.0.%d", host))
			tally[got]++
			if first == nil {
				first = s
			}
		}
	}
	const want = 4 * perIP // clientkey.NetworkShare × perIP
	if tally["accepted"] != want || tally["429 Too Many Requests: too many open connections from your network\n"] != 5*perIP-want {
		t.Fatalf("127.0.0.2–6, %d connections each under a cap of %d per address: %v; want %d accepted and the rest refused for the network",
			perIP, perIP, tally, want)
	}
	if _, got := connect(t, l, accepted, "127.0.1.2"); got != "accepted" {
		t.Fatalf("a connection from another /24 (127.0.1.2): %q, want accepted", got)
	}
	// The per-address cap still comes first, with its own answer.
	if _, got := connect(t, l, accepted, "127.0.0.2"); got != "429 Too Many Requests: too many open connections from your address\n" {
		t.Fatalf("a third connection from 127.0.0.2: %q, want refused for the address", got)
	}
	first.Close()
	if _, got := connect(t, l, accepted, "127.0.0.7"); got != "accepted" {
		t.Fatalf("after one of the network's connections closed, 127.0.0.7: %q, want accepted", got)
	}
}

// TestListenerCapsTheRelay: past MaxOpen connections in all, from any
// networks and from addresses exempt from the per-client caps too, the
// next is refused 503 (the relay, not the client, is full), and a
// connection closed makes room.
func TestListenerCapsTheRelay(t *testing.T) {
	l := listen(t, 4, 0)
	l.MaxOpen = 3
	l.Unlimited = func(ip string) bool { return ip == "127.0.3.2" }
	accepted := acceptAll(t, l)
	var held []net.Conn
	for _, from := range []string{"127.0.0.2", "127.0.1.2", "127.0.3.2"} {
		s, got := connect(t, l, accepted, from)
		if got != "accepted" {
			t.Fatalf("connection from %s: %q, want accepted", from, got)
		}
		held = append(held, s)
	}
	for _, from := range []string{"127.0.2.2", "127.0.3.2"} {
		if _, got := connect(t, l, accepted, from); got != "503 Service Unavailable: the relay holds as many connections as it can; retry later\n" {
			t.Fatalf("a fourth connection, from %s: %q, want 503", from, got)
		}
	}
	held[0].Close()
	if _, got := connect(t, l, accepted, "127.0.2.2"); got != "accepted" {
		t.Fatalf("after a close, 127.0.2.2: %q, want accepted", got)
	}
	if n := l.total.Held(totalKey); n != 3 {
		t.Fatalf("the listener holds %d connections, want 3", n)
	}
}

// TestOpenCap: the relay keeps OpenReserve descriptors of its limit for
// itself, and at least half of a small limit for connections.
func TestOpenCap(t *testing.T) {
	for _, tt := range []struct {
		nofile uint64
		want   int
	}{
		{0, 0},
		{256, 128},
		{1024, 768},
		{4096, 3840},
		{1 << 20, 1<<20 - OpenReserve},
		{1<<63 - 1, 1<<30 - OpenReserve},
	} {
		if got := OpenCap(tt.nofile); got != tt.want {
			t.Errorf("OpenCap(%d) = %d, want %d", tt.nofile, got, tt.want)
		}
	}
}
