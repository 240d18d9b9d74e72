package agentcli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// seen is what the local server received.
type seen struct {
	method     string
	requestURI string
	host       string
	header     http.Header
	body       []byte
}

// recordingServer starts a local target that records each request and
// answers with respond.
func recordingServer(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) (target string, requests <-chan seen) {
	t.Helper()
	ch := make(chan seen, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ch <- seen{method: r.Method, requestURI: r.RequestURI, host: r.Host, header: r.Header.Clone(), body: body}
		respond(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), ch
}

func next(t *testing.T, ch <-chan seen) seen {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("local server got no request")
		return seen{}
	}
}

func TestForwardKeepsRawPathByteForByte(t *testing.T) {
	target, requests := recordingServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	f := newForwarder(httpTarget(target), 5*time.Second, false)
	defer f.close()
	for _, path := range []string{
		"/",
		"/x",
		"/x/",
		"/a//b",
		"//a//b",
		"//",
		"/a%2Fb?x=1",
		"/a%2fb%20c?q=a%20b&q=%2F",
		"/x?",
		"/x?a=1&a=2&b",
		"/caf%C3%A9/%7Euser",
		"/a;b=c/d:e@f!$&'()*+,=",
		"//a//b?x=//y",
		"/{id}|a^b`c\\d<e>\"f",
		"/caf\u00e9?q=\u00fc",
	} {
		t.Run(path, func(t *testing.T) {
			res := f.forward(t.Context(), localRequest{Method: "GET", Path: path})
			if res.Err != nil {
				t.Fatalf("forward: %v", res.Err)
			}
			if got := next(t, requests); got.requestURI != path {
				t.Errorf("local server saw %q, want %q", got.requestURI, path)
			}
		})
	}
}

func TestForwardRefusesNonOriginTargets(t *testing.T) {
	target, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {})
	f := newForwarder(httpTarget(target), time.Second, false)
	defer f.close()
	for _, path := range []string{"", "x", "http://evil.example/", "/a b", "/a\r\nX: y"} {
		res := f.forward(t.Context(), localRequest{Method: "GET", Path: path})
		if res.Err == nil || res.Status != 502 {
			t.Errorf("path %q: got status %d err %v, want a 502 error", path, res.Status, res.Err)
		}
	}
}

// TestForwardMethods: a method that is an HTTP token reaches the local
// target as it is; any other is refused before a request is sent, as
// http.NewRequest refuses it.
func TestForwardMethods(t *testing.T) {
	target, requests := recordingServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	f := newForwarder(httpTarget(target), 5*time.Second, false)
	defer f.close()
	for _, tc := range []struct {
		method, want string // want "" for refused
	}{
		{"", "GET"}, {"POST", "POST"}, {"PROPFIND", "PROPFIND"}, {"x-custom!", "x-custom!"},
		{"G ET", ""}, {"GET\r\n", ""}, {"caf\u00e9", ""}, {"(GET)", ""}, {"GET\x00", ""},
	} {
		res := f.forward(t.Context(), localRequest{Method: tc.method, Path: "/m", Body: []byte("b")})
		if tc.want == "" {
			if res.Status != 502 || res.Err == nil || !strings.Contains(res.Err.Error(), "invalid method") {
				t.Errorf("method %q: got %d %v, want 502 and an invalid method", tc.method, res.Status, res.Err)
			}
			continue
		}
		if res.Err != nil || res.Status != 204 {
			t.Fatalf("method %q: got %d %v", tc.method, res.Status, res.Err)
		}
		if got := next(t, requests); got.method != tc.want || string(got.body) != "b" {
			t.Errorf("method %q: local target got %s %q, want %s %q", tc.method, got.method, got.body, tc.want, "b")
		}
	}
	select {
	case s := <-requests:
		t.Errorf("a refused method reached the local target: %s", s.method)
	default:
	}
}

