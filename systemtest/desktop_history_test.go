package systemtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestDesktopDetailShowsProviderAndSignature: in the desktop agent's
// window, a delivery's detail pane names its provider (name, event type,
// the provider's delivery id) and marks a redelivery; a retry that relay
// listen --verify forwarded shows its signature verdict on the attempt;
// and the two attempts can be compared there.
func TestDesktopDetailShowsProviderAndSignature(t *testing.T) {
	t.Parallel()
	bin := buildDesktop(t)
	r := harness.Start(t, "")
	acct := signUpTenant(t, r, "deskhist")
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("X-Local", "yes")
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(local.Close)
	target := strings.TrimPrefix(local.URL, "http://")
	_, port, _ := strings.Cut(target, ":")
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "github", "mode": "PROXY", "target": target, "responseCapture": true})

	// Signed in from what relay login stored.
	home := t.TempDir()
	if out, exit := harness.RunWith(t, harness.Command{
		Env:   []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")},
		Stdin: strings.NewReader(acct.Token + "\n"),
	}, "login", "--server", r.BareURL()); exit != 0 {
		t.Fatalf("relay login: exit %d\n%s", exit, out)
	}
	app := startDesktop(t, bin, startXvfb(t), home, startSessionBus(t))
	app.waitFor(t, `!!document.querySelector('[data-endpoint-id="`+ep.ID+`"] [data-testid=switch]')`)
	toggle := func() {
		t.Helper()
		app.run(t, `(() => { document.querySelector('[data-endpoint-id="`+ep.ID+`"] [data-testid=switch]').click(); return true; })()`)
	}
	toggle()
	waitAgent(t, r, acct.Token, ep.ID, true)

	// GitHub sends one push twice (a redelivery), signed.
	body := []byte(`{"ref":"refs/heads/main"}`)
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write(body)
	headers := [][2]string{{"X-GitHub-Event", "push"}, {"X-GitHub-Delivery", "d-42"}, {"X-Hub-Signature-256", "sha256=" + hex.EncodeToString(m.Sum(nil))}}
	for range 2 {
		if resp := send(t, r, ep.ID, "POST", "/gh", headers, body); resp.Status != http.StatusAccepted {
			t.Fatalf("sender got %d, want the local 202", resp.Status)
		}
	}
	app.waitFor(t, `document.querySelectorAll('tr.row').length === 2`)

	// The window switched off, relay listen --verify serves the Endpoint:
	// the window's Retry goes through it, and its verdict is recorded.
	toggle()
	waitAgent(t, r, acct.Token, ep.ID, false)
	lh := t.TempDir()
	harness.StartWith(t, harness.Command{Dir: lh, Env: []string{
		"HOME=" + lh, "XDG_CONFIG_HOME=" + filepath.Join(lh, ".config"), "NO_COLOR=1",
		"RELAY_SERVER=", "RELAY_TOKEN=" + acct.Token, "RELAY_VERIFY_SECRET=s3cret",
	}}, "listen", port, ep.ID, "--server", r.BareURL(), "--verify", "github")
	waitAgent(t, r, acct.Token, ep.ID, true)

	app.run(t, `(() => { document.querySelector('tr.row').click(); return true; })()`)
	app.waitFor(t, `!!document.querySelector('.detail [data-testid=provider]')`)
	for testid, want := range map[string]string{
		"provider-name":       "github",
		"provider-event":      "push",
		"provider-delivery":   "d-42",
		"provider-duplicates": "sent 2 times",
	} {
		if got := app.str(t, `document.querySelector('.detail [data-testid=`+testid+`]')?.textContent || ''`); got != want {
			t.Errorf("detail %s = %q, want %q", testid, got, want)
		}
	}
	if n := app.str(t, `String(document.querySelectorAll('.detail [data-testid=attempt-signature]').length)`); n != "0" {
		t.Errorf("%s signature verdicts on an attempt the window forwarded without checking", n)
	}
	app.run(t, `(() => { document.querySelector('[data-testid=retry]').click(); return true; })()`)
	app.waitFor(t, `document.querySelectorAll('[data-testid=attempts] tbody tr').length === 2`)
	app.waitFor(t, `!!document.querySelector('.detail [data-testid=attempts] tbody tr:nth-child(2) [data-testid=attempt-signature]')`)
	if got := strings.TrimSpace(app.str(t, `document.querySelector('.detail [data-testid=attempt-signature]').textContent`)); got != "signature github valid" {
		t.Errorf("the retry's verdict shows as %q, want signature github valid", got)
	}

	// The two attempts compared: the same request, the same answer but
	// for its date.
	app.run(t, `(() => { document.querySelector('.detail [data-testid=compare] summary').click(); return true; })()`)
	app.waitFor(t, `!!document.querySelector('.detail [data-testid=compare-same-request]')`)
	if got := app.str(t, `[...document.querySelectorAll('.detail [data-testid=compare-response] tr')].map((tr) => tr.dataset.where).filter(Boolean).join(',')`); got != "" && got != "header Date" {
		t.Errorf("two answers of the same handler differ in %s, want at most the Date header", strconv.Quote(got))
	}

	// Edit and retry in the window sends the edited copy: the attempt is
	// marked edited, and comparing the recorded request with it shows the
	// edit. (The changed body no longer matches GitHub's signature.)
	app.run(t, `(() => {
		document.querySelector('[data-testid=edit-retry]').click();
		document.querySelector('[data-testid=edit-form] textarea[name=edit-body]').value = '{"ref":"refs/heads/dev"}';
		document.querySelector('[data-testid=send-edited]').click();
		return true; })()`)
	app.waitFor(t, `document.querySelectorAll('.detail [data-testid=attempt-edited]').length === 1`)
	app.waitFor(t, `document.querySelector('.detail [data-testid=attempts] tbody tr:nth-child(3) [data-testid=attempt-signature]')?.textContent.includes('invalid')`)
	app.run(t, `(() => {
		const c = document.querySelector('.detail [data-testid=compare]');
		if (!c.open) c.querySelector('summary').click();
		document.querySelector('.detail [data-testid=compare-edit]').click();
		return true; })()`)
	app.waitFor(t, `!!document.querySelector('.detail [data-testid=compare-request] tr[data-where="body $.ref"]')`)
	if got := app.str(t, `[...document.querySelector('.detail [data-testid=compare-request] tr[data-where="body $.ref"]').cells].slice(1).map((c) => c.textContent).join(' → ')`); got != `"refs/heads/main" → "refs/heads/dev"` {
		t.Errorf("the edit compared shows %s", got)
	}
	app.screenshot(t, "desktop-history")
}
