package systemtest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestConfiguredAnswerThroughTheCLI: `relay endpoints update` sets what a
// LOG Endpoint answers; a delivery gets exactly that status, headers and
// body, recorded and explained as the configured answer. A body over
// 64 KiB, a header name that is not a token and a status out of range are
// refused with the field at fault, and change nothing.
func TestConfiguredAnswerThroughTheCLI(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	dir := t.TempDir()
	bodyFile := filepath.Join(dir, "ok.json")
	if err := os.WriteFile(bodyFile, []byte(`{"ok":true}`), 0o600); err != nil {
		t.Fatal(err)
	}

	var ep jsonEndpoint
	h.jsonOut(t, &ep, "endpoints", "create", "audit", "--mode", "LOG")
	if ep.Answer == nil || ep.Answer.Status != 204 || ep.Handshakes == nil || len(ep.Handshakes.Enabled) != 0 || ep.Handshakes.InProxy != "LOCAL" {
		t.Fatalf("a new Endpoint shows answer %+v, handshakes %+v; want 204 and none", ep.Answer, ep.Handshakes)
	}
	var updated jsonEndpoint
	h.jsonOut(t, &updated, "endpoints", "update", "audit", "--answer-status", "202",
		"--answer-header", "Content-Type=application/json", "--answer-header", "X-Relay=configured", "--answer-body", "@"+bodyFile)
	if a := updated.Answer; a == nil || a.Status != 202 || a.Body != `{"ok":true}` || len(a.Headers) != 2 || a.Headers[1].Name != "X-Relay" {
		t.Fatalf("endpoints update shows answer %+v", updated.Answer)
	}

	resp := send(t, r, ep.ID, "POST", "/hook", [][2]string{{"Content-Type", "text/plain"}}, []byte("event"))
	if resp.Status != 202 || string(resp.Body) != `{"ok":true}` || resp.Header.Get("Content-Type") != "application/json" ||
		resp.Header.Get("X-Relay") != "configured" {
		t.Fatalf("sender got %d %q %v, want the configured answer", resp.Status, resp.Body, resp.Header)
	}
	d := deliveryAt(t, r, acct.Token, ep.ID, "/hook")
	explained(t, r, acct.Token, d.ID, 202, []string{"Answered 202 by the relay", "configured answer"}, nil)

	out, code := h.run(t, "", "endpoints", "show", "audit")
	if code != 0 || !strings.Contains(out, "answer:      202") || !strings.Contains(out, "X-Relay: configured") {
		t.Errorf("endpoints show exited %d:\n%s", code, out)
	}
	out, code = h.run(t, "", "endpoints", "list")
	if code != 0 || !strings.Contains(out, "202 (2 headers, 11 bytes)") {
		t.Errorf("endpoints list exited %d:\n%s", code, out)
	}

	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("a"), 64<<10+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"body over 64 KiB", []string{"--answer-body", "@" + big}, []string{"INVALID_INPUT", "answer.body", "65537 bytes is over the limit of 65536 bytes"}},
		{"header name", []string{"--answer-header", "X Bad=1"}, []string{"INVALID_INPUT", "answer.headers[0].name", `"X Bad" is not a valid header name`}},
		{"framing header", []string{"--answer-header", "Content-Length=3"}, []string{"answer.headers[0].name", "set by the relay itself"}},
		{"cookie", []string{"--answer-header", "Set-Cookie=relay_session=x; Domain=localhost"}, []string{"INVALID_INPUT", "answer.headers[0].name", "Set-Cookie is refused", "a cookie set there could reach the relay's console"}},
		{"status", []string{"--answer-status", "99"}, []string{"INVALID_INPUT", "answer.status", "99 is not a status from 200 to 599"}},
		{"body with 204", []string{"--answer-status", "204", "--answer-body", "x"}, []string{"answer.body", "status 204 carries no body"}},
		{"zoom without secret", []string{"--handshake", "zoom"}, []string{"handshakes.zoomSecret", "needs the Zoom app's secret token"}},
		{"unknown handshake", []string{"--handshake", "github"}, []string{`--handshake "github"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := h.run(t, "", append([]string{"endpoints", "update", "audit"}, tc.args...)...)
			if code == 0 {
				t.Fatalf("accepted:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("exit %d:\n%s\ndoes not say %q", code, out, w)
				}
			}
		})
	}
	if resp := send(t, r, ep.ID, "POST", "/after", nil, nil); resp.Status != 202 || string(resp.Body) != `{"ok":true}` {
		t.Errorf("after refusals the sender got %d %q, want the answer set before", resp.Status, resp.Body)
	}

	var reset jsonEndpoint
	h.jsonOut(t, &reset, "endpoints", "update", "audit", "--answer-status", "204")
	if resp := send(t, r, ep.ID, "POST", "/reset", nil, nil); resp.Status != 204 || len(resp.Body) != 0 || reset.Answer.Status != 204 {
		t.Errorf("after a reset the sender got %d %q (shown %+v), want 204", resp.Status, resp.Body, reset.Answer)
	}
}

// zoomSecret and zoomPlainToken give zoomEncrypted, computed apart from
// the relay with:
//
//	printf '%s' qgg8vlvZRS6UYooatFL8Aw | openssl dgst -sha256 -hmac abc123secret
const (
	zoomSecret     = "abc123secret"
	zoomPlainToken = "qgg8vlvZRS6UYooatFL8Aw"
	zoomEncrypted  = "ceeee88dc3505eccd04a0561e0e4fae329cbec52844a0b86c8d9861ff192d48b"
	metaToken      = "meta-verify-4217"
)

// handshakeCases are the providers' verification requests, each with the
// answer its documentation asks for (docs/answers.md).
var handshakeCases = []struct {
	name, method, target, body string
	status                     int
	answer                     string
	header                     [2]string
	reason                     string
	recorded                   string // the target as recorded, when not as sent
}{
	{"slack", "POST", "/slack", `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`,
		200, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", [2]string{"Content-Type", "text/plain; charset=utf-8"}, "Slack URL verification", ""},
	{"meta", "GET", "/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=" + metaToken, "",
		200, "1158201444", [2]string{"Content-Type", "text/plain; charset=utf-8"}, "Meta verification",
		"/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=REDACTED"},
	{"meta with a wrong token", "GET", "/meta-wrong?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=guess", "",
		403, "Forbidden: wrong hub.verify_token\n", [2]string{"Content-Type", "text/plain; charset=utf-8"}, "Meta verification refused (wrong verify token)",
		"/meta-wrong?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=REDACTED"},
	{"microsoft graph", "POST", "/graph?validationToken=Validation%3A%20Testing%20client%20application%20reachability", "",
		200, "Validation: Testing client application reachability", [2]string{"Content-Type", "text/plain; charset=utf-8"}, "Microsoft Graph validation", ""},
	{"dropbox", "GET", "/dropbox?challenge=JIYb8zJdYk0", "",
		200, "JIYb8zJdYk0", [2]string{"X-Content-Type-Options", "nosniff"}, "Dropbox verification", ""},
	{"zoom", "POST", "/zoom", `{"payload":{"plainToken":"` + zoomPlainToken + `"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`,
		200, `{"plainToken":"` + zoomPlainToken + `","encryptedToken":"` + zoomEncrypted + `"}`, [2]string{"Content-Type", "application/json"}, "Zoom URL validation", ""},
}

// TestHandshakesAnsweredByTheRelay: a LOG Endpoint and a guest inspector,
// with every handshake enabled through the CLI, answer each provider's
// verification request as its documentation asks; each is recorded, and
// its explanation names the handshake; other requests get the address's
// own answer. Secrets are never shown back, nor written to the relay's log.
func TestHandshakesAnsweredByTheRelay(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	secretFile := filepath.Join(t.TempDir(), "zoom.secret")
	if err := os.WriteFile(secretFile, []byte(zoomSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--handshake", "slack,meta,msgraph,dropbox,zoom", "--meta-verify-token", metaToken, "--zoom-secret-file", secretFile}

	var ep jsonEndpoint
	h.jsonOut(t, &ep, "endpoints", "create", "providers", "--mode", "LOG")
	var updated jsonEndpoint
	h.jsonOut(t, &updated, append([]string{"endpoints", "update", "providers"}, flags...)...)
	insp, _ := createInspector(t, r)
	var inspector jsonInspectorAnswer
	h.jsonOut(t, &inspector, append([]string{"inspector", "answer", insp}, flags...)...)

	for _, shown := range []*jsonHandshakes{updated.Handshakes, inspector.Handshakes} {
		if shown == nil || strings.Join(shown.Enabled, ",") != "SLACK,META,MSGRAPH,DROPBOX,ZOOM" || !shown.ZoomSecretSet ||
			!shown.MetaVerifyTokenSet {
			t.Errorf("handshakes shown as %+v", shown)
		}
	}
	for _, args := range [][]string{{"endpoints", "show", "providers"}, {"endpoints", "list", "-o", "json"}, {"inspector", "answer", insp, "-o", "json"}} {
		out, code := h.run(t, "", args...)
		if code != 0 || strings.Contains(out, zoomSecret) || strings.Contains(out, metaToken) {
			t.Errorf("relay %s exited %d, or showed a secret:\n%s", strings.Join(args, " "), code, out)
		}
	}

	for _, addr := range []struct {
		kind, id, token string
	}{{"LOG Endpoint", ep.ID, acct.Token}, {"inspector", insp, ""}} {
		t.Run(addr.kind, func(t *testing.T) {
			for _, tc := range handshakeCases {
				t.Run(tc.name, func(t *testing.T) {
					resp := send(t, r, addr.id, tc.method, tc.target, [][2]string{{"Content-Type", "application/json"}}, []byte(tc.body))
					if resp.Status != tc.status || string(resp.Body) != tc.answer || resp.Header.Get(tc.header[0]) != tc.header[1] {
						t.Fatalf("answered %d %q %v; want %d %q with %s: %s", resp.Status, resp.Body, resp.Header, tc.status, tc.answer, tc.header[0], tc.header[1])
					}
					if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
						t.Errorf("answered without X-Content-Type-Options: nosniff: %v", resp.Header)
					}
					recorded := tc.target
					if tc.recorded != "" {
						recorded = tc.recorded
					}
					var id string
					if addr.token == "" {
						id = inspectorDeliveryAt(t, r, addr.id, recorded).ID
					} else {
						id = deliveryAt(t, r, addr.token, addr.id, recorded).ID
					}
					explained(t, r, addr.token, id, tc.status, []string{"by the relay", tc.reason + ", a provider's verification request this address answers itself"},
						[]string{`recorded reason: "handshake: ` + tc.reason + `"`})
				})
			}
			// A request that is no handshake gets the address's answer.
			if resp := send(t, r, addr.id, "POST", "/event", nil, []byte(`{"type":"event_callback"}`)); resp.Status != 204 {
				t.Errorf("a plain request answered %d, want 204", resp.Status)
			}
		})
	}
	// The inspector's own answer, set the same way, answers the rest.
	h.jsonOut(t, &inspector, "inspector", "answer", insp, "--answer-status", "200", "--answer-header", "X-Inspector=yes", "--answer-body", "ok")
	if resp := send(t, r, insp, "POST", "/event", nil, []byte(`{"type":"event_callback"}`)); resp.Status != 200 || string(resp.Body) != "ok" ||
		resp.Header.Get("X-Inspector") != "yes" {
		t.Errorf("the inspector answered %d %q %v, want its configured 200 ok", resp.Status, resp.Body, resp.Header)
	}
	if resp := send(t, r, insp, handshakeCases[1].method, handshakeCases[1].target, nil, nil); resp.Status != 200 || string(resp.Body) != handshakeCases[1].answer {
		t.Errorf("with an answer set, the meta handshake answered %d %q", resp.Status, resp.Body)
	}
	if out := r.Output(); strings.Contains(out, zoomSecret) || strings.Contains(out, metaToken) {
		t.Errorf("the relay's log holds a secret:\n%s", out)
	}
}

// TestZoomHandshakeSignsNoForgedEvent: Zoom signs its events with the
// secret token over "v0:TIMESTAMP:BODY", the same key the URL validation
// signs plainToken with. A plainToken shaped as a forged meeting.deleted
// event is therefore not signed: the request is an ordinary delivery,
// recorded and answered as the address answers (204), with no
// encryptedToken; a real token still is.
func TestZoomHandshakeSignsNoForgedEvent(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	secretFile := filepath.Join(t.TempDir(), "zoom.secret")
	if err := os.WriteFile(secretFile, []byte(zoomSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ep jsonEndpoint
	h.jsonOut(t, &ep, "endpoints", "create", "zoom", "--mode", "LOG")
	h.jsonOut(t, &ep, "endpoints", "update", "zoom", "--handshake", "zoom", "--zoom-secret-file", secretFile)

	forged := `{"event":"meeting.deleted","payload":{"object":{"id":"85012345678"}},"event_ts":1700000000000}`
	signed := "v0:1700000000:" + forged
	mac := hmac.New(sha256.New, []byte(zoomSecret))
	mac.Write([]byte(signed))
	signature := hex.EncodeToString(mac.Sum(nil)) // what x-zm-signature would carry: v0=<this>
	body, err := json.Marshal(map[string]any{"event": "endpoint.url_validation", "payload": map[string]string{"plainToken": signed}})
	if err != nil {
		t.Fatal(err)
	}
	resp := send(t, r, ep.ID, "POST", "/forge", [][2]string{{"Content-Type", "application/json"}}, body)
	if resp.Status != 204 || len(resp.Body) != 0 || strings.Contains(string(resp.Body), signature) {
		t.Fatalf("a plainToken shaped as a signed event was answered %d %q, want 204 and no encryptedToken", resp.Status, resp.Body)
	}
	if x := explained(t, r, acct.Token, deliveryAt(t, r, acct.Token, ep.ID, "/forge").ID, 204, nil, nil); strings.Contains(x.Explanation, "handshake") {
		t.Errorf("the forged validation is explained as a handshake:\n%s", x.Explanation)
	}

	resp = send(t, r, ep.ID, "POST", "/real", [][2]string{{"Content-Type", "application/json"}},
		[]byte(`{"payload":{"plainToken":"`+zoomPlainToken+`"},"event":"endpoint.url_validation"}`))
	if want := `{"plainToken":"` + zoomPlainToken + `","encryptedToken":"` + zoomEncrypted + `"}`; resp.Status != 200 || string(resp.Body) != want {
		t.Errorf("a real validation answered %d %q, want %s", resp.Status, resp.Body, want)
	}
}

// TestProxyHandshakesAnsweredByTheRelay: a PROXY Endpoint forwards a
// handshake to its local process (none is connected here: 503) until it
// says the relay answers them; then the relay answers without forwarding.
func TestProxyHandshakesAnsweredByTheRelay(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	seen, port := recordingTarget(t)
	var ep jsonEndpoint
	h.jsonOut(t, &ep, "endpoints", "create", "proxied", "--target", port, "--handshake", "slack")
	if ep.Handshakes == nil || strings.Join(ep.Handshakes.Enabled, ",") != "SLACK" || ep.Handshakes.InProxy != "LOCAL" {
		t.Fatalf("created with handshakes %+v", ep.Handshakes)
	}
	slack := handshakeCases[0]
	if resp := send(t, r, ep.ID, slack.method, "/local", nil, []byte(slack.body)); resp.Status != 503 {
		t.Fatalf("with handshakes answered LOCAL and no agent, the sender got %d, want 503", resp.Status)
	}
	h.jsonOut(t, &ep, "endpoints", "update", "proxied", "--handshakes-in-proxy", "RELAY")
	if ep.Handshakes == nil || ep.Handshakes.InProxy != "RELAY" {
		t.Fatalf("handshakes shown as %+v", ep.Handshakes)
	}
	resp := send(t, r, ep.ID, slack.method, "/relay", nil, []byte(slack.body))
	if resp.Status != 200 || string(resp.Body) != slack.answer {
		t.Fatalf("sender got %d %q, want 200 %q", resp.Status, resp.Body, slack.answer)
	}
	d := deliveryAt(t, r, acct.Token, ep.ID, "/relay")
	if len(d.Attempts) != 0 || len(seen.all()) != 0 {
		t.Errorf("the handshake was forwarded: %d attempts, %d requests seen locally", len(d.Attempts), len(seen.all()))
	}
	explained(t, r, acct.Token, d.ID, 200, []string{"Slack URL verification", "not forwarded"}, nil)
}