func TestForwardHeadersAndBody(t *testing.T) {
	body := make([]byte, 256*3)
	for i := range body {
		body[i] = byte(i)
	}
	target, requests := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Connection", "X-Local-Hop")
		w.Header().Set("X-Local-Hop", "drop me")
		w.WriteHeader(418)
		w.Write(append([]byte("echo:"), body...))
	})
	f := newForwarder(httpTarget(target), 5*time.Second, false)
	defer f.close()

	res := f.forward(t.Context(), localRequest{
		Method: "POST",
		Path:   "/webhooks/stripe",
		Headers: []domain.Header{
			{Name: "Stripe-Signature", Value: "t=1,v1=abc"},
			{Name: "X-Multi", Value: "one"},
			{Name: "x-multi", Value: "two"},
			{Name: "X-Multi", Value: "three"},
			{Name: "Connection", Value: "keep-alive, X-Hop"},
			{Name: "X-Hop", Value: "1"},
			{Name: "Keep-Alive", Value: "timeout=5"},
			{Name: "Transfer-Encoding", Value: "chunked"},
			{Name: "Host", Value: "evil.example"},
			{Name: "Content-Length", Value: "3"},
			{Name: "Content-Type", Value: "application/octet-stream"},
		},
		Body: body,
	})
	if res.Err != nil {
		t.Fatalf("forward: %v", res.Err)
	}
	got := next(t, requests)
	if got.method != "POST" || got.host != target {
		t.Errorf("method %q host %q, want POST %q", got.method, got.host, target)
	}
	if !bytes.Equal(got.body, body) {
		t.Errorf("local server got %d body bytes, want the %d sent", len(got.body), len(body))
	}
	if v := got.header.Values("X-Multi"); !slices.Equal(v, []string{"one", "two", "three"}) {
		t.Errorf("X-Multi = %q, want one, two, three in order", v)
	}
	if v := got.header.Get("Stripe-Signature"); v != "t=1,v1=abc" {
		t.Errorf("Stripe-Signature = %q", v)
	}
	for _, name := range []string{"X-Hop", "Keep-Alive", "Accept-Encoding", "User-Agent"} {
		if v, ok := got.header[name]; ok {
			t.Errorf("local server got %s: %q, want none", name, v)
		}
	}
	if cl := got.header.Get("Content-Length"); cl != "768" {
		t.Errorf("Content-Length = %q, want 768", cl)
	}

	if res.Status != 418 {
		t.Errorf("status %d, want 418", res.Status)
	}
	if want := append([]byte("echo:"), body...); !bytes.Equal(res.Body, want) {
		t.Errorf("response body differs: %d bytes, want %d", len(res.Body), len(want))
	}
	var cookies []string
	for _, h := range res.Headers {
		switch h.Name {
		case "Set-Cookie":
			cookies = append(cookies, h.Value)
		case "Connection", "X-Local-Hop":
			t.Errorf("hop-by-hop response header %s reported", h.Name)
		}
	}
	if !slices.Equal(cookies, []string{"a=1", "b=2"}) {
		t.Errorf("Set-Cookie = %q, want a=1, b=2", cookies)
	}
}

func TestForwardKeepsUserAgentAndCompressedBody(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(strings.Repeat("compressed ", 100)))
	zw.Close()
	target, requests := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gz.Bytes())
	})
	f := newForwarder(httpTarget(target), 5*time.Second, false)
	defer f.close()
	res := f.forward(t.Context(), localRequest{Method: "GET", Path: "/", Headers: []domain.Header{{Name: "User-Agent", Value: "Stripe/1.0"}}})
	if res.Err != nil {
		t.Fatalf("forward: %v", res.Err)
	}
	if ua := next(t, requests).header.Get("User-Agent"); ua != "Stripe/1.0" {
		t.Errorf("User-Agent = %q, want Stripe/1.0", ua)
	}
	if !bytes.Equal(res.Body, gz.Bytes()) {
		t.Errorf("body was altered: got %d bytes, want the %d gzip bytes as sent", len(res.Body), gz.Len())
	}
}

