package systemtest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// webhookSecret is shared by the test's "provider" and its local handler.
var webhookSecret = []byte("whsec_5f3a\u00e9-not-a-real-secret")

func hmacHex(parts ...[]byte) string {
	m := hmac.New(sha256.New, webhookSecret)
	for _, p := range parts {
		m.Write(p)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// verifySignature checks a provider signature over the raw body the way
// the providers' own libraries do; the scheme is chosen by header.
func verifySignature(h http.Header, body []byte) error {
	switch {
	case h.Get("X-Hub-Signature-256") != "":
		got, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
		if !ok || !hmac.Equal([]byte(got), []byte(hmacHex(body))) {
			return fmt.Errorf("github signature mismatch")
		}
	case h.Get("Stripe-Signature") != "":
		var ts, v1 string
		for _, kv := range strings.Split(h.Get("Stripe-Signature"), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "t":
				ts = v
			case "v1":
				v1 = v
			}
		}
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
			return fmt.Errorf("stripe timestamp %q out of tolerance", ts)
		}
		if !hmac.Equal([]byte(v1), []byte(hmacHex([]byte(ts), []byte("."), body))) {
			return fmt.Errorf("stripe signature mismatch")
		}
	case h.Get("X-Slack-Signature") != "":
		ts := h.Get("X-Slack-Request-Timestamp")
		want := "v0=" + hmacHex([]byte("v0:"+ts+":"), body)
		if !hmac.Equal([]byte(h.Get("X-Slack-Signature")), []byte(want)) {
			return fmt.Errorf("slack signature mismatch")
		}
	default:
		return fmt.Errorf("no signature header")
	}
	return nil
}

// TestProxySignaturesVerifyThroughRelay: a local handler that verifies
// HMAC signatures over the raw body accepts what the provider sent through
// the relay, for bodies that any re-encoding would change.
func TestProxySignaturesVerifyThroughRelay(t *testing.T) {
	t.Parallel()
	var got requestLog
	p := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		got.add(r, body)
		if err == nil {
			err = verifySignature(r.Header, body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "verified")
	}), false)

	bodies := []struct {
		name, contentType string
		body              []byte
	}{
		{"json with odd spacing, CRLF and non-ASCII", "application/json; charset=utf-8",
			[]byte("{ \"action\" :\"opened\",\r\n\t\"title\": \"\u00dcn\u00efc\u00f6d\u00e9 \u2014 \u201cquotes\u201d \U0001F680\" ,\"n\":1.50e+2 ,  \"esc\":\"\\u00e9\\/\"  }\r\n")},
		{"form encoded", "application/x-www-form-urlencoded",
			[]byte("payload=%7B%22zen%22%3A%22Keep+it+logically+awesome.%22%7D&x=caf%C3%A9+%26+more&x=2")},
		{"not UTF-8", "application/octet-stream",
			[]byte{'{', 0xe9, 0xff, 0x00, '\r', '\n', 0xc3, '}', ' ', ' '}},
	}
	schemes := []struct {
		name string
		sign func(body []byte) [][2]string
	}{
		{"github", func(body []byte) [][2]string {
			return [][2]string{{"X-Hub-Signature-256", "sha256=" + hmacHex(body)}, {"X-GitHub-Event", "issues"}}
		}},
		{"stripe", func(body []byte) [][2]string {
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			return [][2]string{{"Stripe-Signature", "t=" + ts + ",v1=" + hmacHex([]byte(ts), []byte("."), body)}}
		}},
		{"slack", func(body []byte) [][2]string {
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			return [][2]string{{"X-Slack-Request-Timestamp", ts}, {"X-Slack-Signature", "v0=" + hmacHex([]byte("v0:"+ts+":"), body)}}
		}},
	}
	for _, s := range schemes {
		for i, b := range bodies {
			path := fmt.Sprintf("/hooks/%s/%d?delivery=%d", s.name, i, i)
			headers := append([][2]string{{"Content-Type", b.contentType}}, s.sign(b.body)...)
			resp := p.send(t, "POST", path, headers, b.body)
			if resp.Status != 200 || string(resp.Body) != "verified" {
				t.Errorf("%s, %s: sender got %d %q, want 200 verified", s.name, b.name, resp.Status, resp.Body)
			}
			if seen := got.last(t); !bytes.Equal(seen.Body, b.body) {
				t.Errorf("%s, %s: local body %q, want %q", s.name, b.name, seen.Body, b.body)
			}
			d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, path)
			stored, _ := base64.StdEncoding.DecodeString(d.BodyBase64)
			if !bytes.Equal(stored, b.body) || d.ResponseStatus == nil || *d.ResponseStatus != 200 {
				t.Errorf("%s, %s: recorded body %q status %s, want the sent bytes and 200", s.name, b.name, stored, intp(d.ResponseStatus))
			}
		}
	}

	// The handler really checks: a signature over other bytes is refused
	// and that refusal reaches the sender as it is.
	body := bodies[0].body
	tampered := bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	resp := p.send(t, "POST", "/hooks/tampered", [][2]string{{"X-Hub-Signature-256", "sha256=" + hmacHex(tampered)}}, body)
	if resp.Status != 401 || !strings.Contains(string(resp.Body), "github signature mismatch") {
		t.Fatalf("tampered signature: sender got %d %q, want 401 github signature mismatch", resp.Status, resp.Body)
	}
}

