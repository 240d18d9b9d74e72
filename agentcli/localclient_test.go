package agentcli

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// countingServer is an HTTP server answering 200 "ok" that counts the
// connections it accepts; idle is its keep-alive idle timeout (0: none).
func countingServer(t *testing.T, idle time.Duration, tls bool) (srv *httptest.Server, conns *atomic.Int32) {
	t.Helper()
	conns = new(atomic.Int32)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Config.IdleTimeout = idle
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, conns
}

func forwardOK(t *testing.T, f *forwarder, method string) {
	t.Helper()
	res := f.forward(t.Context(), localRequest{Method: method, Path: "/hook", Body: []byte(`{"n":1}`)})
	if res.Err != nil || res.Status != 200 || string(res.Body) != "ok" {
		t.Fatalf("%s: got %d %q %v, want 200 ok", method, res.Status, res.Body, res.Err)
	}
}

// TestLocalClientKeepsConnections: forwards one after the other share one
// connection, over http and over https.
func TestLocalClientKeepsConnections(t *testing.T) {
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			srv, conns := countingServer(t, 0, scheme == "https")
			f := newForwarder(Target{Scheme: scheme, Host: srv.Listener.Addr().String()}, 5*time.Second, true)
			defer f.close()
			for range 5 {
				forwardOK(t, f, "POST")
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("5 forwards took %d connections, want 1", n)
			}
		})
	}
}

// TestLocalClientChecksCertificates: without --insecure an https target's
// self-signed certificate is refused.
func TestLocalClientChecksCertificates(t *testing.T) {
	srv, _ := countingServer(t, 0, true)
	f := newForwarder(Target{Scheme: "https", Host: srv.Listener.Addr().String()}, 5*time.Second, false)
	defer f.close()
	res := f.forward(t.Context(), localRequest{Method: "GET", Path: "/"})
	if res.Status != 502 || res.Err == nil || !strings.Contains(res.Err.Error(), "certificate") {
		t.Errorf("got %d %v, want 502 and a certificate error", res.Status, res.Err)
	}
}

// TestLocalClientDropsConnectionsClosedWhileIdle: a local server that
// closes idle connections (as Node.js does after 5 s) does not cost a
// webhook: the next POST, which is not sent twice, goes on a new
// connection instead of failing on the closed one.
func TestLocalClientDropsConnectionsClosedWhileIdle(t *testing.T) {
	srv, conns := countingServer(t, 20*time.Millisecond, false)
	f := newForwarder(httpTarget(srv.Listener.Addr().String()), 5*time.Second, false)
	defer f.close()
	for i := range 3 {
		forwardOK(t, f, "POST")
		if i < 2 {
			time.Sleep(150 * time.Millisecond) // the server closes the idle connection
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("3 forwards took %d connections, want 3", n)
	}
}

// serveConns listens on 127.0.0.1 and runs handle on each connection,
// counting them in conns; it returns the address.
func serveConns(t *testing.T, conns *atomic.Int32, handle func(c net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return l.Addr().String()
}

// rawServer answers every request on a connection with answer, as bytes.
func rawServer(t *testing.T, answer string) string {
	t.Helper()
	return serveConns(t, new(atomic.Int32), func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = req.Body.Read(make([]byte, 1<<10))
			if _, err := c.Write([]byte(answer)); err != nil {
				return
			}
		}
	})
}

// TestLocalClientInterimAnswers: interim answers (100 Continue, 103 Early
// Hints) are skipped up to net/http's bound, and the final one is
// passed on.
func TestLocalClientInterimAnswers(t *testing.T) {
	final := "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
	interim := "HTTP/1.1 103 Early Hints\r\nLink: </app.css>\r\n\r\n"
	for _, tt := range []struct {
		name   string
		answer string
		status int
	}{
		{"continue", "HTTP/1.1 100 Continue\r\n\r\n" + final, 201},
		{"five", strings.Repeat(interim, 5) + final, 201},
		{"six", strings.Repeat(interim, 6) + final, 502},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newForwarder(httpTarget(rawServer(t, tt.answer)), 5*time.Second, false)
			defer f.close()
			for range 2 { // the second on the same connection
				res := f.forward(t.Context(), localRequest{Method: "POST", Path: "/", Body: []byte("x")})
				if res.Status != tt.status {
					t.Fatalf("got %d %v, want %d", res.Status, res.Err, tt.status)
				}
				if tt.status == 201 && string(res.Body) != "ok" {
					t.Fatalf("body %q, want ok", res.Body)
				}
			}
		})
	}
}

