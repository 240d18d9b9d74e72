package ingress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testwait"
)

// TestTolerateTargetsOnOneConnection: on one keep-alive connection, a
// target with invalid percent-encoding reaches the handler as sent (also
// when its body is read first), a valid "%25" stays "%25", and a body that
// looks like such a request line is not touched.
func TestTolerateTargetsOnOneConnection(t *testing.T) {
	type seen struct{ target, body string }
	got := make(chan seen, 8)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{originalTarget(r), string(b)}
		w.WriteHeader(http.StatusNoContent)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(TolerateTargets(srv, ln))
	t.Cleanup(func() { srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	trap := "GET /%zz HTTP/1.1\r\n"
	for _, tc := range []struct{ target, body string }{
		{"/%zz?q=%zz", ""},
		{"/%zz", strings.Repeat("b", 8<<10)}, // read past the first buffer before the target is asked for
		{"/%25zz", trap},
		{"/a%2", ""},
		{"//x/%G0/%41", ""},
		{"/plain", ""},
	} {
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: a.localhost\r\nContent-Length: %d\r\n\r\n%s", tc.target, len(tc.body), tc.body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: answered %d", tc.target, resp.StatusCode)
		}
		if s := <-got; s.target != tc.target || s.body != tc.body {
			t.Errorf("handler saw %q with a body of %d bytes, want %q with %d (same: %t)", s.target, len(s.body), tc.target, len(tc.body), s.body == tc.body)
		}
	}
}

// FuzzFixRequestLine: a target net/http accepts is never changed; a changed
// one names the original exactly, and its rewrite decodes.
func FuzzFixRequestLine(f *testing.F) {
	for _, s := range []string{"GET /%zz HTTP/1.1\r\n", "GET /ok HTTP/1.1\r\nHost: x\r\n", "GET /a%2 HTTP/1.0\n", "x", "GET  / HTTP/1.1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		fixed, rewritten, original := fixRequestLine(buf)
		if rewritten == "" {
			if string(fixed) != string(buf) {
				t.Fatalf("unchanged line %q came back as %q", buf, fixed)
			}
			return
		}
		line, _, _ := strings.Cut(string(buf), "\n")
		_, rest, _ := strings.Cut(line, " ")
		target, _, _ := strings.Cut(rest, " ")
		if original != target {
			t.Fatalf("original %q, target sent %q", original, target)
		}
		if _, err := url.ParseRequestURI(target); err == nil {
			t.Fatalf("target %q net/http accepts was rewritten to %q", target, rewritten)
		}
		path, _, _ := strings.Cut(rewritten, "?")
		if _, err := url.PathUnescape(path); err != nil {
			t.Fatalf("rewrite %q still does not decode: %v", rewritten, err)
		}
		if !strings.Contains(string(fixed), " "+rewritten+" ") {
			t.Fatalf("line %q does not carry the rewrite %q", fixed, rewritten)
		}
	})
}

// countingConn counts the reads of the connection below.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.Conn.Read(p)
}