// TestProxyPassesAnswersAndStripsHopByHop: the local status, headers (also
// repeated ones) and body reach the sender unchanged; hop-by-hop request
// headers do not reach the local handler, repeats of others do, in order.
func TestProxyPassesAnswersAndStripsHopByHop(t *testing.T) {
	t.Parallel()
	var got requestLog
	p := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got.add(r, body)
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		if err != nil {
			w.WriteHeader(http.StatusOK)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/problem+json")
		h.Set("X-Local", fmt.Sprintf("code-%d", code))
		h.Add("X-Twice", "first")
		h.Add("X-Twice", "second, with comma")
		if code == http.StatusCreated {
			h.Set("Location", "/things/42")
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "{ \"status\" : %d,\r\n \"detail\": \"caf\u00e9 \u2713\" }", code)
	}), true)

	for _, code := range []int{200, 201, 400, 404, 500} {
		resp := p.send(t, "POST", fmt.Sprintf("/status/%d", code), nil, []byte(`{"q":1}`))
		want := fmt.Sprintf("{ \"status\" : %d,\r\n \"detail\": \"caf\u00e9 \u2713\" }", code)
		if resp.Status != code || string(resp.Body) != want {
			t.Errorf("%d: sender got %d %q, want %d %q", code, resp.Status, resp.Body, code, want)
		}
		if v := resp.Header.Values("X-Twice"); !slices.Equal(v, []string{"first", "second, with comma"}) {
			t.Errorf("%d: X-Twice = %q, want [first, second, with comma]", code, v)
		}
		if v := resp.Header.Get("X-Local"); v != fmt.Sprintf("code-%d", code) {
			t.Errorf("%d: X-Local = %q", code, v)
		}
		if v := resp.Header.Get("Content-Type"); v != "application/problem+json" {
			t.Errorf("%d: Content-Type = %q", code, v)
		}
		if code == 201 && resp.Header.Get("Location") != "/things/42" {
			t.Errorf("201: Location = %q", resp.Header.Get("Location"))
		}
		d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, fmt.Sprintf("/status/%d", code))
		if d.ResponseStatus == nil || *d.ResponseStatus != code || !slices.Equal(attemptStatuses(d), []int{code}) {
			t.Errorf("%d: recorded responseStatus %s attempts %v", code, intp(d.ResponseStatus), attemptStatuses(d))
		}
		if d.ResponseBody == nil || *d.ResponseBody != want {
			t.Errorf("%d: recorded responseBody %v, want %q", code, d.ResponseBody, want)
		}
		if v := values(d.ResponseHeaders, "X-Twice"); !slices.Equal(v, []string{"first", "second, with comma"}) {
			t.Errorf("%d: recorded X-Twice = %q", code, v)
		}
	}

	resp := p.send(t, "POST", "/headers", [][2]string{
		{"Connection", "X-Hop-Named, Keep-Alive"},
		{"X-Hop-Named", "must not pass"},
		{"Keep-Alive", "timeout=5, max=100"},
		{"TE", "trailers"},
		{"Upgrade", "example/1"},
		{"Proxy-Connection", "keep-alive"},
		{"X-Repeat", "one"},
		{"X-Normal", "n"},
		{"X-Repeat", "two"},
		{"Authorization", "Bearer local-secret"},
		{"X-Repeat", "three"},
	}, []byte("h=1"))
	if resp.Status != 200 {
		t.Fatalf("/headers: sender got %d %q", resp.Status, resp.Body)
	}
	seen := got.last(t)
	for _, name := range []string{"Connection", "X-Hop-Named", "Keep-Alive", "Te", "Upgrade", "Proxy-Connection"} {
		if v, ok := seen.Header[name]; ok {
			t.Errorf("hop-by-hop %s reached the local handler: %q", name, v)
		}
	}
	if v := seen.Header.Values("X-Repeat"); !slices.Equal(v, []string{"one", "two", "three"}) {
		t.Errorf("X-Repeat at the local handler = %q, want [one two three]", v)
	}
	if seen.Header.Get("X-Normal") != "n" || seen.Header.Get("Authorization") != "Bearer local-secret" {
		t.Errorf("end-to-end headers changed: %v", seen.Header)
	}
	// The history keeps the request as it arrived, hop-by-hop fields included.
	d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/headers")
	if v := values(d.Headers, "X-Hop-Named"); len(v) != 1 {
		t.Errorf("recorded X-Hop-Named = %q, want it kept in history", v)
	}
}

