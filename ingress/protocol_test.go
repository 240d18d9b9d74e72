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

// TestConsoleHost: with a console site of its own, requests for its host
// name (any port, any case) go to the console handler, a plain-HTTP one a
// trusted proxy marks is sent to its https URL (probes excepted), while
// the bare domain and the addresses are routed as before; without a
// console site its name is an unknown host.
func TestConsoleHost(t *testing.T) {
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "console "+r.URL.Path) })
	e := newEnvWith(t, Config{RequireHTTPS: true, ConsoleURL: "https://localhost", ConsoleSite: "https://console.example.org"},
		func(d *Deps) { d.Console = console })
	e.addInspector("insp1", time.Hour)
	trusted, _ := forwarded.ParseTrusted("127.0.0.1")
	front := httptest.NewServer(forwarded.Handler(forwarded.Resolver{Trusted: trusted, Scheme: "https"}, e.srv.Handler()))
	t.Cleanup(front.Close)
	plain := newEnv(t, Config{})

	tests := []struct {
		name, base, host, target, proto string
		status                          int
		body, location                  string
	}{
		{"console host", front.URL, "console.example.org", "/e/x", "https", 200, "console /e/x", ""},
		{"console host, a port and case", front.URL, "Console.Example.org:8443", "/graphql", "", 200, "console /graphql", ""},
		{"console host over plain HTTP", front.URL, "console.example.org", "/i/a?b=1", "http", 308, "", "https://console.example.org/i/a?b=1"},
		{"console host probe over plain HTTP", front.URL, "console.example.org", "/healthz", "http", 200, "console /healthz", ""},
		{"bare domain", front.URL, "localhost", "/graphql", "https", 200, "bare /graphql", ""},
		{"an address", front.URL, "insp1.localhost", "/hook", "https", 204, "", ""},
		{"no console site: an unknown host", "http://" + plain.addr, "console.example.org", "/", "", 503, "No agent for client\nunknown address\n", ""},
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", tt.base+tt.target, nil)
			req.Host = tt.host
			if tt.proto != "" {
				req.Header.Set("X-Forwarded-Proto", tt.proto)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || (tt.body != "" && string(b) != tt.body) || resp.Header.Get("Location") != tt.location {
				t.Errorf("%s %s: %d %q to %q, want %d %q to %q", tt.host, tt.target, resp.StatusCode, b, resp.Header.Get("Location"), tt.status, tt.body, tt.location)
			}
		})
	}
}
