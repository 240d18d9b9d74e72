package handshake_test

import (
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/handshake"
)

// Expected answers are written out from the providers' documentation; the
// Zoom token was computed apart, with
// printf '%s' qgg8vlvZRS6UYooatFL8Aw | openssl dgst -sha256 -hmac abc123secret.
func TestAnswer(t *testing.T) {
	all := &domain.Handshakes{Enabled: domain.KnownHandshakes, MetaVerifyToken: "meta-token", ZoomSecret: "abc123secret"}
	plain := []domain.Header{{Name: "Content-Type", Value: "text/plain; charset=utf-8"}}
	for _, tc := range []struct {
		name    string
		h       *domain.Handshakes
		req     handshake.Request
		ok      bool
		status  int
		headers []domain.Header
		body    string
		reason  string
	}{
		{"slack", all, handshake.Request{Method: "POST", Target: "/slack/events",
			Body: []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)},
			true, 200, plain, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "handshake: Slack URL verification"},
		{"slack event is not a handshake", all, handshake.Request{Method: "POST", Target: "/",
			Body: []byte(`{"type":"event_callback","challenge":"x"}`)}, false, 0, nil, "", ""},
		{"slack by GET is not a handshake", all, handshake.Request{Method: "GET", Target: "/",
			Body: []byte(`{"type":"url_verification","challenge":"x"}`)}, false, 0, nil, "", ""},
		{"meta", all, handshake.Request{Method: "GET", Target: "/wh?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meta-token"},
			true, 200, plain, "1158201444", "handshake: Meta verification"},
		{"meta wrong token", all, handshake.Request{Method: "GET", Target: "/wh?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=guess"},
			true, 403, plain, "Forbidden: wrong hub.verify_token\n", "handshake: Meta verification refused (wrong verify token)"},
		{"meta no token", all, handshake.Request{Method: "GET", Target: "/wh?hub.mode=subscribe&hub.challenge=1158201444"},
			true, 403, plain, "Forbidden: wrong hub.verify_token\n", "handshake: Meta verification refused (wrong verify token)"},
		{"graph", all, handshake.Request{Method: "POST", Target: "/notify?validationToken=Validation%3A%20Testing%20client%20application%20reachability%20for%20subscription%20Request-Id%3A%2025b0c0d0"},
			true, 200, plain, "Validation: Testing client application reachability for subscription Request-Id: 25b0c0d0", "handshake: Microsoft Graph validation"},
		{"dropbox", all, handshake.Request{Method: "GET", Target: "/dropbox?challenge=JIYb8zJdYk0"},
			true, 200, append(plain, domain.Header{Name: "X-Content-Type-Options", Value: "nosniff"}), "JIYb8zJdYk0", "handshake: Dropbox verification"},
		{"zoom", all, handshake.Request{Method: "POST", Target: "/zoom",
			Body: []byte(`{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`)},
			true, 200, []domain.Header{{Name: "Content-Type", Value: "application/json"}},
			`{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"ceeee88dc3505eccd04a0561e0e4fae329cbec52844a0b86c8d9861ff192d48b"}`,
			"handshake: Zoom URL validation"},
		{"zoom other event", all, handshake.Request{Method: "POST", Target: "/zoom",
			Body: []byte(`{"payload":{"plainToken":"x"},"event":"meeting.started"}`)}, false, 0, nil, "", ""},
		{"only enabled ones", &domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeSlack}},
			handshake.Request{Method: "GET", Target: "/dropbox?challenge=JIYb8zJdYk0"}, false, 0, nil, "", ""},
		{"none enabled", nil, handshake.Request{Method: "GET", Target: "/dropbox?challenge=JIYb8zJdYk0"}, false, 0, nil, "", ""},
		{"plain request", all, handshake.Request{Method: "POST", Target: "/", Body: []byte(`{"hello":1}`)}, false, 0, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := handshake.Answer(tc.h, tc.req)
			if ok != tc.ok {
				t.Fatalf("answered %v, want %v (%+v)", ok, tc.ok, got)
			}
			if !ok {
				return
			}
			if got.Status != tc.status || string(got.Body) != tc.body || got.Reason != tc.reason {
				t.Errorf("got %d %q (reason %q), want %d %q (reason %q)", got.Status, got.Body, got.Reason, tc.status, tc.body, tc.reason)
			}
			if len(got.Headers) != len(tc.headers) {
				t.Fatalf("headers %v, want %v", got.Headers, tc.headers)
			}
			for i := range got.Headers {
				if got.Headers[i] != tc.headers[i] {
					t.Errorf("header %d: %v, want %v", i, got.Headers[i], tc.headers[i])
				}
			}
		})
	}
}

func FuzzAnswer(f *testing.F) {
	f.Add("POST", "/?validationToken=a", []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"x"}}`))
	f.Add("GET", "/?hub.mode=subscribe&hub.challenge=1", []byte(nil))
	h := &domain.Handshakes{Enabled: domain.KnownHandshakes, MetaVerifyToken: "t", ZoomSecret: "s"}
	f.Fuzz(func(t *testing.T, method, target string, body []byte) {
		r, ok := handshake.Answer(h, handshake.Request{Method: method, Target: target, Body: body})
		if ok && (r.Status != 200 && r.Status != 403 || r.Reason == "") {
			t.Fatalf("answer %+v", r)
		}
	})
}

// BenchmarkAnswer is the cost per request at an address with every
// handshake enabled: a webhook that is none of them (the common case), and
// a Zoom validation.
func BenchmarkAnswer(b *testing.B) {
	h := &domain.Handshakes{Enabled: domain.KnownHandshakes, MetaVerifyToken: "t", ZoomSecret: "abc123secret"}
	event := make([]byte, 0, 64<<10)
	event = append(event, `{"type":"event_callback","event":{"text":"`...)
	for len(event) < 60<<10 {
		event = append(event, "lorem ipsum "...)
	}
	event = append(event, `"}}`...)
	for _, bc := range []struct {
		name string
		req  handshake.Request
	}{
		{"plain 60KiB POST", handshake.Request{Method: "POST", Target: "/hook?x=1", Body: event}},
		{"zoom validation", handshake.Request{Method: "POST", Target: "/zoom",
			Body: []byte(`{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event":"endpoint.url_validation"}`)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				handshake.Answer(h, bc.req)
			}
		})
	}
}

// TestLargeBodyIsNoHandshake: Slack's and Zoom's verification bodies are
// small; a large body is never taken for one.
func TestLargeBodyIsNoHandshake(t *testing.T) {
	h := &domain.Handshakes{Enabled: domain.KnownHandshakes, MetaVerifyToken: "t", ZoomSecret: "s"}
	pad := strings.Repeat(" ", 8<<10)
	for _, body := range []string{`{"type":"url_verification","challenge":"c"}` + pad, `{"event":"endpoint.url_validation","payload":{"plainToken":"p"}}` + pad} {
		if r, ok := handshake.Answer(h, handshake.Request{Method: "POST", Target: "/", Body: []byte(body)}); ok {
			t.Errorf("a %d-byte body was answered as a handshake: %+v", len(body), r)
		}
		if _, ok := handshake.Answer(h, handshake.Request{Method: "POST", Target: "/", Body: []byte(strings.TrimSpace(body))}); !ok {
			t.Errorf("the small body was not answered")
		}
	}
}