// TestProxyPassesRedirectsUnchanged: a local 3xx reaches the sender as
// the local handler wrote it, Location and body included, whether or not
// its Location parses as a URL; the agent follows none.
func TestProxyPassesRedirectsUnchanged(t *testing.T) {
	t.Parallel()
	var got requestLog
	p := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.add(r, nil)
		code, location, _ := strings.Cut(strings.TrimPrefix(r.URL.RawQuery, "to="), ":")
		status, _ := strconv.Atoi(code)
		w.Header()["Location"] = []string{location}
		w.Header().Set("X-Local", "redirect")
		w.WriteHeader(status)
		fmt.Fprint(w, "moved to "+location)
	}), true)

	for _, tc := range []struct {
		status   int
		location string
	}{
		{302, "/elsewhere"},
		{302, "http://[::1"},
		{301, "/a%zz"},
		{307, "http://127.0.0.1:1/gone"},
	} {
		target := "/r?to=" + strconv.Itoa(tc.status) + ":" + tc.location
		before := len(got.all())
		resp := p.send(t, "POST", target, nil, []byte("x"))
		if resp.Status != tc.status || string(resp.Body) != "moved to "+tc.location {
			t.Errorf("%s: sender got %d %q, want %d %q", tc.location, resp.Status, resp.Body, tc.status, "moved to "+tc.location)
		}
		if v := resp.Header.Values("Location"); !slices.Equal(v, []string{tc.location}) {
			t.Errorf("%s: sender got Location %q", tc.location, v)
		}
		if v := resp.Header.Get("X-Local"); v != "redirect" {
			t.Errorf("%s: sender got X-Local %q", tc.location, v)
		}
		if n := len(got.all()) - before; n != 1 {
			t.Errorf("%s: the local handler got %d requests, want 1 (no redirect followed)", tc.location, n)
		}
		d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, target)
		if d.ResponseStatus == nil || *d.ResponseStatus != tc.status {
			t.Errorf("%s: recorded responseStatus %s, want %d", tc.location, intp(d.ResponseStatus), tc.status)
		}
		if v := values(d.ResponseHeaders, "Location"); !slices.Equal(v, []string{tc.location}) {
			t.Errorf("%s: recorded Location %q", tc.location, v)
		}
	}
}

// TestProxyKeepsRawTargets: the local handler sees the request target
// byte for byte; /x and /x/ are different routes.
func TestProxyKeepsRawTargets(t *testing.T) {
	t.Parallel()
	var got requestLog
	p := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.add(r, nil)
		switch r.RequestURI {
		case "/x":
			fmt.Fprint(w, "route x")
		case "/x/":
			fmt.Fprint(w, "route x-slash")
		default:
			fmt.Fprint(w, "uri "+r.RequestURI)
		}
	}), false)

	if resp := p.send(t, "GET", "/x", nil, nil); string(resp.Body) != "route x" {
		t.Errorf("/x answered %d %q, want route x", resp.Status, resp.Body)
	}
	if resp := p.send(t, "GET", "/x/", nil, nil); string(resp.Body) != "route x-slash" {
		t.Errorf("/x/ answered %d %q, want route x-slash", resp.Status, resp.Body)
	}
	targets := []string{
		"//a//b",
		"/a%2Fb?x=1&x=2",
		"/%7Euser/q?a=b+c&d=%20",
		"/caf%C3%A9/%E2%82%AC?q=%e2%82%ac",
		"/a/./b/../c",
		"//",
		"/empty?",
		"/semi;v=1/p?x=&y",
	}
	for _, target := range targets {
		for _, method := range []string{"GET", "POST"} {
			resp := p.send(t, method, target, nil, []byte("b"))
			if resp.Status != 200 || string(resp.Body) != "uri "+target {
				t.Errorf("%s %s: sender got %d %q, want 200 %q", method, target, resp.Status, resp.Body, "uri "+target)
			}
			if seen := got.last(t); seen.RequestURI != target || seen.Method != method {
				t.Errorf("%s %s: local handler saw %s %q", method, target, seen.Method, seen.RequestURI)
			}
		}
		if d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, target); d.Path != target {
			t.Errorf("recorded path %q, want %q", d.Path, target)
		}
	}
}

