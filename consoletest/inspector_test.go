package consoletest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// A guest creates an inspector from the home page, requests show up live,
// and the detail pane shows headers (repeats included), a pretty-printed JSON
// body, and the truncation note of an oversized body.
func TestInspectorLiveHistory(t *testing.T) {
	p := newPage(t, 1280, 800)
	p.open("/")
	p.assertLabelled()
	p.click(`[data-testid=new-inspector]`)
	p.waitFor("the inspector page", `/^\/i\/[^/]+$/.test(location.pathname)`)
	id := strings.TrimPrefix(eval[string](p, `location.pathname`), "/i/")
	p.waitLive()

	wantURL := fmt.Sprintf("http://%s.localhost:%d/", id, srv.Port)
	if got := p.text(`[data-testid=public-url]`); got != wantURL {
		t.Errorf("public URL shown = %q, want %q", got, wantURL)
	}
	if got := p.text(`[data-testid=example-curl]`); !strings.Contains(got, "curl ") || !strings.Contains(got, strings.TrimSuffix(wantURL, "/")) {
		t.Errorf("curl example %q does not target %s", got, wantURL)
	}

	expiresBefore := eval[string](p, `document.querySelector('[data-testid=expires]').getAttribute('datetime')`)

	event := map[string]any{
		"id":   "evt_1NG8Du2eZvKYlo2CUI79vXWy",
		"type": "payment_intent.succeeded",
		"data": map[string]any{"object": map[string]any{"amount": 2000, "currency": "usd", "paid": true}},
	}
	body, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	header := http.Header{
		"Content-Type":     {"application/json"},
		"Stripe-Signature": {"t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"},
		"X-Repeat":         {"first", "second"},
	}
	if status, _ := send(t, id, http.MethodPost, "/webhooks/stripe?attempt=1", header, body); status != http.StatusNoContent {
		t.Fatalf("webhook answered %d, want 204", status)
	}
	send(t, id, http.MethodGet, "/health//check/", nil, nil)
	p.waitFor("two live rows", `document.querySelectorAll('tr.row').length === 2`)
	p.waitFor("the expiry moved forward", fmt.Sprintf(
		`Date.parse(document.querySelector('[data-testid=expires]').getAttribute('datetime')) > Date.parse(%q)`, expiresBefore))
	// Newest first.
	if first := eval[string](p, `document.querySelector('tr.row .path-wrap code').textContent`); first != "/health//check/" {
		t.Errorf("first row = %q, want the newest request /health//check/", first)
	}

	p.screenshotHistory(id)

	p.openRow("/webhooks/stripe?attempt=1")
	headers := eval[[][2]string](p, `[...document.querySelectorAll('.detail table.kv')[0].querySelectorAll('tbody tr')]
		.map(tr => [tr.querySelector('th').textContent, tr.querySelector('td').textContent])`)
	var repeats []string
	for _, h := range headers {
		if strings.EqualFold(h[0], "X-Repeat") {
			repeats = append(repeats, h[1])
		}
	}
	if strings.Join(repeats, ",") != "first,second" {
		t.Errorf("X-Repeat rows = %q, want first and second as separate rows; all headers %q", repeats, headers)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, body, "", "  "); err != nil {
		t.Fatal(err)
	}
	if got := p.text(`[data-testid=body-json]`); got != pretty.String() {
		t.Errorf("JSON body shown as\n%s\nwant pretty-printed\n%s", got, pretty.String())
	}
	// The sender's address: the test's own connection.
	if sender := p.text(`[data-testid=remote-address]`); !strings.HasPrefix(sender, "127.0.0.1:") {
		t.Errorf("sender shown as %q, want the test's 127.0.0.1:port", sender)
	}
	if reason := p.text(`[data-testid=retry-reason]`); reason != "Retry needs Log and Proxy or Queue mode" {
		t.Errorf("retry reason on an inspector = %q", reason)
	}
	if why := p.text(`[data-testid=why-summary]`); !strings.HasPrefix(why, "Answered 204 by the relay at ") ||
		!strings.HasSuffix(why, "a guest inspector records every request and answers 204.") {
		t.Errorf("why line on an inspector row = %q", why)
	}
	p.screenshot("detail.png")

	// Should the server refuse anyway, the console shows its code and message.
	eval[bool](p, `(() => { document.querySelector('[data-testid=retry]').disabled = false; return true; })()`)
	p.click(`[data-testid=retry]`)
	p.waitFor("the refusal", `document.querySelector('[data-testid=retry-error]')`)
	if got := p.text(`[data-testid=retry-error]`); !regexp.MustCompile(`^[A-Z_]+: .+`).MatchString(got) {
		t.Errorf("retry refusal shown as %q, want CODE: message", got)
	}

	big := bytes.Repeat([]byte("a"), 300*1024)
	if status, _ := send(t, id, http.MethodPut, "/upload/big", http.Header{"Content-Type": {"text/plain"}}, big); status != http.StatusNoContent {
		t.Fatalf("large body answered %d, want 204", status)
	}
	p.waitFor("the incomplete marker", rowSelector("/upload/big")+`?.querySelector('.incomplete')`)
	p.openRow("/upload/big")
	note := p.text(`.detail .notice-warn`)
	if !regexp.MustCompile(`Incomplete: stored 256 KiB of 300 KiB \(262144 of 307200 bytes\)`).MatchString(note) {
		t.Errorf("incomplete note = %q", note)
	}
	// The replay is labelled as partial, in the button and the command.
	if label := p.text(`[data-testid=copy-curl]`); label != "Copy as curl (partial body)" {
		t.Errorf("copy button on an incomplete row = %q", label)
	}
	if copied := p.copyCurl(id, "/upload/big"); !strings.HasPrefix(copied, "# PARTIAL: only 262144 of the 307200 body bytes are stored") {
		t.Errorf("copied command starts %.120q, want it labelled partial", copied)
	}
	if reason := p.text(`[data-testid=retry-reason]`); reason == "" {
		t.Error("Retry is not explained on an incomplete inspector row")
	}
}

// screenshotHistory sends a few more realistic requests so the history
// screenshot shows a varied list, then captures it.
func (p *page) screenshotHistory(id string) {
	p.t.Helper()
	// Outside screenshot runs, keep the row set the test asserts on.
	if !screenshots() {
		return
	}
	send(p.t, id, http.MethodPost, "/github/push", http.Header{"Content-Type": {"application/json"}, "X-GitHub-Event": {"push"}},
		[]byte(`{"ref":"refs/heads/main","commits":[{"id":"9f2c1e","message":"Fix retry backoff"}]}`))
	send(p.t, id, http.MethodDelete, "/v1/customers/cus_42", nil, nil)
	send(p.t, id, http.MethodPatch, "/orders/1001?notify=true", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, []byte("status=shipped&carrier=ups"))
	p.waitFor("five rows", `document.querySelectorAll('tr.row').length === 5`)
	p.screenshot("history.png")
}