// TestLocalClientClosesRatherThanDrains: an answer past the size bound is
// refused without reading the rest of it: the connection is closed, so a
// target that keeps sending does not keep the forward.
func TestLocalClientClosesRatherThanDrains(t *testing.T) {
	target, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1073741824")
		_, _ = w.Write(make([]byte, maxResponseBody+1<<20))
		<-r.Context().Done() // never finishes the 1 GiB it announced
	})
	f := newForwarder(httpTarget(target), time.Minute, false)
	defer f.close()
	done := make(chan localResult, 1)
	go func() { done <- f.forward(t.Context(), localRequest{Method: "GET", Path: "/big"}) }()
	select {
	case res := <-done:
		if res.Err == nil || !strings.Contains(res.Err.Error(), "larger than 10 MiB") {
			t.Fatalf("error = %v, want a size error", res.Err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the forward is still reading an answer past its bound")
	}
}

// TestLocalClientOnCallersGoroutine: the exchange runs on the goroutine
// that forwards: while the local target thinks, that goroutine waits for
// the answer itself, and no goroutine of net/http's Transport exists.
func TestLocalClientOnCallersGoroutine(t *testing.T) {
	inHandler, release := make(chan struct{}), make(chan struct{})
	target, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		inHandler <- struct{}{}
		<-release
	})
	f := newForwarder(httpTarget(target), 10*time.Second, false)
	defer f.close()
	done := make(chan localResult, 1)
	go func() { done <- f.forward(t.Context(), localRequest{Method: "POST", Path: "/", Body: []byte("x")}) }()
	<-inHandler
	time.Sleep(20 * time.Millisecond) // the forwarding goroutine reaches its read
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	close(release)
	if res := <-done; res.Err != nil {
		t.Fatal(res.Err)
	}
	var waiting bool
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "net/http.(*persistConn)") {
			t.Errorf("a goroutine of net/http's Transport:\n%s", g)
		}
		if strings.Contains(g, "(*forwarder).forward") && strings.Contains(g, "http.ReadResponse") {
			waiting = true
		}
	}
	if !waiting {
		t.Errorf("no forwarding goroutine reads the answer itself:\n%s", stacks)
	}
}

// TestAgain: a request that failed on a reused connection goes out again
// exactly when net/http's Transport would send it again.
func TestAgain(t *testing.T) {
	for _, tt := range []struct {
		method   string
		header   http.Header
		sent     bool
		answered bool
		want     bool
	}{
		{"POST", nil, false, false, true},
		{"POST", nil, true, false, false},
		{"POST", http.Header{"Idempotency-Key": {"k"}}, true, false, true},
		{"POST", http.Header{"X-Idempotency-Key": {"k"}}, true, false, true},
		{"GET", nil, true, false, true},
		{"GET", nil, true, true, false}, // part of an answer came: not sent again
		{"HEAD", nil, true, false, true},
		{"OPTIONS", nil, true, false, true},
		{"TRACE", nil, true, false, true},
		{"PUT", nil, true, false, false},
		{"DELETE", nil, true, false, false},
		{"PATCH", nil, false, false, true},
	} {
		req := &http.Request{Method: tt.method, Header: tt.header}
		if got := again(req, tt.sent, tt.answered); got != tt.want {
			t.Errorf("%s %v sent=%v answered=%v: again = %v, want %v", tt.method, tt.header, tt.sent, tt.answered, got, tt.want)
		}
	}
}

// TestLocalClientRefusesWhatTheTransportRefuses: a field value with a
// control character is refused before anything is sent.
func TestLocalClientRefusesWhatTheTransportRefuses(t *testing.T) {
	srv, conns := countingServer(t, 0, false)
	c := newLocalClient(httpTarget(srv.Listener.Addr().String()), false)
	for _, h := range []http.Header{{"X-Bad": {"a\r\nInjected: 1"}}, {"Bad Name": {"v"}}} {
		req, _ := http.NewRequest("POST", srv.URL+"/", bytes.NewReader(nil))
		req.Header = h
		if _, _, err := c.roundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid header field") {
			t.Errorf("%v: err = %v, want an invalid header field", h, err)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections opened, want none", n)
	}
}

// TestLocalClientKeepsAtMost256Idle: past maxIdleLocal idle connections,
// a released one is closed instead of kept.
func TestLocalClientKeepsAtMost256Idle(t *testing.T) {
	c := newLocalClient(httpTarget("127.0.0.1:1"), false)
	var closed []net.Conn
	for range maxIdleLocal + 10 {
		mine, theirs := net.Pipe()
		defer theirs.Close()
		lc := &localConn{raw: mine, head: &headConn{Conn: mine}, stop: func() bool { return true }}
		lc.br = bufio.NewReader(lc.head)
		c.release(lc, &http.Response{StatusCode: 200, Request: &http.Request{}}, true)
		closed = append(closed, theirs)
	}
	if n := len(c.idle); n != maxIdleLocal {
		t.Errorf("%d idle connections kept, want %d", n, maxIdleLocal)
	}
	// The last ones released were closed: their other ends read EOF.
	for _, theirs := range closed[maxIdleLocal:] {
		if _, err := theirs.Read(make([]byte, 1)); err == nil {
			t.Error("a connection past the bound is still open")
		}
	}
	c.closeIdle()
	if _, err := closed[0].Read(make([]byte, 1)); err == nil {
		t.Error("closeIdle left an idle connection open")
	}
}