// TestProxyFailuresAreAnsweredAndRecorded: no agent → 503, nothing
// listening → 502 naming the target, too slow → 504; each recorded with
// the status the sender got and its attempt.
func TestProxyFailuresAreAnsweredAndRecorded(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--forward-timeout", "1s")
	acct := signUpTenant(t, r, "owner")

	release := make(chan struct{})
	slow := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-release:
		case <-req.Context().Done():
		}
		fmt.Fprint(w, "late")
	}))
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	slowEP := proxyEndpoint(t, r, acct.Token, slow, false)
	closed := fmt.Sprintf("127.0.0.1:%d", harness.ClosedPort(t))
	closedEP := proxyEndpoint(t, r, acct.Token, closed, false)

	check := func(ep endpointInfo, path string, status int, bodyPrefix string, why ...string) {
		t.Helper()
		resp := send(t, r, ep.ID, "POST", path, nil, []byte(`{"a":1}`))
		if resp.Status != status || !strings.HasPrefix(string(resp.Body), bodyPrefix) {
			t.Errorf("%s: sender got %d %q, want %d starting %q", path, resp.Status, resp.Body, status, bodyPrefix)
		}
		d := deliveryAt(t, r, acct.Token, ep.ID, path)
		if d.ResponseStatus == nil || *d.ResponseStatus != status {
			t.Errorf("%s: recorded responseStatus %s, want %d", path, intp(d.ResponseStatus), status)
		}
		if !slices.Equal(attemptStatuses(d), []int{status}) {
			t.Errorf("%s: recorded attempts %v, want [%d]", path, attemptStatuses(d), status)
		}
		explained(t, r, acct.Token, d.ID, status, why, nil)
	}

	// No agent yet.
	check(slowEP, "/no-agent", 503, "No agent for client",
		"Answered 503 by the relay", "no agent was connected to the Endpoint, and no agent had ever connected to it.")

	// Agent connected, nothing listening at its target.
	startAgentFor(t, r, acct.Token, closedEP.ID, closed)
	check(closedEP, "/refused", 502, "Bad Gateway",
		"Answered 502 by the relay", "the agent on node ", "got no answer from your local process (attempt 1): nothing listening on "+closed)
	if resp := send(t, r, closedEP.ID, "GET", "/refused-again", nil, nil); !strings.Contains(string(resp.Body), closed) {
		t.Errorf("502 text %q does not name the target %s", resp.Body, closed)
	}
	d := deliveryAt(t, r, acct.Token, closedEP.ID, "/refused")
	if len(d.Attempts) != 1 || d.Attempts[0].Error == nil || !strings.Contains(*d.Attempts[0].Error, closed) {
		t.Errorf("502 attempt error should name %s: %+v", closed, d.Attempts)
	}

	// Agent connected, local handler slower than --forward-timeout.
	startAgentFor(t, r, acct.Token, slowEP.ID, slow)
	check(slowEP, "/slow", 504, "Gateway Timeout",
		"Answered 504 by the relay", "the local target did not answer within 1s (--forward-timeout) of the forward requested at ",
		"(attempt 1 via the agent on node ")
}

