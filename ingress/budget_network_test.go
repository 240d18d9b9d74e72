package ingress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
)

// dialFrom opens a connection to addr from the loopback address from,
// closed when the test ends.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// declareBody sends, from the address from, a request to address whose
// headers declare a body of declared bytes and then only one byte of it,
// and reports whether the relay holds it in the body budget (the budget
// grew by its reservation, holds: declared+1 for a PROXY Endpoint) or what
// it answered instead.
func declareBody(t *testing.T, e *env, from, address string, declared, holds int64) (held bool, answer string) {
	t.Helper()
	before := e.srv.bodies.InUse()
	c := dialFrom(t, from, e.addr)
	fmt.Fprintf(c, "POST /big HTTP/1.1\r\nHost: %s.localhost\r\nContent-Length: %d\r\n\r\nx", address, declared)
	answered := make(chan string, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return // held until the test closes it
		}
		resp.Body.Close()
		answered <- fmt.Sprintf("%d Retry-After: %s", resp.StatusCode, resp.Header.Get("Retry-After"))
	}()
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		select {
		case answer = <-answered:
			return nil
		default:
		}
		if e.srv.bodies.InUse() == before+holds {
			held = true
			return nil
		}
		return fmt.Errorf("a body declared from %s neither held nor answered (%d bytes in use)", from, e.srv.bodies.InUse())
	})
	return held, answer
}

// TestBodyBudgetShareOfANetwork: the addresses of one /24 hold at most
// half of the PROXY body budget over all of them, each its quarter within
// it: five addresses that declare large bodies and trickle them, each to
// an Endpoint of an account of its own (so that no account's share
// decides), fill their network's half, not the whole budget, and another
// /24's body is forwarded.
func TestBodyBudgetShareOfANetwork(t *testing.T) {
	const (
		budget   = 8 << 20
		declared = 1<<20 - 1 // reserves 1 MiB: its length and one byte
	)
	e := newEnv(t, Config{MaxBody: 1 << 20, ProxyBodyBudget: budget})
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeProxy})
	e.fwd.set(func(f *httpForwarder) {
		f.target = localServer(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%d", len(b))
		})
	})

	held, refused := 0, map[string]int{}
	for host := 2; host <= 6; host++ { // 127.0.0.2–6, three bodies each
		address := fmt.Sprintf("h%d", host)
		e.routes.set(Route{ID: address, Kind: domain.AddressEndpoint, AccountID: "acc-" + address, Mode: domain.ModeProxy})
		for range 3 {
			ok, answer := declareBody(t, e, fmt.Sprintf("127.0.0.%d", host), address, declared, declared+1)
			if ok {
				held++
			} else {
				refused[answer]++
			}
		}
	}
	inUse := e.srv.bodies.InUse()
	t.Logf("127.0.0.0/24: %d bodies held (%d MiB of %d), refused %v", held, inUse>>20, budget>>20, refused)
	if held != 4 || inUse != budget/2 || refused["503 Retry-After: 1"] != 11 {
		t.Errorf("127.0.0.2–6 declared 15 bodies of 1 MiB: %d held (%d bytes), refused %v; want 4 (its network's half, %d bytes) and 11 refused 503",
			held, inUse, refused, budget/2)
	}

	// Another /24: a whole body is forwarded and answered.
	if status, body := postSmall(t, e, "127.0.1.2", "ep1"); status != http.StatusOK || body != "5" {
		t.Fatalf("another network's request (127.0.1.2) with 127.0.0.0/24 at its share: %d %q, want 200 and its body forwarded", status, body)
	}
}

