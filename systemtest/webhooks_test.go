package systemtest

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// Secrets the local Node process verifies signatures with.
const (
	twilioToken  = "twilio-auth-token-for-tests"
	stripeSecret = "whsec_relay_systemtest"
	githubSecret = "github-webhook-secret-for-tests"
)

var npmInstall sync.Once

// signatureVerifier starts systemtest/testdata/webhooks/server.mjs, a
// local process that checks Twilio, Stripe and GitHub signatures with the
// providers' own npm packages, and returns its host:port. The packages
// are installed with `npm ci` from the pinned lock file when they are
// not yet (.ci/run installs them first).
func signatureVerifier(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: install Node.js and npm to verify provider signatures (.ci/run does)")
	}
	dir := filepath.Join(harness.ModuleRoot(), "systemtest", "testdata", "webhooks")
	npmInstall.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "twilio")); err == nil {
			return
		}
		out, code := harness.RunWith(t, harness.Command{Bin: "npm", Dir: dir}, "ci", "--no-audit", "--no-fund")
		if code != 0 {
			t.Fatalf("npm ci in %s exited %d:\n%s", dir, code, out)
		}
	})
	p := harness.StartWith(t, harness.Command{Bin: "node", Dir: dir, Env: []string{
		"TWILIO_AUTH_TOKEN=" + twilioToken, "STRIPE_WEBHOOK_SECRET=" + stripeSecret, "GITHUB_WEBHOOK_SECRET=" + githubSecret,
	}}, "server.mjs")
	listening := regexp.MustCompile(`listening (\d+)`)
	var port string
	harness.Eventually(t, 20*time.Second, "the Node verifier to listen", func() bool {
		if m := listening.FindStringSubmatch(p.Output()); m != nil {
			port = m[1]
			return true
		}
		if p.Exited() {
			t.Fatalf("node server.mjs exited:\n%s", p.Output())
		}
		return false
	})
	return "127.0.0.1:" + port
}

// hmacSHA256 is the hex HMAC-SHA256 of data under key (Stripe's and
// GitHub's schemes).
func hmacSHA256(key, data string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(data))
	return hex.EncodeToString(m.Sum(nil))
}

// twilioSignature is Twilio's documented scheme: base64 HMAC-SHA1 of the
// full URL followed by each POST parameter's name and value, sorted.
func twilioSignature(fullURL string, params url.Values) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	data := fullURL
	for _, k := range keys {
		data += k + params.Get(k)
	}
	m := hmac.New(sha1.New, []byte(twilioToken))
	m.Write([]byte(data))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// checkSignedWebhooks sends Twilio, Stripe and GitHub webhooks, signed as
// the providers sign them, to base (an Endpoint's public https URL) and
// checks that the local verifier accepted each: the body arrived byte for
// byte, and the URL it rebuilt from X-Forwarded-Proto and
// X-Forwarded-Host is the one the sender called.
func checkSignedWebhooks(t *testing.T, c *http.Client, base string) {
	t.Helper()
	send := func(name, path, body string, headers map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(base, "/")+path, strings.NewReader(body))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	params := url.Values{"AccountSid": {"AC0001"}, "Body": {"héllo & bye"}, "From": {"+15550001111"}, "To": {"+15550002222"}}
	twilioURL := strings.TrimSuffix(base, "/") + "/twilio?attempt=1"
	status, text := send("twilio", "/twilio?attempt=1", params.Encode(), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": twilioSignature(twilioURL, params),
	})
	if status != http.StatusOK || !strings.Contains(text, "twilio ok "+twilioURL) {
		t.Errorf("twilio: %d %q", status, text)
	}
	// The verifier does refuse: a signature over another URL fails.
	status, text = send("twilio", "/twilio?attempt=1", params.Encode(), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": twilioSignature(strings.Replace(twilioURL, "https:", "http:", 1), params),
	})
	if status != http.StatusForbidden {
		t.Errorf("twilio signed for the http URL: %d %q, want 403", status, text)
	}

	event := `{"id":"evt_relay_1","object":"event","type":"charge.succeeded","data":{"object":{"amount":1999,"currency":"eur"}}}`
	ts := fmt.Sprint(time.Now().Unix())
	status, text = send("stripe", "/stripe", event, map[string]string{
		"Content-Type": "application/json; charset=utf-8", "Stripe-Signature": "t=" + ts + ",v1=" + hmacSHA256(stripeSecret, ts+"."+event),
	})
	if status != http.StatusOK || !strings.Contains(text, "stripe ok evt_relay_1") {
		t.Errorf("stripe: %d %q", status, text)
	}

	push := "{\n  \"ref\": \"refs/heads/main\",\n  \"commits\": [ { \"message\": \"ünïcode\\n\" } ]\n}\n"
	status, text = send("github", "/github", push, map[string]string{
		"Content-Type": "application/json", "X-GitHub-Event": "push",
		"X-Hub-Signature-256": "sha256=" + hmacSHA256(githubSecret, push),
	})
	if status != http.StatusOK || !strings.Contains(text, "github ok") {
		t.Errorf("github: %d %q", status, text)
	}
}

// TestSignedWebhooksOverTLS: a local Node process verifies Twilio's
// URL signature (the URL rebuilt from the forwarded headers), Stripe's
// and GitHub's body signatures with the providers' own libraries, for
// requests sent over h2 to the relay's https address.
func TestSignedWebhooksOverTLS(t *testing.T) {
	t.Parallel()
	verifier := signatureVerifier(t)
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "*.localhost", "localhost")
	r := harness.StartTLS(t, "", ca, cert, key)
	tn := signUpTenant(t, r, "signed")
	ep := proxyEndpoint(t, r, tn.Token, verifier, true)
	startTLSAgent(t, r, ca, tn.Token, ep.ID, verifier)
	checkSignedWebhooks(t, r.TLSClient(true), ep.URL)
}