// TestProxyResponseCapture: with capture on the local body is stored and
// shown; with capture off responseBody is null.
func TestProxyResponseCapture(t *testing.T) {
	t.Parallel()
	p := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, "local answer for "+r.RequestURI)
	}), false)

	if resp := p.send(t, "POST", "/off", nil, []byte("x")); resp.Status != 202 || string(resp.Body) != "local answer for /off" {
		t.Fatalf("capture off: sender got %d %q", resp.Status, resp.Body)
	}
	if d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/off"); d.ResponseBody != nil || d.ResponseStatus == nil || *d.ResponseStatus != 202 {
		t.Errorf("capture off: responseBody %s status %s, want null and 202", strp(d.ResponseBody), intp(d.ResponseStatus))
	}

	var out struct{ UpdateEndpoint endpointInfo }
	p.r.MustGraphQL(t, p.acct.Token, `mutation($id: ID!){ updateEndpoint(id: $id, input: {responseCapture: true}){ `+endpointFields+` } }`,
		map[string]any{"id": p.ep.ID}, &out)
	if !out.UpdateEndpoint.ResponseCapture {
		t.Fatalf("updateEndpoint did not turn capture on: %+v", out.UpdateEndpoint)
	}
	if resp := p.send(t, "POST", "/on", nil, []byte("x")); resp.Status != 202 || string(resp.Body) != "local answer for /on" {
		t.Fatalf("capture on: sender got %d %q", resp.Status, resp.Body)
	}
	d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/on")
	if d.ResponseBody == nil || *d.ResponseBody != "local answer for /on" {
		t.Errorf("capture on: responseBody %s, want %q", strp(d.ResponseBody), "local answer for /on")
	}
	// The earlier row stays as it was recorded.
	if d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/off"); d.ResponseBody != nil {
		t.Errorf("capture off row gained a responseBody: %s", strp(d.ResponseBody))
	}
}

// TestProxyLargeBodies: a body past the capture cap is forwarded whole and
// stored incomplete; a body past --max-body is answered 413 and recorded.
func TestProxyLargeBodies(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	var got requestLog
	p := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		got.add(r, body)
		sum := sha256.Sum256(body)
		fmt.Fprintf(w, "%d %x", len(body), sum)
	}), false, "--max-body", "1MiB")

	for _, n := range []int{300 << 10, 1 << 20} {
		body := randomBytes(n)
		path := fmt.Sprintf("/big/%d", n)
		resp := p.send(t, "POST", path, nil, body)
		sum := sha256.Sum256(body)
		if want := fmt.Sprintf("%d %x", n, sum); resp.Status != 200 || string(resp.Body) != want {
			t.Errorf("%d bytes: sender got %d %q, want 200 %q", n, resp.Status, resp.Body, want)
		}
		if seen := got.last(t); !bytes.Equal(seen.Body, body) {
			t.Errorf("%d bytes: local handler got %d bytes, not the whole body", n, len(seen.Body))
		}
		d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, path)
		stored, _ := base64.StdEncoding.DecodeString(d.BodyBase64)
		if d.Complete || d.BodySize != n || !bytes.Equal(stored, body[:256<<10]) {
			t.Errorf("%d bytes: recorded complete=%v bodySize=%d stored=%d bytes, want incomplete, %d, the first 256 KiB",
				n, d.Complete, d.BodySize, len(stored), n)
		}
		if d.ResponseStatus == nil || *d.ResponseStatus != 200 {
			t.Errorf("%d bytes: recorded responseStatus %s", n, intp(d.ResponseStatus))
		}
	}

	before := calls.Load()
	resp := p.send(t, "POST", "/too-big", [][2]string{{"Content-Type", "application/octet-stream"}}, randomBytes(1<<20+1))
	if resp.Status != 413 || !strings.Contains(string(resp.Body), "larger than 1048576 bytes") {
		t.Errorf("over --max-body: sender got %d %q, want 413 naming the limit", resp.Status, resp.Body)
	}
	if calls.Load() != before {
		t.Errorf("a body over --max-body reached the local handler")
	}
	d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/too-big")
	if d.ResponseStatus == nil || *d.ResponseStatus != 413 || d.Complete {
		t.Errorf("over --max-body: recorded responseStatus %s complete=%v, want 413 and incomplete", intp(d.ResponseStatus), d.Complete)
	}
	explained(t, p.r, p.acct.Token, d.ID, 413, []string{"Answered 413 by the relay", "larger than the relay's --max-body of 1048576 bytes",
		"it was not forwarded"}, []string{`recorded reason: "request body larger than 1048576 bytes"`})
	ok := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, fmt.Sprintf("/big/%d", 1<<20))
	explained(t, p.r, p.acct.Token, ok.ID, 200, []string{"Answered 200 by your local process at ", "(attempt 1 via the agent on node "},
		[]string{"Your local process answered 200", "connected on node ", ", forwarding to " + p.target + " (it served attempt 1)."})
}
