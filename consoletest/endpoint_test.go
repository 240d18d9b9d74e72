package consoletest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// A user signs up in the console, creates a Log and Proxy Endpoint with
// response capture, runs the real agent, sees a 404 from the local handler,
// fixes the handler and retries from the console: the new attempt shows 200.
// Stopping the agent turns the indicator off and disables Retry.
func TestEndpointRetryThroughAgent(t *testing.T) {
	var fixed atomic.Bool
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !fixed.Load() {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"no route"}`)
			return
		}
		fmt.Fprint(w, `{"received":true}`)
	}))
	t.Cleanup(local.Close)
	target := strings.TrimPrefix(local.URL, "http://")

	// Signed in with a token (as `relay open` links): the agent command
	// carries it. (Password sign-up: members_test.go.)
	token := signUp(t, "Ada")
	p := newPage(t, 1280, 800)
	p.open("/#token=" + token)

	// Create a Log and Proxy Endpoint with response capture.
	p.waitFor("the create form", `document.querySelector('form.create-endpoint')`)
	p.assertLabelled()
	p.do(chromedpSetValue(`form.create-endpoint input[name=name]`, "Payments dev"))
	p.do(chromedpSetValue(`form.create-endpoint select[name=mode]`, "PROXY"))
	p.do(chromedpSetValue(`form.create-endpoint input[name=target]`, target))
	if !eval[bool](p, `document.querySelector('form.create-endpoint input[name=responseCapture]').checked`) {
		p.click(`form.create-endpoint input[name=responseCapture]`)
	}
	p.click(`form.create-endpoint button[type=submit]`)
	p.waitFor("the Endpoint page", `/^\/e\/[^/]+$/.test(location.pathname)`)
	id := strings.TrimPrefix(eval[string](p, `location.pathname`), "/e/")
	p.waitLive()
	p.waitFor("no agent yet", `document.querySelector('[data-testid=agent-status] .agent-badge.off')`)

	// Run the agent exactly as the console tells the user to.
	eval[bool](p, `(() => { navigator.clipboard.writeText = async (s) => { window.copied = s; }; return true; })()`)
	p.click(`.code-line:has([data-testid=agent-command]) button`)
	p.waitFor("the copied agent command", `typeof window.copied === 'string'`)
	args := strings.Fields(eval[string](p, `window.copied`))
	// relay listen, as the README teaches; the Endpoint by id, since its
	// name has a space.
	want := []string{"RELAY_TOKEN=" + token, "relay", "listen", target, id, "--server", srv.BareURL()}
	if !slices.Equal(args, want) {
		t.Fatalf("copied agent command %q, want %q", args, want)
	}
	// runCopied runs the copied command itself: the real binary, the token
	// in RELAY_TOKEN as the command sets it.
	runCopied := func() *harness.Process {
		return harness.StartWith(t, harness.Command{Env: []string{"RELAY_TOKEN=" + token}}, args[2:]...)
	}
	if shown := p.text(`[data-testid=agent-command]`); strings.Contains(shown, token) {
		t.Errorf("the agent command shows the token on screen: %q", shown)
	}
	agent := runCopied()
	p.waitFor("the agent indicator on", `document.querySelector('[data-testid=agent-status] .agent-badge.on')`)

	// A second agent on the Endpoint gets copies: the page lists both
	// listeners, the first connected marked primary.
	second := runCopied()
	p.waitFor("two agents shown", `document.querySelector('[data-testid=agent-status] .agent-badge.on[data-count="2"]')`)
	if got := p.text(`[data-testid=agent-status]`); !strings.Contains(got, "2 agents connected") {
		t.Errorf("agent status with two agents = %q", got)
	}
	p.waitFor("two listeners listed", `document.querySelectorAll('[data-testid=listener]').length === 2`)
	if got := eval[string](p, `[...document.querySelectorAll('[data-testid=listener]')].map(e => e.dataset.primary).join()`); got != "true,false" {
		t.Errorf("listeners' primary marks = %q, want the first connected primary", got)
	}
	if n := eval[int](p, `document.querySelectorAll('[data-testid=listener-primary]').length`); n != 1 {
		t.Errorf("%d primary markers, want 1", n)
	}
	second.Kill()
	p.waitFor("one agent again", `document.querySelector('[data-testid=agent-status] .agent-badge.on[data-count="1"]')`)
	p.waitFor("the listener list gone with one listener", `document.querySelectorAll('[data-testid=listener]').length === 0`)
	if got := p.text(`[data-testid=endpoint-filters]`); !strings.Contains(got, "Filters: none") {
		t.Errorf("settings' filters line = %q", got)
	}

	status, body := send(t, id, http.MethodPost, "/hooks/order?id=7", http.Header{"Content-Type": {"application/json"}}, []byte(`{"order":7}`))
	if status != http.StatusNotFound || body != `{"error":"no route"}` {
		t.Fatalf("proxied request answered %d %q, want the local 404 unchanged", status, body)
	}
	p.openRow("/hooks/order?id=7")
	p.waitFor("the first attempt's 404", `[...document.querySelectorAll('[data-testid=attempt-status]')].map(e => e.textContent).join() === '404'`)
	// The real agent's receipt: it handed over what the relay sent.
	p.waitFor("the first attempt's fidelity", `document.querySelector('.detail [data-testid=attempt-fidelity]')?.textContent.trim() === 'identical'`)
	if got := p.text(`.detail pre[data-testid=body-json]`); !strings.Contains(got, `"order": 7`) {
		t.Errorf("request body shown as %q", got)
	}
	// Why the sender got 404, in one line; the facts behind it on expand.
	if got := p.text(`.detail [data-testid=why-summary]`); !strings.HasPrefix(got, "Answered 404 by your local process at ") ||
		!strings.Contains(got, "(attempt 1 via the agent") {
		t.Errorf("why line = %q, want the local 404 of attempt 1", got)
	}
	if eval[bool](p, `document.querySelector('.detail [data-testid=why]').open`) {
		t.Error("the why line opens its facts before it is clicked")
	}
	p.click(`.detail [data-testid=why] summary`)
	p.waitFor("the why facts", `document.querySelector('.detail [data-testid=why]').open`)
	if got := p.text(`.detail [data-testid=why-facts]`); !strings.Contains(got, "Your local process answered 404") ||
		!strings.Contains(got, "Received POST at Endpoint "+id) {
		t.Errorf("why facts = %q", got)
	}

	fixed.Store(true)
	p.waitFor("Retry enabled", `!document.querySelector('[data-testid=retry]').disabled`)
	p.click(`[data-testid=retry]`)
	p.waitFor("the retry result", `document.querySelector('[data-testid=retry-result]')`)
	attempts := eval[[]string](p, `[...document.querySelectorAll('[data-testid=attempt-status]')].map(e => e.textContent)`)
	if strings.Join(attempts, ",") != "404,200" {
		t.Errorf("attempt statuses = %q, want 404 then 200", attempts)
	}
	if got := p.text(`[data-testid=retry-result]`); !strings.Contains(got, "200") {
		t.Errorf("retry result = %q", got)
	}
	if got := p.text(`.detail tr.is-new [data-testid=attempt-status]`); got != "200" {
		t.Errorf("highlighted new attempt status = %q, want 200", got)
	}
	if got := p.text(`.detail [data-testid=why-summary]`); !strings.HasPrefix(got, "The sender was answered 404 by your local process at ") ||
		!strings.Contains(got, "Shown now: 200, from attempt 2, a retry, which the sender never saw") ||
		!strings.Contains(got, "(attempt 2, a retry, via the agent") {
		t.Errorf("why line after the retry = %q, want the sender's 404 and, apart, the retry's 200", got)
	}
	p.waitFor("the row's status 200", rowSelector("/hooks/order?id=7")+`.querySelector('.status').textContent === '200'`)
	if got := p.text(`.detail`); !strings.Contains(got, `"received": true`) {
		t.Errorf("captured response body not shown in the detail pane")
	}

	// Edit and retry: change the body and a header, send the copy; the new
	// attempt is marked edited, and the recorded request is unchanged.
	p.click(`[data-testid=edit-retry]`)
	p.waitFor("the editor", `!document.querySelector('[data-testid=edit-form]').hidden`)
	p.assertLabelled()
	p.do(chromedpSetValue(`[data-testid=edit-form] textarea[name=edit-body]`, `{"order":8}`))
	p.do(chromedpSetValue(`[data-testid=edit-form] textarea[name=edit-headers]`, "Content-Type: application/json\nX-Debug: 1"))
	p.click(`[data-testid=send-edited]`)
	p.waitFor("the edited attempt", `document.querySelectorAll('[data-testid=attempt-edited]').length === 1`)
	if got := eval[string](p, `document.querySelector('[data-testid=attempt-edited]').title`); !strings.Contains(got, "set X-Debug") || !strings.Contains(got, "body") {
		t.Errorf("edited attempt says %q", got)
	}
	if got := p.text(`[data-testid=retry-result]`); !strings.Contains(got, "edited copy") {
		t.Errorf("edited retry result = %q", got)
	}
	if got := p.text(`.detail pre[data-testid=body-json]`); !strings.Contains(got, `"order": 7`) {
		t.Errorf("the recorded body changed after an edited retry: %q", got)
	}

	// Stop the agent: the indicator turns off and Retry explains why.
	agent.Kill()
	p.waitFor("the agent indicator off", `document.querySelector('[data-testid=agent-status] .agent-badge.off')`)
	p.waitFor("Retry disabled", `document.querySelector('[data-testid=retry]').disabled`)
	if reason := p.text(`[data-testid=retry-reason]`); reason != "No agent connected" {
		t.Errorf("retry reason = %q, want %q", reason, "No agent connected")
	}

	// A request while no agent is connected is refused; when an agent is
	// back, the page offers to send it again, and does.
	if status, _ := send(t, id, http.MethodPost, "/hooks/while-away", http.Header{"Content-Type": {"application/json"}}, []byte(`{"order":9}`)); status != http.StatusServiceUnavailable {
		t.Fatalf("with no agent the sender got %d, want 503", status)
	}
	runCopied()
	p.waitFor("the catch-up offer", `document.querySelector('[data-testid=catch-up]')?.textContent.includes('1 request was answered 503')`)
	p.click(`[data-testid=catch-up-run]`)
	p.waitFor("caught up", `document.querySelector('[data-testid=catch-up-progress]')?.textContent === 'Caught up: 1 answered 2xx, 0 not.'`)
	p.waitFor("the row's status 200", rowSelector("/hooks/while-away")+`?.querySelector('.status').textContent === '200'`)
}
