package handshake_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/handshake"
	"github.com/relayhq/relay/secrets"
)

func newKey(t testing.TB) *secrets.Key {
	t.Helper()
	k, _, err := secrets.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// sealed is h with its secrets in the forms events carry.
func sealed(t testing.TB, k *secrets.Key, h *domain.Handshakes) *domain.Handshakes {
	t.Helper()
	if h == nil {
		return nil
	}
	c := *h
	if c.MetaVerifyToken != "" {
		c.MetaVerifyTokenMAC, c.MetaVerifyToken = k.MAC(c.MetaVerifyToken), ""
	}
	if c.ZoomSecret != "" {
		s, err := k.Seal(c.ZoomSecret)
		if err != nil {
			t.Fatal(err)
		}
		c.ZoomSecretSealed, c.ZoomSecret = s, ""
	}
	return &c
}

// Expected answers are written out from the providers' documentation; the
// Zoom token was computed apart, with
// printf '%s' qgg8vlvZRS6UYooatFL8Aw | openssl dgst -sha256 -hmac abc123secret.
func TestAnswer(t *testing.T) {
	all := &domain.Handshakes{Enabled: domain.KnownHandshakes, MetaVerifyToken: "meta-token", ZoomSecret: "abc123secret"}
	key := newKey(t)
	plain := []domain.Header{{Name: "Content-Type", Value: "text/plain; charset=utf-8"}, {Name: "X-Content-Type-Options", Value: "nosniff"}}
	zoomJSON := []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Content-Type-Options", Value: "nosniff"}}
	zoomBody := func(token string) []byte {
		b, _ := json.Marshal(map[string]any{"event": "endpoint.url_validation", "payload": map[string]string{"plainToken": token}})
		return b
	}
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
		{"meta token with percent-encoding", all, handshake.Request{Method: "GET", Target: "/wh?hub.mode=subscribe&hub.challenge=7&hub.verify_token=meta%2Dtoken"},
			true, 200, plain, "7", "handshake: Meta verification"},
		{"graph", all, handshake.Request{Method: "POST", Target: "/notify?validationToken=Validation%3A%20Testing%20client%20application%20reachability%20for%20subscription%20Request-Id%3A%2025b0c0d0"},
			true, 200, plain, "Validation: Testing client application reachability for subscription Request-Id: 25b0c0d0", "handshake: Microsoft Graph validation"},
		{"dropbox", all, handshake.Request{Method: "GET", Target: "/dropbox?challenge=JIYb8zJdYk0"},
			true, 200, plain, "JIYb8zJdYk0", "handshake: Dropbox verification"},
		{"zoom", all, handshake.Request{Method: "POST", Target: "/zoom",
			Body: []byte(`{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`)},
			true, 200, zoomJSON,
			`{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"ceeee88dc3505eccd04a0561e0e4fae329cbec52844a0b86c8d9861ff192d48b"}`,
			"handshake: Zoom URL validation"},
		// A Zoom event is signed with the same secret over "v0:TS:BODY":
		// only a token as Zoom makes them is signed, anything else is
		// an ordinary delivery.
		{"zoom token shaped as a signed event", all, handshake.Request{Method: "POST", Target: "/zoom",
			Body: zoomBody(`v0:1700000000:{"event":"meeting.deleted","payload":{}}`)}, false, 0, nil, "", ""},
		{"zoom token with v0: alone", all, handshake.Request{Method: "POST", Target: "/zoom", Body: zoomBody("v0:")}, false, 0, nil, "", ""},
		{"zoom token with a space", all, handshake.Request{Method: "POST", Target: "/zoom", Body: zoomBody("a b")}, false, 0, nil, "", ""},
		{"zoom token too long", all, handshake.Request{Method: "POST", Target: "/zoom", Body: zoomBody(strings.Repeat("a", 129))}, false, 0, nil, "", ""},
		{"zoom token at the limit", all, handshake.Request{Method: "POST", Target: "/zoom", Body: zoomBody(strings.Repeat("a", 128))},
			true, 200, zoomJSON, `{"plainToken":"` + strings.Repeat("a", 128) + `","encryptedToken":"` + zoomMAC("abc123secret", strings.Repeat("a", 128)) + `"}`, "handshake: Zoom URL validation"},
		{"zoom empty token", all, handshake.Request{Method: "POST", Target: "/zoom", Body: zoomBody("")}, false, 0, nil, "", ""},
		{"zoom token not a string", all, handshake.Request{Method: "POST", Target: "/zoom",
			Body: []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":12}}`)}, false, 0, nil, "", ""},
		{"slack challenge with markup", all, handshake.Request{Method: "POST", Target: "/",
			Body: []byte(`{"type":"url_verification","challenge":"<script>alert(1)</script>"}`)}, false, 0, nil, "", ""},
		{"slack challenge too long", all, handshake.Request{Method: "POST", Target: "/",
			Body: []byte(`{"type":"url_verification","challenge":"` + strings.Repeat("a", 257) + `"}`)}, false, 0, nil, "", ""},
		{"slack body over 4 KiB", all, handshake.Request{Method: "POST", Target: "/",
			Body: []byte(`{"type":"url_verification","challenge":"abc","pad":"` + strings.Repeat("a", 4<<10) + `"}`)}, false, 0, nil, "", ""},
		{"graph token with markup", all, handshake.Request{Method: "POST", Target: "/notify?validationToken=%3Chtml%3E"}, false, 0, nil, "", ""},
		{"graph token too long", all, handshake.Request{Method: "POST", Target: "/notify?validationToken=" + strings.Repeat("a", 1025)}, false, 0, nil, "", ""},
		{"dropbox challenge with markup", all, handshake.Request{Method: "GET", Target: "/dropbox?challenge=%3Cb%3E"}, false, 0, nil, "", ""},
		{"dropbox challenge too long", all, handshake.Request{Method: "GET", Target: "/dropbox?challenge=" + strings.Repeat("a", 257)}, false, 0, nil, "", ""},
		{"meta challenge too long, right token", all, handshake.Request{Method: "GET", Target: "/wh?hub.mode=subscribe&hub.challenge=" + strings.Repeat("a", 257) + "&hub.verify_token=meta-token"},
			true, 400, plain, "Bad Request: hub.challenge is not a challenge\n", "handshake: Meta verification refused (hub.challenge is not a challenge)"},
		{"dropbox empty challenge", all, handshake.Request{Method: "GET", Target: "/dropbox?challenge="}, false, 0, nil, "", ""},
		{"meta challenge with markup, right token", all, handshake.Request{Method: "GET", Target: "/wh?hub.mode=subscribe&hub.challenge=%3Cb%3E&hub.verify_token=meta-token"},
			true, 400, plain, "Bad Request: hub.challenge is not a challenge\n", "handshake: Meta verification refused (hub.challenge is not a challenge)"},
		{"zoom other event", all, handshake.Request{Method: "POST", Target: "/zoom",
			Body: []byte(`{"payload":{"plainToken":"x"},"event":"meeting.started"}`)}, false, 0, nil, "", ""},
		{"only enabled ones", &domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeSlack}},
			handshake.Request{Method: "GET", Target: "/dropbox?challenge=JIYb8zJdYk0"}, false, 0, nil, "", ""},
		{"none enabled", nil, handshake.Request{Method: "GET", Target: "/dropbox?challenge=JIYb8zJdYk0"}, false, 0, nil, "", ""},
		{"plain request", all, handshake.Request{Method: "POST", Target: "/", Body: []byte(`{"hello":1}`)}, false, 0, nil, "", ""},
	} {
		for _, form := range []struct {
			name string
			keys handshake.Secrets
			h    *domain.Handshakes
		}{{"plain, as older events hold it", nil, tc.h}, {"sealed", key, sealed(t, key, tc.h)}} {
			t.Run(tc.name+"/"+form.name, func(t *testing.T) {
				got, ok := handshake.Answer(form.keys, form.h, tc.req)
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
}

func zoomMAC(secret, token string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(token))
	return hex.EncodeToString(m.Sum(nil))
}

func FuzzAnswer(f *testing.F) {
	f.Add("POST", "/?validationToken=a", []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"x"}}`))
	f.Add("GET", "/?hub.mode=subscribe&hub.challenge=1", []byte(nil))
	f.Add("POST", "/zoom", []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"v0:1:{}"}}`))
	f.Add("POST", "/", []byte(`{"type":"url_verification","challenge":"<b>"}`))
	h := &domain.Handshakes{Enabled: domain.KnownHandshakes, MetaVerifyToken: "t", ZoomSecret: "s"}
	f.Fuzz(func(t *testing.T, method, target string, body []byte) {
		r, ok := handshake.Answer(nil, h, handshake.Request{Method: method, Target: target, Body: body})
		if !ok {
			return
		}
		if r.Status != 200 && r.Status != 400 && r.Status != 403 || r.Reason == "" {
			t.Fatalf("answer %+v", r)
		}
		sniff := false
		for _, x := range r.Headers {
			sniff = sniff || x.Name == "X-Content-Type-Options" && x.Value == "nosniff"
		}
		if !sniff {
			t.Fatalf("answer without nosniff: %+v", r)
		}
		// What is echoed holds no markup, nor what a Zoom event's
		// signature covers.
		if strings.ContainsAny(string(r.Body), "<>") || strings.Contains(string(r.Body), "v0:") {
			t.Fatalf("answer echoes %q", r.Body)
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
				handshake.Answer(nil, h, bc.req)
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
		if r, ok := handshake.Answer(nil, h, handshake.Request{Method: "POST", Target: "/", Body: []byte(body)}); ok {
			t.Errorf("a %d-byte body was answered as a handshake: %+v", len(body), r)
		}
		if _, ok := handshake.Answer(nil, h, handshake.Request{Method: "POST", Target: "/", Body: []byte(strings.TrimSpace(body))}); !ok {
			t.Errorf("the small body was not answered")
		}
	}
}

// TestAnswerOtherKey: secrets stored under another secrets key (a relay
// given a new key, a node with its own) get a 500 that names the cause,
// not a 403 nor an HMAC computed with a wrong secret.
func TestAnswerOtherKey(t *testing.T) {
	h := sealed(t, newKey(t), &domain.Handshakes{Enabled: domain.KnownHandshakes, MetaVerifyToken: "meta-token", ZoomSecret: "abc123secret"})
	for _, tc := range []struct {
		name string
		keys handshake.Secrets
		req  handshake.Request
	}{
		{"meta", newKey(t), handshake.Request{Method: "GET", Target: "/?hub.mode=subscribe&hub.challenge=1&hub.verify_token=meta-token"}},
		{"zoom", newKey(t), handshake.Request{Method: "POST", Target: "/", Body: []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"p"}}`)}},
		{"zoom without a key", nil, handshake.Request{Method: "POST", Target: "/", Body: []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"p"}}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := handshake.Answer(tc.keys, h, tc.req)
			if !ok || r.Status != 500 || !strings.Contains(r.Reason, "cannot read") || !strings.Contains(string(r.Body), "cannot read") {
				t.Fatalf("got %v %d %q (reason %q), want a 500 saying the secret cannot be read", ok, r.Status, r.Body, r.Reason)
			}
			if tc.keys != nil && !strings.Contains(string(r.Body), "another secrets key") {
				t.Errorf("body %q does not say another key was used", r.Body)
			}
		})
	}
}

func TestRedactQuery(t *testing.T) {
	names := []string{"hub.verify_token"}
	for _, tc := range []struct{ in, want string }{
		{"/wh?hub.mode=subscribe&hub.verify_token=s3cret&hub.challenge=1", "/wh?hub.mode=subscribe&hub.verify_token=REDACTED&hub.challenge=1"},
		{"/wh?hub.verify_token=a&hub.verify_token=b", "/wh?hub.verify_token=REDACTED&hub.verify_token=REDACTED"},
		{"/wh?hub%2Everify_token=s3cret", "/wh?hub%2Everify_token=REDACTED"},
		{"/wh?hub.verify_token", "/wh?hub.verify_token=REDACTED"},
		{"/wh?x=1&&y=%zz", "/wh?x=1&&y=%zz"},
		{"/hub.verify_token=s", "/hub.verify_token=s"},
	} {
		if got := handshake.RedactQuery(tc.in, names); got != tc.want {
			t.Errorf("RedactQuery(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRedactQuery: whatever the target, no value of the parameter is left
// as the query parser reads it, and a target without it is unchanged.
func FuzzRedactQuery(f *testing.F) {
	f.Add("/wh?hub.mode=subscribe&hub.verify_token=s3cret&hub.challenge=1")
	f.Add("/?hub%2everify_token=x%41&a=b")
	f.Add("/?a=1;hub.verify_token=2")
	f.Fuzz(func(t *testing.T, target string) {
		got := handshake.RedactQuery(target, []string{"hub.verify_token"})
		_, raw, _ := strings.Cut(got, "?")
		q, _ := url.ParseQuery(raw)
		for _, v := range q["hub.verify_token"] {
			if v != handshake.Redacted {
				t.Fatalf("RedactQuery(%q) = %q leaves %q", target, got, v)
			}
		}
		_, rawIn, _ := strings.Cut(target, "?")
		if qi, _ := url.ParseQuery(rawIn); !qi.Has("hub.verify_token") && !strings.Contains(target, "verify") && got != target {
			t.Fatalf("RedactQuery(%q) = %q changed a target without the parameter", target, got)
		}
	})
}

// TestDetect: each provider's verification request is recognised whether
// or not an address enables its handshake, and only those: a plain
// webhook, a Meta GET without hub.mode=subscribe, a large body are not.
func TestDetect(t *testing.T) {
	pad := strings.Repeat(" ", 8<<10)
	for _, tc := range []struct {
		name string
		req  handshake.Request
		want domain.Handshake
	}{
		{"slack", handshake.Request{Method: "POST", Target: "/slack", Body: []byte(`{"type":"url_verification","challenge":"c"}`)}, domain.HandshakeSlack},
		{"meta", handshake.Request{Method: "GET", Target: "/m?hub.mode=subscribe&hub.challenge=1&hub.verify_token=t"}, domain.HandshakeMeta},
		{"msgraph", handshake.Request{Method: "POST", Target: "/g?validationToken=abc"}, domain.HandshakeGraph},
		{"dropbox", handshake.Request{Method: "GET", Target: "/d?challenge=abc"}, domain.HandshakeDropbox},
		{"zoom", handshake.Request{Method: "POST", Target: "/z", Body: []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"p"}}`)}, domain.HandshakeZoom},
		{"a webhook", handshake.Request{Method: "POST", Target: "/hook", Body: []byte(`{"type":"event_callback"}`)}, ""},
		{"meta without subscribe", handshake.Request{Method: "GET", Target: "/m?hub.challenge=1"}, ""},
		{"slack's body over the bound", handshake.Request{Method: "POST", Target: "/", Body: []byte(`{"type":"url_verification","challenge":"c"}` + pad)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := handshake.Detect(tc.req)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("Detect = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func FuzzDetect(f *testing.F) {
	f.Add("POST", "/", []byte(`{"type":"url_verification","challenge":"c"}`))
	f.Add("GET", "/?hub.mode=subscribe&hub.challenge=1", []byte(nil))
	all := &domain.Handshakes{Enabled: domain.KnownHandshakes, MetaVerifyToken: "t", ZoomSecret: "s"}
	f.Fuzz(func(t *testing.T, method, target string, body []byte) {
		req := handshake.Request{Method: method, Target: target, Body: body}
		h, ok := handshake.Detect(req)
		// What Detect names is what an address enabling every handshake
		// answers: the two never disagree.
		if _, answered := handshake.Answer(nil, all, req); answered != ok || (ok && !slices.Contains(domain.KnownHandshakes, h)) {
			t.Fatalf("Detect = %q, %v; Answer answered %v", h, ok, answered)
		}
	})
}
