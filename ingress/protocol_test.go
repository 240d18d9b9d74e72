package ingress

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/forwarded"
)

// TestWrongProtocol: with https public URLs, a request a trusted proxy
// marks as plain HTTP is recorded and answered 503 at an address, and
// redirected on the bare domain (probes excepted); one it marks as https,
// and one whose protocol nobody tells, are served as usual.
func TestWrongProtocol(t *testing.T) {
	e := newEnv(t, Config{RequireHTTPS: true, ConsoleURL: "https://localhost:8443",
		PublicURL: func(id string) string { return "https://" + id + ".localhost:8443/" }})
	e.addInspector("insp1", time.Hour)
	trusted, _ := forwarded.ParseTrusted("127.0.0.1")
	front := httptest.NewServer(forwarded.Handler(forwarded.Resolver{Trusted: trusted, Scheme: "https"}, e.srv.Handler()))
	t.Cleanup(front.Close)
	send := func(method, host, target, proto string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, front.URL+target, strings.NewReader("payload"))
		req.Host = host
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
			req.Header.Set("X-Forwarded-For", "203.0.113.9")
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	resp, body := send("POST", "insp1.localhost:8443", "/hook?a=1", "http")
	if resp.StatusCode != http.StatusServiceUnavailable ||
		body != "No agent for client\nwrong protocol: this address needs https (https://insp1.localhost:8443/)\n" {
		t.Errorf("plain HTTP at an address: %d %q", resp.StatusCode, body)
	}
	d, events := e.lastDelivery()
	if d.Target != "/hook?a=1" || string(d.Body) != "payload" || d.Answer == nil || d.Answer.Status != 503 ||
		d.RemoteAddr != "203.0.113.9" || d.Scheme != "http" || !strings.HasPrefix(d.Peer, "127.0.0.1:") || len(events) != 1 {
		t.Errorf("recorded %+v", d)
	}

	for _, proto := range []string{"https", ""} {
		if resp, body := send("POST", "insp1.localhost:8443", "/ok", proto); resp.StatusCode != http.StatusNoContent {
			t.Errorf("X-Forwarded-Proto %q: %d %q", proto, resp.StatusCode, body)
		}
	}
	if d, _ := e.lastDelivery(); d.Scheme != "https" {
		t.Errorf("scheme recorded %q, want the public one when nobody tells", d.Scheme)
	}

	resp, _ = send("GET", "localhost:8443", "/i/insp1?x=1", "http")
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != "https://localhost:8443/i/insp1?x=1" {
		t.Errorf("console over plain HTTP: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, probe := range []string{"/healthz", "/readyz", "/metrics"} {
		if resp, body := send("GET", "localhost:8443", probe, "http"); resp.StatusCode != http.StatusOK || body != "bare "+probe {
			t.Errorf("%s over plain HTTP: %d %q", probe, resp.StatusCode, body)
		}
	}
}