// TestRequestLineReads: a request sent at once whose line has nothing to
// mend reaches net/http in one read of the connection, as it arrived; a line
// that comes in pieces, or needs mending, is read whole first, and what
// net/http gets is the same either way.
func TestRequestLineReads(t *testing.T) {
	body := strings.Repeat("b", 1024) // a webhook's: the request is longer than its line
	request := func(target string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: a.localhost\r\nContent-Length: 1024\r\n\r\n" + body
	}
	for _, tc := range []struct {
		name      string
		parts     []string
		want      string
		firstRead string // what the first Read returns, when it is the whole request
	}{
		{"at once", []string{request("/plain")}, request("/plain"), request("/plain")},
		{"in pieces", []string{"POST /pl", "ain HTTP/1.1\r\nHost: a.localhost\r\n", "Content-Length: 1024\r\n\r\n" + body}, request("/plain"), ""},
		{"stray percent at once", []string{request("/%zz")}, request("/%25zz"), request("/%25zz")},
		{"stray percent in pieces", []string{"POST /%z", "z HTTP/1.1\r\nHost: a.localhost\r\nContent-Length: 1024\r\n\r\n" + body}, request("/%25zz"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer server.Close()
			go func() {
				for _, p := range tc.parts {
					if _, err := client.Write([]byte(p)); err != nil {
						return
					}
				}
				client.Close()
			}()
			below := &countingConn{Conn: server}
			c := &targetConn{Conn: below, expect: true, lineTimeout: 5 * time.Second}
			buf := make([]byte, 4096)
			n, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got := string(buf[:n])
			if tc.firstRead != "" {
				if got != tc.firstRead || below.reads != 1 {
					t.Fatalf("first Read gave %d bytes after %d reads of the connection, want the whole request (%d bytes, same: %t) after 1",
						n, below.reads, len(tc.firstRead), got == tc.firstRead)
				}
			}
			rest, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			if got += string(rest); got != tc.want {
				t.Errorf("read %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHeaderLinesAreBounded: a request of 64 KiB of one-line headers
// ("a:\r\n", 16 000 of them, under MaxHeaderBytes) is answered 431 before
// net/http parses it, never reaching the handler; while 50 of them wait
// for their bodies, the heap holds none of them. A request of exactly
// MaxHeaderLines header lines is served.
func TestHeaderLinesAreBounded(t *testing.T) {
	e := newEnv(t, Config{})
	e.addInspector("abcdefghijklmnop", time.Hour)
	var entered atomic.Int32
	srv := &http.Server{ReadHeaderTimeout: time.Minute, MaxHeaderBytes: DefaultMaxHeaderBytes,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered.Add(1)
			e.srv.Handler().ServeHTTP(w, r)
		})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(TolerateTargets(srv, ln))
	t.Cleanup(func() { srv.Close() })

	head := "POST /x HTTP/1.1\r\nHost: abcdefghijklmnop.localhost\r\nContent-Length: 2\r\n"
	// Host and Content-Length are two of the lines.
	atBound := head + strings.Repeat("X-A: b\r\n", MaxHeaderLines-2) + "\r\nok"
	if resp, _ := rawRequest(t, ln.Addr().String(), atBound); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("%d header lines: answered %d, want 204", MaxHeaderLines, resp.StatusCode)
	}
	entered.Store(0)

	flood := head + strings.Repeat("a:\r\n", (DefaultMaxHeaderBytes-len(head))/4) + "\r\n" + "o" // the body's second byte never comes
	const conns = 50
	before := heapInUse()
	statuses := make(chan int, conns)
	for range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, flood); err != nil {
			t.Fatal(err)
		}
		go func() {
			status := 0
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				status = resp.StatusCode
			}
			statuses <- status
		}()
	}
	// Each request has either reached the handler, which waits for its
	// body, or been answered.
	answered, n := map[int]int{}, 0
	testwait.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		for ; len(statuses) > 0; n++ {
			answered[<-statuses]++
		}
		if n := int(entered.Load()) + n; n < conns {
			return fmt.Errorf("%d of %d requests handled or answered", n, conns)
		}
		return nil
	})
	held := heapInUse() - before
	t.Logf("%d requests of %d header lines: %d reached the handler, answers %v; heap grew %d KiB", conns, strings.Count(flood, "\n")-1, entered.Load(), answered, held>>10)
	if entered.Load() != 0 || answered[http.StatusRequestHeaderFieldsTooLarge] != conns {
		t.Errorf("%d requests reached the handler and %d were answered 431, want 0 and %d", entered.Load(), answered[http.StatusRequestHeaderFieldsTooLarge], conns)
	}
	// Each held request took about 0.9 MiB before the bound.
	if held > 8<<20 {
		t.Errorf("%d requests with bodies pending grew the heap %d MiB, want under 8 MiB", conns, held>>20)
	}
}

// rawRequest sends request on a connection of its own and reads the answer.
func rawRequest(t *testing.T, addr, request string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// heapInUse is the heap in use after two collections.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}
