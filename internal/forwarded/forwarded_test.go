package forwarded

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      []string
		want    []Element
		wantErr bool
	}{
		{in: []string{`for=192.0.2.60;proto=http;by=203.0.113.43`}, want: []Element{{For: "192.0.2.60", Proto: "http", By: "203.0.113.43"}}},
		{in: []string{`for="_gazonk"`}, want: []Element{{For: "_gazonk"}}},
		{in: []string{`For="[2001:db8:cafe::17]:4711"`}, want: []Element{{For: "[2001:db8:cafe::17]:4711"}}},
		{in: []string{`for=192.0.2.43, for=198.51.100.17`}, want: []Element{{For: "192.0.2.43"}, {For: "198.51.100.17"}}},
		{in: []string{`for=192.0.2.43`, `for=198.51.100.17;proto=HTTPS`}, want: []Element{{For: "192.0.2.43"}, {For: "198.51.100.17", Proto: "https"}}},
		{in: []string{` for=a ; host="ex\"ample.com" ,, for=b `}, want: []Element{{For: "a", Host: `ex"ample.com`}, {For: "b"}}},
		{in: []string{`for=a;secret=x`}, want: []Element{{For: "a"}}},
		{in: []string{""}, want: nil},
		{in: []string{`for=`}, wantErr: true},
		{in: []string{`for`}, wantErr: true},
		{in: []string{`for="unterminated`}, wantErr: true},
		{in: []string{`for=a b`}, wantErr: true},
		{in: []string{`for="a\`}, wantErr: true},
		{in: []string{`for="a` + "\x01" + `"`}, wantErr: true},
		{in: []string{strings.Repeat("for=a,", maxElements+1)}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// FuzzParse: no input panics, and what Element.String writes reads back
// the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`for=192.0.2.60;proto=http;by=203.0.113.43`, `for="[2001:db8::1]:80", for=unknown`, `host="a\"b";proto=https`, `,,;=`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		elems, err := Parse([]string{s})
		if err != nil {
			return
		}
		var parts []string
		for _, e := range elems {
			if e != (Element{}) {
				parts = append(parts, e.String())
			}
		}
		again, err := Parse([]string{strings.Join(parts, ", ")})
		if err != nil {
			t.Fatalf("Parse(%q) failed on what String wrote from %q: %v", strings.Join(parts, ", "), s, err)
		}
		var want []Element
		for _, e := range elems {
			if e != (Element{}) {
				want = append(want, e)
			}
		}
		if !reflect.DeepEqual(again, want) {
			t.Fatalf("round trip of %q: %+v, want %+v", s, again, want)
		}
	})
}

func TestNodeAddr(t *testing.T) {
	tests := []struct {
		in, ip, port string
		ok           bool
	}{
		{"192.0.2.1", "192.0.2.1", "", true},
		{" 192.0.2.1:80", "192.0.2.1", "80", true},
		{"[2001:db8::1]", "2001:db8::1", "", true},
		{"[2001:db8::1]:443", "2001:db8::1", "443", true},
		{"2001:db8::1", "2001:db8::1", "", true},
		{"::ffff:192.0.2.1", "192.0.2.1", "", true},
		{"unknown", "", "", false},
		{"_hidden", "", "", false},
		{"[2001:db8::1", "", "", false},
		{"[2001:db8::1]x", "", "", false},
	}
	for _, tt := range tests {
		ip, port, ok := NodeAddr(tt.in)
		if ok != tt.ok || (ok && (ip.String() != tt.ip || port != tt.port)) {
			t.Errorf("NodeAddr(%q) = %v, %q, %v; want %s, %q, %v", tt.in, ip, port, ok, tt.ip, tt.port, tt.ok)
		}
	}
}

func FuzzList(f *testing.F) {
	f.Add("a, b,,c")
	f.Fuzz(func(t *testing.T, s string) {
		for _, e := range List([]string{s}) {
			if e == "" || strings.Contains(e, ",") || strings.TrimSpace(e) != e {
				t.Fatalf("List(%q) has entry %q", s, e)
			}
		}
	})
}

func TestParseTrusted(t *testing.T) {
	tr, err := ParseTrusted(" 10.0.0.0/8, 127.0.0.1 ,::1,2001:db8::/32")
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"10.1.2.3": true, "127.0.0.1": true, "127.0.0.2": false, "::1": true, "2001:db8::5": true,
		"::ffff:10.0.0.1": true, "192.0.2.1": false, "not an ip": false,
	} {
		if got := tr.ContainsHost(host); got != want {
			t.Errorf("trusts %s = %v, want %v", host, got, want)
		}
	}
	if tr, err := ParseTrusted(""); err != nil || len(tr) != 0 {
		t.Errorf("empty = %v, %v", tr, err)
	}
	if _, err := ParseTrusted("10.0.0.0/33"); err == nil {
		t.Error("a bad prefix was accepted")
	}
}

func TestResolve(t *testing.T) {
	trusted, _ := ParseTrusted("127.0.0.1/32,10.0.0.0/8")
	tests := []struct {
		name    string
		rv      Resolver
		remote  string
		tls     bool
		headers http.Header
		want    Client
	}{
		{
			name: "untrusted peer: headers ignored", rv: Resolver{Trusted: trusted}, remote: "192.0.2.1:5000",
			headers: http.Header{"X-Forwarded-For": {"203.0.113.9"}, "X-Forwarded-Proto": {"https"}},
			want:    Client{Addr: "192.0.2.1:5000", Proto: "http"},
		},
		{
			name: "TLS connection", rv: Resolver{TLS: true}, remote: "192.0.2.1:5000", tls: true,
			want: Client{Addr: "192.0.2.1:5000", Proto: "https", Known: true},
		},
		{
			name: "plain connection on a TLS relay is known plain", rv: Resolver{TLS: true, Scheme: "https"}, remote: "192.0.2.1:5000",
			want: Client{Addr: "192.0.2.1:5000", Proto: "http", Known: true},
		},
		{
			name: "no TLS, no proxy: the public scheme is assumed", rv: Resolver{Scheme: "https"}, remote: "192.0.2.1:5000",
			want: Client{Addr: "192.0.2.1:5000", Proto: "https"},
		},
		{
			name: "trusted proxy: X-Forwarded-For and -Proto", rv: Resolver{Trusted: trusted}, remote: "127.0.0.1:4000",
			headers: http.Header{"X-Forwarded-For": {"203.0.113.9"}, "X-Forwarded-Proto": {"https"}},
			want:    Client{Addr: "203.0.113.9", Proto: "https", Known: true, Peer: "127.0.0.1:4000"},
		},
		{
			name: "trusted proxy says http", rv: Resolver{Trusted: trusted, Scheme: "https"}, remote: "127.0.0.1:4000",
			headers: http.Header{"X-Forwarded-For": {"203.0.113.9"}, "X-Forwarded-Proto": {"http"}},
			want:    Client{Addr: "203.0.113.9", Proto: "http", Known: true, Peer: "127.0.0.1:4000"},
		},
		{
			name: "spoofed entries left of the nearest untrusted one are ignored", rv: Resolver{Trusted: trusted}, remote: "127.0.0.1:4000",
			headers: http.Header{"X-Forwarded-For": {"1.1.1.1, 203.0.113.9", "10.0.0.5"}},
			want:    Client{Addr: "203.0.113.9", Proto: "http", Peer: "127.0.0.1:4000"},
		},
		{
			name: "X-Forwarded-For wins over a Forwarded the sender may have written", rv: Resolver{Trusted: trusted}, remote: "127.0.0.1:4000",
			headers: http.Header{"X-Forwarded-For": {"203.0.113.9"}, "Forwarded": {"for=1.1.1.1;proto=https"}},
			want:    Client{Addr: "203.0.113.9", Proto: "http", Peer: "127.0.0.1:4000"},
		},
		{
			name: "Forwarded alone", rv: Resolver{Trusted: trusted}, remote: "[::ffff:127.0.0.1]:4000",
			headers: http.Header{"Forwarded": {`for="[2001:db8::7]:1234";proto=https`}},
			want:    Client{Addr: "[2001:db8::7]:1234", Proto: "https", Known: true, Peer: "[::ffff:127.0.0.1]:4000"},
		},
		{
			name: "malformed Forwarded is ignored", rv: Resolver{Trusted: trusted}, remote: "127.0.0.1:4000",
			headers: http.Header{"Forwarded": {`for="1.1.1.1`}},
			want:    Client{Addr: "127.0.0.1:4000", Proto: "http", Peer: "127.0.0.1:4000"},
		},
		{
			name: "every hop trusted: the farthest", rv: Resolver{Trusted: trusted}, remote: "127.0.0.1:4000",
			headers: http.Header{"X-Forwarded-For": {"10.0.0.9, 10.0.0.5"}},
			want:    Client{Addr: "10.0.0.9", Proto: "http", Peer: "127.0.0.1:4000"},
		},
		{
			name: "unknown node stops the walk", rv: Resolver{Trusted: trusted}, remote: "127.0.0.1:4000",
			headers: http.Header{"X-Forwarded-For": {"203.0.113.9, unknown"}},
			want:    Client{Addr: "127.0.0.1:4000", Proto: "http", Peer: "127.0.0.1:4000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://x.localhost/", nil)
			r.RemoteAddr = tt.remote
			r.Header = tt.headers
			if r.Header == nil {
				r.Header = http.Header{}
			}
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if got := tt.rv.Resolve(r); got != tt.want {
				t.Errorf("Resolve = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestHandlerSetsRemoteAddr: limits below count the sender a trusted proxy
// names, never the proxy.
func TestHandlerSetsRemoteAddr(t *testing.T) {
	trusted, _ := ParseTrusted("127.0.0.1")
	var seen string
	h := Handler(Resolver{Trusted: trusted}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := FromContext(r.Context())
		seen = r.RemoteAddr + " " + c.Addr
	}))
	for remote, want := range map[string]string{
		"127.0.0.1:4000": "203.0.113.9:0 203.0.113.9",
		"192.0.2.1:5000": "192.0.2.1:5000 192.0.2.1:5000",
	} {
		r := httptest.NewRequest("GET", "http://localhost/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		h.ServeHTTP(httptest.NewRecorder(), r)
		if seen != want {
			t.Errorf("from %s: saw %q, want %q", remote, seen, want)
		}
	}
}

// TestHandlerContext: the Client is found through contexts derived from
// the request's, which keep its values and its cancellation.
func TestHandlerContext(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "outer"))
	var ctx context.Context
	h := Handler(Resolver{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx = r.Context()
	}))
	r := httptest.NewRequest("GET", "http://localhost/", nil).WithContext(parent)
	r.RemoteAddr = "192.0.2.1:5000"
	h.ServeHTTP(httptest.NewRecorder(), r)

	child, stop := context.WithCancel(context.WithValue(ctx, key{}, "inner"))
	defer stop()
	want := Client{Addr: "192.0.2.1:5000", Proto: "http"}
	for name, c := range map[string]context.Context{"request": ctx, "derived": child, "detached": context.WithoutCancel(ctx)} {
		if got, ok := FromContext(c); !ok || got != want {
			t.Errorf("%s: FromContext = %+v, %v; want %+v", name, got, ok, want)
		}
	}
	if _, ok := FromContext(parent); ok {
		t.Error("FromContext found a Client in a context Handler did not make")
	}
	if ctx.Value(key{}) != "outer" || child.Value(key{}) != "inner" {
		t.Errorf("values: %v, %v; want outer, inner", ctx.Value(key{}), child.Value(key{}))
	}
	cancel()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the request's context did not reach a context derived from it")
	}
	if !errors.Is(child.Err(), context.Canceled) {
		t.Errorf("child.Err() = %v", child.Err())
	}
}

// TestHandlerContextCostsNoGoroutine: a context derived from the request's
// finds the parent's cancellation through it (Value hands the context
// package its own keys), so it costs no goroutine of its own: a context
// type that hid them would cost one per derived context until cancelled.
func TestHandlerContextCostsNoGoroutine(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ctx context.Context
	h := Handler(Resolver{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ctx = r.Context() }))
	r := httptest.NewRequest("GET", "http://localhost/", nil).WithContext(parent)
	r.RemoteAddr = "192.0.2.1:5000"
	h.ServeHTTP(httptest.NewRecorder(), r)
	before := runtime.NumGoroutine()
	stops := make([]context.CancelFunc, 100)
	for i := range stops {
		_, stops[i] = context.WithCancel(ctx)
	}
	grew := runtime.NumGoroutine() - before
	for _, stop := range stops {
		stop()
	}
	if grew > 10 { // other tests' goroutines may come and go; 100 would be one each
		t.Errorf("100 contexts derived from the request's started %d goroutines", grew)
	}
}