// TestForwardDoesNotFollowRedirects: a local 3xx is the local answer and
// goes back as it is, and nothing follows it, also when its Location no
// URL parser accepts (an http.Client fails on that before any redirect
// policy is asked).
func TestForwardDoesNotFollowRedirects(t *testing.T) {
	for _, tc := range []struct {
		status   int
		location string
	}{
		{http.StatusFound, "/elsewhere"},
		{http.StatusFound, "http://[::1"},
		{http.StatusMovedPermanently, "/a%zz"},
		{http.StatusTemporaryRedirect, "http://exa mple.test/"},
		{http.StatusSeeOther, ":no-scheme"},
	} {
		t.Run(tc.location, func(t *testing.T) {
			target, requests := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Location"] = []string{tc.location}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, "moved")
			})
			f := newForwarder(httpTarget(target), 5*time.Second, false)
			defer f.close()
			res := f.forward(t.Context(), localRequest{Method: "POST", Path: "/start", Body: []byte("x")})
			if res.Err != nil {
				t.Fatalf("forward: %v (%s)", res.Err, res.Failure)
			}
			if res.Status != tc.status || string(res.Body) != "moved" {
				t.Errorf("got %d %q, want %d %q", res.Status, res.Body, tc.status, "moved")
			}
			var location []string
			for _, h := range res.Headers {
				if h.Name == "Location" {
					location = append(location, h.Value)
				}
			}
			if !slices.Equal(location, []string{tc.location}) {
				t.Errorf("Location = %q, want [%q]", location, tc.location)
			}
			next(t, requests)
			select {
			case s := <-requests:
				t.Errorf("redirect was followed to %s", s.requestURI)
			default:
			}
		})
	}
}

// TestForwardHTTPSTargetSpeakingHTTP: an https target that answers in
// plain HTTP is named so in the attempt's error.
func TestForwardHTTPSTargetSpeakingHTTP(t *testing.T) {
	target, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {})
	f := newForwarder(Target{Scheme: "https", Host: target}, 5*time.Second, true)
	defer f.close()
	res := f.forward(t.Context(), localRequest{Method: "GET", Path: "/"})
	if res.Status != 502 || res.Err == nil || !strings.Contains(res.Err.Error(), http.ErrSchemeMismatch.Error()) {
		t.Errorf("got %d %v, want 502 and %q", res.Status, res.Err, http.ErrSchemeMismatch)
	}
}

func TestForwardNothingListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := l.Addr().String()
	l.Close()
	f := newForwarder(httpTarget(target), 5*time.Second, false)
	defer f.close()
	res := f.forward(t.Context(), localRequest{Method: "POST", Path: "/x"})
	want := "nothing listening on " + target
	if res.Err == nil || !strings.HasPrefix(res.Err.Error(), want+": ") || !strings.Contains(res.Err.Error(), "connection refused") || res.Failure != want {
		t.Fatalf("error = %v, failure %q; want %q with the detail, and %q", res.Err, res.Failure, want, want)
	}
	if res.Status != 502 {
		t.Errorf("status %d, want 502", res.Status)
	}
}

func TestForwardSlowTargetTimesOut(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	target, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	f := newForwarder(httpTarget(target), 200*time.Millisecond, false)
	defer f.close()
	res := f.forward(t.Context(), localRequest{Method: "GET", Path: "/slow"})
	if res.Status != 504 || res.Err == nil {
		t.Fatalf("status %d err %v, want 504 with an error", res.Status, res.Err)
	}
	if want := "the local target " + target + " did not answer within 200ms"; res.Failure != want || !strings.HasPrefix(res.Err.Error(), want) {
		t.Errorf("error = %q, failure %q, want %q", res.Err, res.Failure, want)
	}
}

func TestForwardBoundsResponseBody(t *testing.T) {
	target, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, maxResponseBody+1))
	})
	f := newForwarder(httpTarget(target), 10*time.Second, false)
	defer f.close()
	res := f.forward(t.Context(), localRequest{Method: "GET", Path: "/big"})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "larger than 10 MiB") {
		t.Fatalf("error = %v, want a size error", res.Err)
	}
}

func TestForwardCancelled(t *testing.T) {
	target, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	f := newForwarder(httpTarget(target), 10*time.Second, false)
	defer f.close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := f.forward(ctx, localRequest{Method: "GET", Path: "/"})
	if res.Status != 502 || res.Err == nil || !strings.Contains(res.Err.Error(), "cancelled") {
		t.Fatalf("forward with a cancelled context = %d %v, want 502 and a cancellation, not the target's timeout", res.Status, res.Err)
	}
}

