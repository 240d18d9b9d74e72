package serve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlowHeadersAreCutOff: a client that sends its request line, or its
// header block, a byte at a time holds a slot of --max-conns-per-ip only
// until the header timeout (lowered here from its 30 s), then its
// connection is closed and its slot freed (a request line cut short is
// answered 400 first: net/http parses the part that arrived). With the
// cap at 2, two such clients of one address make a third connection
// refused 429; once the relay has closed both, a third is served. Each case
// runs from an address of its own: a new connection's request line (its
// bytes read whole by ingress.TolerateTargets, under the header timeout
// from its first byte), its header block (net/http's ReadHeaderTimeout),
// and the request line of a kept-alive connection's second request, which
// --idle-timeout (an hour here) would not end.
func TestSlowHeadersAreCutOff(t *testing.T) {
	const timeout = 3 * time.Second
	r := startServeWith(t, func(c *serveConfig) { c.headerTimeout = timeout },
		"--max-conns-per-ip", "2", "--max-conns-per-network", "64", "--idle-timeout", "1h")
	for i, tc := range []struct {
		name  string
		kept  bool   // a request is served on the connection first
		start string // sent at once, then "a" a byte at a time
	}{
		{"request line", false, "GET /"},
		{"header block", false, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: "},
		{"request line of a kept-alive connection", true, "GET /"},
	} {
		local := fmt.Sprintf("127.0.0.%d", 20+i)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			slow := []*slowClient{dialSlow(t, r, local, tc.kept, tc.start), dialSlow(t, r, local, tc.kept, tc.start)}
			if status := probeConn(t, r, local); status != http.StatusTooManyRequests {
				t.Fatalf("a third connection while two send slowly: %d, want 429", status)
			}
			waitFor(t, time.Minute, func() error {
				for i, c := range slow {
					if !c.closed() {
						return fmt.Errorf("slow client %d still open, %d bytes sent a byte at a time", i, c.sent.Load())
					}
				}
				return nil
			})
			for i, c := range slow {
				t.Logf("slow client %d: closed after %d bytes, answered %q", i, c.sent.Load(), *c.answered.Load())
			}
			if status := probeConn(t, r, local); status != http.StatusOK {
				t.Errorf("a third connection once the slow ones were closed: %d, want 200", status)
			}
		})
	}
}

// slowClient is a connection that sends a request a byte at a time until
// the relay closes it.
type slowClient struct {
	done     chan struct{}          // closed when the relay ended the connection
	sent     atomic.Int64           // bytes sent a byte at a time
	answered atomic.Pointer[[]byte] // what the relay sent before it closed
}

func (c *slowClient) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// dialSlow connects from local, has a request served first when kept,
// sends start and then one byte every 20 ms.
func dialSlow(t *testing.T, r *servedRelay, local string, kept bool, start string) *slowClient {
	t.Helper()
	conn := dialFrom(t, r, local)
	br := bufio.NewReader(conn)
	if kept {
		if status := roundTrip(t, conn, br, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); status != http.StatusOK {
			t.Fatalf("the kept-alive connection's first request: %d, want 200", status)
		}
	}
	if _, err := io.WriteString(conn, start); err != nil {
		t.Fatal(err)
	}
	c := &slowClient{done: make(chan struct{})}
	go func() {
		b, _ := io.ReadAll(br) // until the relay closes
		c.answered.Store(&b)
		close(c.done)
	}()
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte("a")); err != nil {
				return
			}
			c.sent.Add(1)
		}
	}()
	return c
}

// probeConn is the status a new connection from local is answered for
// GET /healthz.
func probeConn(t *testing.T, r *servedRelay, local string) int {
	t.Helper()
	conn := dialFrom(t, r, local)
	defer conn.Close()
	return roundTrip(t, conn, bufio.NewReader(conn), "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
}

// dialFrom opens a connection from local (an address of 127/8) to r,
// closed when the test ends.
func dialFrom(t *testing.T, r *servedRelay, local string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	conn, err := d.DialContext(t.Context(), "tcp", "127.0.0.1:"+r.port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// roundTrip writes req on conn and reads its answer's status, whole.
func roundTrip(t *testing.T, conn net.Conn, br *bufio.Reader, req string) int {
	t.Helper()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", req, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}
