package systemtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestListenVerifiesSignatures: relay listen --verify checks each
// forwarded request's provider signature with a secret that stays on the
// developer's machine, and prints the verdict on the request's line.
func TestListenVerifiesSignatures(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	_, port := recordingTarget(t)
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "gh", "mode": "PROXY", "target": "localhost:" + port})
	c := h.command("")
	c.Dir = t.TempDir()
	c.Env = append(c.Env, "NO_COLOR=1", "RELAY_VERIFY_SECRET=s3cret")
	listen := harness.StartWith(t, c, "listen", port, "gh", "--verify", "github")
	waitOutput(t, listen, regexp.MustCompile(`(?m)^endpoint gh `))
	waitAgent(t, r, acct.Token, ep.ID, true)

	body := []byte(`{"action":"opened"}`)
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write(body)
	good := "sha256=" + hex.EncodeToString(m.Sum(nil))
	send(t, r, ep.ID, "POST", "/signed", [][2]string{{"X-Hub-Signature-256", good}}, body)
	send(t, r, ep.ID, "POST", "/forged", [][2]string{{"X-Hub-Signature-256", "sha256=" + strings.Repeat("0", 64)}}, body)
	send(t, r, ep.ID, "POST", "/unsigned", nil, body)
	signed := waitOutput(t, listen, regexp.MustCompile(`POST /signed → 200 \(\d+ ms\)  delivery (\S+)  signature github valid`))[1]
	waitOutput(t, listen, regexp.MustCompile(`POST /forged → 200 .*signature github invalid \(the signature does not match\)`))
	waitOutput(t, listen, regexp.MustCompile(`POST /unsigned → 200 .*signature github no signature`))
	// The verdict, not the secret, reached the relay: it is recorded with
	// the attempt.
	harness.Eventually(t, 10*time.Second, "the verdict recorded with the attempt", func() bool {
		var got struct {
			Delivery struct{ Attempts []struct{ Signature *string } }
		}
		r.MustGraphQL(t, acct.Token, `query($id: ID!){ delivery(id: $id){ attempts{ signature } } }`, map[string]any{"id": signed}, &got)
		a := got.Delivery.Attempts
		return len(a) == 1 && a[0].Signature != nil && *a[0].Signature == "github valid"
	})
	if out, code := h.run(t, "", "deliveries", "show", signed); code != 0 || !strings.Contains(out, "signature github valid") {
		t.Errorf("deliveries show: exit %d\n%s", code, out)
	}
	exported, _ := harness.RunCLI(t, "events", "export", "--data", r.Data)
	if strings.Contains(r.Output(), "s3cret") || strings.Contains(exported, "s3cret") || !strings.Contains(exported, "/forged") {
		t.Error("the secret reached the relay, or the export is not the log")
	}

	for _, bad := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"listen", port, "gh", "--verify", "nosuch"}, "RELAY_VERIFY_SECRET=x", "want one of"},
		{[]string{"listen", port, "gh", "--verify", "github"}, "", "RELAY_VERIFY_SECRET"},
		{[]string{"listen", port, "gh", "--verify-secret-file", "/nonexistent"}, "", "needs --verify"},
	} {
		c := h.command("")
		c.Env = append(c.Env, "RELAY_VERIFY_SECRET=", bad.env)
		out, code := harness.RunWith(t, c, bad.args...)
		if code != 2 || !strings.Contains(out, bad.want) {
			t.Errorf("%v: exit %d, want 2 naming %q:\n%s", bad.args, code, bad.want, out)
		}
	}
}