// FuzzWireHeaders: any header value, UTF-8 or not, survives the API's JSON
// form (value plus valueBase64) byte for byte, both ways.
func FuzzWireHeaders(f *testing.F) {
	f.Add("plain")
	f.Add("caf\xe9")
	f.Add("\xff\x00\"\\")
	f.Fuzz(func(t *testing.T, value string) {
		b, err := json.Marshal(toWireHeaders([]domain.Header{{Name: "X", Value: value}}))
		if err != nil {
			t.Fatal(err)
		}
		var back []wireHeader
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		hs, err := fromWireHeaders(back)
		if err != nil || len(hs) != 1 || hs[0].Value != value {
			t.Fatalf("value %q came back as %+v, %v", value, hs, err)
		}
	})
}

// TestForwardDropsHeadersNamedWithClose: headers named in a Connection
// field are hop-by-hop also when the field says close, which net/http
// deletes before the agent sees it; a keep-alive answer on the same
// connection first shows the capture starts over with each request.
func TestForwardDropsHeadersNamedWithClose(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close, X-Hop")
		} else {
			w.Header().Set("Connection", "X-Other")
			w.Header().Set("X-Other", "gone")
		}
		w.Header().Set("X-Hop", "secret")
		w.Header().Set("X-Kept", "yes")
		io.WriteString(w, "ok")
	})
	// Over https too: the capture sits above TLS.
	for _, scheme := range []string{"http", "https"} {
		srv := httptest.NewServer(handler)
		if scheme == "https" {
			srv.Close()
			srv = httptest.NewTLSServer(handler)
		}
		f := newForwarder(Target{Scheme: scheme, Host: srv.Listener.Addr().String()}, 5*time.Second, true)
		for _, path := range []string{"/keep", "/close"} {
			res := f.forward(t.Context(), localRequest{Method: "GET", Path: path})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			got := map[string]string{}
			for _, h := range res.Headers {
				got[h.Name] = h.Value
			}
			wantHop := map[string]string{"/keep": "secret", "/close": ""}[path]
			if got["X-Hop"] != wantHop || got["X-Kept"] != "yes" || got["X-Other"] != "" || got["Connection"] != "" {
				t.Errorf("%s %s: headers %v, want X-Hop %q, X-Kept and no Connection or X-Other", scheme, path, got, wantHop)
			}
		}
		f.close()
		srv.Close()
	}
}

// httpTarget is an http target at hostport.
func httpTarget(hostport string) Target { return Target{Scheme: "http", Host: hostport} }

// TestForwardReceipt: the receipt the agent reports is the digests the
// relay computes of what it sent (domain.DigestRequest), whatever the
// agent legitimately adds (its target's prefix, Host, X-Forwarded-*,
// Forwarded, Content-Length); and it matches the digests of what the local
// process received, recomputed from the documented canonical form.
func TestForwardReceipt(t *testing.T) {
	body := []byte(`{"id":"evt_1","n":1}`)
	headers := []domain.Header{
		{Name: "Stripe-Signature", Value: "t=1,v1=abc"},
		{Name: "x-multi", Value: "one"},
		{Name: "X-Multi", Value: "two"},
		{Name: "Content-Type", Value: "application/json"},
		{Name: "X-Forwarded-For", Value: "198.51.100.1"},
		{Name: "Connection", Value: "X-Hop"},
		{Name: "X-Hop", Value: "1"},
		{Name: "Host", Value: "relay.example"},
	}
	for _, tt := range []struct {
		name, prefix, path string
		origin             origin
		preserveHost       bool
	}{
		{name: "plain", path: "/hook?a=1"},
		{name: "prefix", prefix: "/api", path: "/hook?a=1&b"},
		{name: "double slash", path: "//x/%2F?q"},
		{name: "double slash after a prefix", prefix: "/api", path: "//x/%2F"},
		{name: "origin and preserved host", path: "/hook", preserveHost: true,
			origin: origin{Host: "relay.example", Scheme: "https", Sender: "203.0.113.7:5555"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			target, requests := recordingServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
			tg := httpTarget(target)
			tg.Prefix = tt.prefix
			f := newForwarder(tg, 5*time.Second, false)
			f.preserveHost = tt.preserveHost
			defer f.close()
			res := f.forward(t.Context(), localRequest{Method: "POST", Path: tt.path, Headers: headers, Body: body, Origin: tt.origin})
			if res.Err != nil || res.Receipt == nil {
				t.Fatalf("forward: %v, receipt %v", res.Err, res.Receipt)
			}
			if want := domain.DigestRequest("POST", tt.path, headers, body); *res.Receipt != want {
				t.Errorf("receipt %+v, relay's digests %+v", *res.Receipt, want)
			}
			got := next(t, requests)
			var received []domain.Header
			for name, values := range got.header {
				for _, v := range values {
					received = append(received, domain.Header{Name: name, Value: v})
				}
			}
			local := domain.DigestRequest(got.method, strings.TrimPrefix(got.requestURI, tt.prefix), received, got.body)
			if local != *res.Receipt {
				t.Errorf("the local process got %+v, the receipt says %+v\nheaders: %q", local, *res.Receipt, domain.CanonicalHeaders(received))
			}
		})
	}
}