// TestLocalClientDropsConnectionsIdleTooLong: a kept connection idle for
// idleLocal (90 s) or longer is closed rather than used again, one idle
// for less is used again; the idle time is set back rather than waited.
func TestLocalClientDropsConnectionsIdleTooLong(t *testing.T) {
	for _, tt := range []struct {
		name  string
		idle  time.Duration
		conns int32
	}{
		{"89 s", idleLocal - time.Second, 1},
		{"90 s", idleLocal, 2},
		{"91 s", idleLocal + time.Second, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, conns := countingServer(t, 0, false)
			f := newForwarder(httpTarget(srv.Listener.Addr().String()), 5*time.Second, false)
			defer f.close()
			forwardOK(t, f, "POST")
			f.client.mu.Lock()
			if len(f.client.idle) != 1 {
				f.client.mu.Unlock()
				t.Fatalf("%d idle connections after a forward, want 1", len(f.client.idle))
			}
			f.client.idle[0].idleAt = time.Now().Add(-tt.idle)
			f.client.mu.Unlock()
			forwardOK(t, f, "POST")
			if n := conns.Load(); n != tt.conns {
				t.Errorf("after a connection idle for %s: %d connections, want %d", tt.idle, n, tt.conns)
			}
		})
	}
}

// TestLocalClientHeadCaptureBound: of an answer of 64 KiB the connection
// keeps at most maxHeadCapture bytes for the Connection field's names.
func TestLocalClientHeadCaptureBound(t *testing.T) {
	target, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("a"), 64<<10))
	})
	f := newForwarder(httpTarget(target), 5*time.Second, false)
	defer f.close()
	if res := f.forward(t.Context(), localRequest{Method: "GET", Path: "/"}); res.Err != nil || len(res.Body) != 64<<10 {
		t.Fatalf("got %d bytes, %v", len(res.Body), res.Err)
	}
	if len(f.client.idle) != 1 {
		t.Fatalf("%d idle connections, want 1", len(f.client.idle))
	}
	if n := len(f.client.idle[0].head.head); n == 0 || n > maxHeadCapture {
		t.Errorf("kept %d bytes of the answer, want 1 to %d", n, maxHeadCapture)
	}
}

// TestLocalClientBoundsTheHead: an answer whose head goes on past
// maxLocalHead is refused without reading more of it.
func TestLocalClientBoundsTheHead(t *testing.T) {
	line := "X-Padding: " + strings.Repeat("p", 1000) + "\r\n"
	big := "HTTP/1.1 200 OK\r\n" + strings.Repeat(line, 2*maxLocalHead/len(line)) + "Content-Length: 2\r\n\r\nok"
	f := newForwarder(httpTarget(rawServer(t, big)), 5*time.Second, false)
	defer f.close()
	res := f.forward(t.Context(), localRequest{Method: "GET", Path: "/"})
	if res.Status != 502 || res.Err == nil || !strings.Contains(res.Err.Error(), "head is larger than 1024 KiB") {
		t.Fatalf("got %d %v, want 502 and the head's bound", res.Status, res.Err)
	}
	// Just under the bound is an answer like any other.
	small := "HTTP/1.1 200 OK\r\n" + strings.Repeat(line, maxLocalHead/len(line)/2) + "Content-Length: 2\r\n\r\nok"
	f2 := newForwarder(httpTarget(rawServer(t, small)), 5*time.Second, false)
	defer f2.close()
	if res := f2.forward(t.Context(), localRequest{Method: "GET", Path: "/"}); res.Status != 200 || string(res.Body) != "ok" {
		t.Fatalf("got %d %q %v, want 200 ok", res.Status, res.Body, res.Err)
	}
}