// postSmall sends, from the address from, a whole 5-byte PROXY request
// to address and returns the status and body it was answered.
func postSmall(t *testing.T, e *env, from, address string) (status int, body string) {
	t.Helper()
	c := dialFrom(t, from, e.addr)
	fmt.Fprintf(c, "POST /small HTTP/1.1\r\nHost: %s.localhost\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello", address)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("request from %s to %s: %v", from, address, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestBodyBudgetRefusalNamesTheShare: a body the budget refuses is
// answered 503, and its text said only that the relay was busy, whichever
// of the shares was full: a sender could not tell its own quarter from its
// network's half, its account's quarter, the reserve kept for small
// holders or the whole budget, nor the operator which one refuses. The
// third line now names the share (and nothing another holds), and the
// budget counts its refusals by share.
func TestBodyBudgetRefusalNamesTheShare(t *testing.T) {
	const (
		budget   = 8 << 20
		declared = 1<<20 - 1 // reserves 1 MiB: its length and one byte
	)
	type body struct{ from, account string }
	for _, tc := range []struct {
		share string
		held  []body // each holds 1 MiB
		last  body   // refused
		want  string // in its text
	}{
		{"client", []body{{"127.0.0.2", "a1"}, {"127.0.0.2", "a2"}}, body{"127.0.0.2", "a3"}, "your client address holds its share"},
		{"network", []body{{"127.0.0.2", "a1"}, {"127.0.0.2", "a2"}, {"127.0.0.3", "a3"}, {"127.0.0.3", "a4"}}, body{"127.0.0.4", "a5"},
			"your client network (IPv4 /24, IPv6 /48) holds its share"},
		{"account", []body{{"127.0.1.2", "a1"}, {"127.0.2.2", "a1"}}, body{"127.0.3.2", "a1"}, "this Endpoint's account hold its share"},
		{"reserve", []body{{"127.0.1.2", "a1"}, {"127.0.1.2", "a1"}, {"127.0.2.2", "a2"}, {"127.0.2.2", "a2"}, {"127.0.3.2", "a3"}, {"127.0.3.2", "a3"}, {"127.0.4.2", "a4"}},
			body{"127.0.4.2", "a4"}, "its last quarter is kept for senders"},
		{"relay", []body{{"127.0.1.2", "a1"}, {"127.0.1.2", "a1"}, {"127.0.2.2", "a2"}, {"127.0.2.2", "a2"}, {"127.0.3.2", "a3"}, {"127.0.3.2", "a3"}, {"127.0.4.2", "a4"}, {"127.0.5.2", "a5"}},
			body{"127.0.6.2", "a6"}, "the relay's whole body budget"},
	} {
		t.Run(tc.share, func(t *testing.T) {
			e := newEnv(t, Config{MaxBody: 1 << 20, ProxyBodyBudget: budget})
			route := func(b body) string {
				e.routes.set(Route{ID: "ep-" + b.account, Kind: domain.AddressEndpoint, AccountID: b.account, Mode: domain.ModeProxy})
				return "ep-" + b.account
			}
			for i, b := range tc.held {
				if held, answer := declareBody(t, e, b.from, route(b), declared, declared+1); !held {
					t.Fatalf("body %d from %s to %s: %s, want it held", i, b.from, b.account, answer)
				}
			}
			c := dialFrom(t, tc.last.from, e.addr)
			fmt.Fprintf(c, "POST /big HTTP/1.1\r\nHost: %s.localhost\r\nContent-Length: %d\r\n\r\nx", route(tc.last), declared)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("the body past the %s share: %v", tc.share, err)
			}
			text, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Logf("past the %s share: %d %q", tc.share, resp.StatusCode, text)
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(text), "full: "+tc.share+" share: ") ||
				!strings.Contains(string(text), tc.want) {
				t.Errorf("past the %s share: %d %q, want 503 naming the %s share (%q)", tc.share, resp.StatusCode, text, tc.share, tc.want)
			}
			for share, n := range e.srv.bodies.Refusals() {
				if want := map[bool]int64{true: 1}[share == tc.share]; n != want {
					t.Errorf("the budget counted %d refusals by the %s share, want %d", n, share, want)
				}
			}
		})
	}
}
