package apiclient

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDoErrors: a GraphQL error is an *Error with its code; an answer
// that is no GraphQL response names the server as no relay.
func TestDoErrors(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.URL.Path != "/graphql":
			http.NotFound(w, r)
		case strings.Contains(string(body), "refuse"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"errors":[{"message":"no such thing","extensions":{"code":"NOT_FOUND"}}],"data":null}`)
		case strings.Contains(string(body), "busy"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"errors":[{"message":"later","extensions":{"code":"RATE_LIMITED","retryAfterSeconds":3}}]}`)
		default:
			w.Header().Set("Content-Type", "application/graphql-response+json")
			io.WriteString(w, `{"data":{"me":{"id":"a1"}}}`)
		}
	}))
	defer srv.Close()

	c := New(srv.URL+"/", "tok")
	var out struct{ Me struct{ ID string } }
	if err := c.Do(t.Context(), "{ me{ id } }", nil, &out); err != nil || out.Me.ID != "a1" || auth != "Bearer tok" {
		t.Fatalf("Do = %v, %+v, auth %q", err, out, auth)
	}
	var ae *Error
	if err := c.Do(t.Context(), "refuse", nil, nil); !errors.As(err, &ae) || ae.Code != "NOT_FOUND" || !ae.Refusal() {
		t.Errorf("refusal: %v", err)
	}
	if err := c.Do(t.Context(), "busy", nil, nil); !errors.As(err, &ae) || ae.Code != "RATE_LIMITED" || ae.Refusal() || ae.Extensions["retryAfterSeconds"] != 3.0 {
		t.Errorf("rate limited: %v (%+v)", err, ae)
	}
	var nr *NotRelayError
	other := New(srv.URL+"/elsewhere", "")
	if err := other.Do(t.Context(), "{ me{ id } }", nil, nil); !errors.As(err, &nr) || !strings.Contains(err.Error(), "no relay GraphQL API at "+srv.URL+"/elsewhere") {
		t.Errorf("not a relay: %v", err)
	}
}

func TestWebSocketURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:8080":          "ws://localhost:8080/graphql",
		"https://relay.example/":         "wss://relay.example/graphql",
		"ws://127.0.0.1:9/graphql":       "ws://127.0.0.1:9/graphql",
		"https://relay.example/base/":    "wss://relay.example/base/graphql",
		"https://relay.example/graphql/": "wss://relay.example/graphql",
	} {
		if got, err := WebSocketURL(in); err != nil || got != want {
			t.Errorf("WebSocketURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestDoUnreachableRelay: a relay nothing answers for is told as such,
// with what to check, not as the HTTP client's dial error.
func TestDoUnreachableRelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	tests := []struct {
		name, server string
		want         []string
	}{
		{"nothing listens", closed, []string{"cannot reach the relay at " + closed + " (connection refused)", "relay serve", "--server"}},
		{"no such host", "http://relay.invalid", []string{"cannot reach the relay at http://relay.invalid (", "--server"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := New(tt.server, "").Do(t.Context(), "{ me{ id } }", nil, nil)
			var ue *UnreachableError
			if !errors.As(err, &ue) {
				t.Fatalf("Do = %v, want an *UnreachableError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), `Post "`) || strings.Contains(err.Error(), "dial tcp") {
				t.Errorf("error %q is the HTTP client's", err)
			}
		})
	}
}

// TestHTTPSToAPlainRelay: an https:// URL of a relay that serves plain
// HTTP says to use http://, on a call and on a subscription, not the
// HTTP client's "server gave HTTP response to HTTPS client".
func TestHTTPSToAPlainRelay(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	server := "https://" + strings.TrimPrefix(srv.URL, "http://")
	want := "the relay at " + server + " answers plain HTTP; use " + srv.URL
	tests := []struct {
		name string
		call func(c *Client) error
	}{
		{"call", func(c *Client) error { return c.Do(t.Context(), "{ me{ id } }", nil, nil) }},
		{"subscription", func(c *Client) error {
			return c.Subscribe(t.Context(), "subscription { x }", nil, func(json.RawMessage) error { return nil })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(New(server, ""))
			var pe *PlainHTTPError
			if !errors.As(err, &pe) || err.Error() != want {
				t.Fatalf("error %v (%T), want a *PlainHTTPError saying %q", err, err, want)
			}
		})
	}
}