// TestForwardRequestRewinds: the request the agent builds gives its body
// again through GetBody after it was read, as the Transport needs to
// resend a request a closing keep-alive connection lost; its length is
// the body's.
func TestForwardRequestRewinds(t *testing.T) {
	f := newForwarder(httpTarget("127.0.0.1:1"), time.Second, false)
	for _, body := range []string{"", "x", `{"k":"v"}`} {
		hreq, err := f.newRequest(t.Context(), localRequest{Method: "POST", Path: "/h", Body: []byte(body)}, new(outgoing))
		if err != nil {
			t.Fatal(err)
		}
		if hreq.ContentLength != int64(len(body)) {
			t.Errorf("%q: ContentLength %d", body, hreq.ContentLength)
		}
		first, _ := io.ReadAll(hreq.Body)
		if string(first) != body {
			t.Errorf("%q: body read %q", body, first)
		}
		if body == "" {
			if hreq.Body != http.NoBody || hreq.GetBody != nil {
				t.Errorf("empty body: Body %T GetBody set %v, want http.NoBody and none", hreq.Body, hreq.GetBody != nil)
			}
			continue
		}
		for range 2 {
			rc, err := hreq.GetBody()
			if err != nil {
				t.Fatal(err)
			}
			again, _ := io.ReadAll(rc)
			if string(again) != body {
				t.Errorf("%q: GetBody gave %q", body, again)
			}
		}
	}
}

// FuzzValidMethod: the agent refuses exactly the methods
// http.NewRequest refuses (it builds the request itself).
func FuzzValidMethod(f *testing.F) {
	for _, m := range []string{"GET", "POST", "x-custom!", "G ET", "GET\r\n", "caf\u00e9", "(GET)", "\xff", "M\x00"} {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, m string) {
		if m == "" {
			return // both send GET
		}
		_, err := http.NewRequest(m, "http://127.0.0.1/", nil)
		if got, want := validMethod(m), err == nil; got != want {
			t.Errorf("validMethod(%q) = %v, http.NewRequest accepts it: %v", m, got, want)
		}
	})
}

// writeCounter counts the writes on a connection.
type writeCounter struct {
	net.Conn
	writes *atomic.Int32
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestForwardWritesRequestInOneWrite: a request with a body of a few KiB
// leaves the agent in one write, head and body together (one syscall, one
// TCP segment on loopback), as http.NewRequest's requests do: the
// Transport flushes the head on its own for a body it does not know to be
// in memory.
func TestForwardWritesRequestInOneWrite(t *testing.T) {
	target, requests := recordingServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	f := newForwarder(httpTarget(target), 5*time.Second, false)
	defer f.close()
	var writes atomic.Int32
	dial := f.client.dial
	f.client.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{Conn: c, writes: &writes}, nil
	}
	for _, size := range []int{0, 1, 1 << 10, 3 << 10} {
		writes.Store(0)
		body := bytes.Repeat([]byte("b"), size)
		res := f.forward(t.Context(), localRequest{Method: "POST", Path: "/one", Body: body,
			Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}}})
		if res.Err != nil || res.Status != 204 {
			t.Fatalf("%d bytes: got %d %v", size, res.Status, res.Err)
		}
		if got := next(t, requests); len(got.body) != size {
			t.Errorf("%d bytes: the local target got %d", size, len(got.body))
		}
		if n := writes.Load(); n != 1 {
			t.Errorf("%d bytes: the request took %d writes, want 1", size, n)
		}
	}
}
