package ingress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestTolerateTargetsOnOneConnection: on one keep-alive connection, a
// target with invalid percent-encoding reaches the handler as sent, a valid
// "%25" stays "%25", and a body that looks like such a request line is not
// touched.
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
			t.Errorf("handler saw %q body %q, want %q body %q", s.target, s.body, tc.target, tc.body)
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