// TestLocalClientSendsAgainLikeTheTransport: a kept connection that the
// target closes after reading the next request, without a byte of answer
// (the race of a keep-alive timeout): a GET goes out again on a new
// connection, a POST does not (the target may have acted on it).
func TestLocalClientSendsAgainLikeTheTransport(t *testing.T) {
	var conns atomic.Int32
	addr := serveConns(t, &conns, func(c net.Conn) {
		br := bufio.NewReader(c)
		for n := 0; ; n++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = req.Body.Read(make([]byte, 1<<10))
			if n == 1 {
				return // the second request on a connection: closed unanswered
			}
			if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")); err != nil {
				return
			}
		}
	})
	for _, tt := range []struct {
		method string
		status int
		conns  int32
	}{{"GET", 200, 2}, {"POST", 502, 1}} {
		conns.Store(0)
		f := newForwarder(httpTarget(addr), 5*time.Second, false)
		forwardOK(t, f, tt.method)
		res := f.forward(t.Context(), localRequest{Method: tt.method, Path: "/hook", Body: []byte(`{"n":1}`)})
		if res.Status != tt.status {
			t.Errorf("%s on a connection closed unanswered: %d %v, want %d", tt.method, res.Status, res.Err, tt.status)
		}
		if n := conns.Load(); n != tt.conns {
			t.Errorf("%s: %d connections, want %d", tt.method, n, tt.conns)
		}
		f.close()
	}
}

// TestLocalClientEarlyAnswer: a local process that answers before it has
// read the body (a 413 for a body past its own limit) and closes has its
// answer passed on, though the rest of the body could not be written. (The
// agent on net/http's Transport answered this 502, "closed the
// connection".)
func TestLocalClientEarlyAnswer(t *testing.T) {
	addr := serveConns(t, new(atomic.Int32), func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = c.Write([]byte("HTTP/1.1 413 Payload Too Large\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large"))
	})
	f := newForwarder(httpTarget(addr), 10*time.Second, false)
	defer f.close()
	res := f.forward(t.Context(), localRequest{Method: "POST", Path: "/upload", Body: make([]byte, 8<<20)})
	if res.Status != 413 || string(res.Body) != "too large" {
		t.Fatalf("got %d %q %v, want the local 413", res.Status, res.Body, res.Err)
	}
}

// TestLocalClientWritesWhatTheTransportWrites: for the requests the agent
// builds, the bytes its client writes are the bytes net/http's Transport
// (as the agent configured it before) writes for the same request.
func TestLocalClientWritesWhatTheTransportWrites(t *testing.T) {
	// The server keeps the bytes it read for each request.
	rawc := make(chan []byte, 1)
	addr := serveConns(t, new(atomic.Int32), func(c net.Conn) {
		var seen bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &seen))
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			rawc <- bytes.Clone(seen.Bytes()[:seen.Len()-br.Buffered()])
			seen.Next(seen.Len() - br.Buffered())
			if _, err := c.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n")); err != nil {
				return
			}
		}
	})
	target := httpTarget(addr)
	f := newForwarder(target, 5*time.Second, false)
	defer f.close()
	transport := &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 256}
	defer transport.CloseIdleConnections()
	origin := origin{Host: "relay.example", Scheme: "https", Sender: "203.0.113.7:5555"}
	for _, req := range []localRequest{
		{Method: "POST", Path: "/webhooks/stripe?x=1&x=2", Body: []byte(`{"id":"evt_1"}`), Origin: origin, Headers: []domain.Header{
			{Name: "Stripe-Signature", Value: "t=1,v1=abc"}, {Name: "x-multi", Value: "one"}, {Name: "X-Multi", Value: "two"},
			{Name: "Content-Type", Value: "application/json"}, {Name: "User-Agent", Value: "Stripe/1.0"}}},
		{Method: "GET", Path: "//a//b?", Origin: origin},
		{Method: "PUT", Path: "/a%2Fb%20c", Body: bytes.Repeat([]byte("b"), 5000), Origin: origin,
			Headers: []domain.Header{{Name: "Expect", Value: "100-continue"}, {Name: "Content-Encoding", Value: "gzip"}}},
		{Method: "DELETE", Path: "/x", Origin: origin, Headers: []domain.Header{{Name: "Idempotency-Key", Value: "k1"}}},
		{Method: "POST", Path: "/empty", Origin: origin},
	} {
		var wire [2][]byte
		for i, send := range []func(*http.Request) (*http.Response, error){
			transport.RoundTrip,
			func(hreq *http.Request) (*http.Response, error) {
				resp, lc, err := f.client.roundTrip(hreq)
				if err == nil {
					f.client.release(lc, resp, true)
				}
				return resp, err
			},
		} {
			hreq, err := f.newRequest(t.Context(), req, new(outgoing))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := send(hreq)
			if err != nil {
				t.Fatalf("%s %s: %v", req.Method, req.Path, err)
			}
			resp.Body.Close()
			wire[i] = <-rawc
		}
		if !bytes.Equal(wire[0], wire[1]) {
			t.Errorf("%s %s: the Transport wrote\n%q\nthe client wrote\n%q", req.Method, req.Path, wire[0], wire[1])
		}
	}
}
