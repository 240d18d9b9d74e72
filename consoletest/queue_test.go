package consoletest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// The create form makes a QUEUE Endpoint; its page says where its queue
// stands and how it sends; a delivery's attempts say the queue sent them.
func TestQueueEndpointPage(t *testing.T) {
	token := signUp(t, "Queues")
	p := newPage(t, 1280, 800)
	p.open("/#token=" + token)

	p.waitFor("the create form", `document.querySelector('form.create-endpoint')`)
	p.do(chromedpSetValue(`form.create-endpoint input[name=name]`, "Orders"))
	p.do(chromedpSetValue(`form.create-endpoint select[name=mode]`, "QUEUE"))
	p.click(`form.create-endpoint button[type=submit]`)
	p.waitFor("the Endpoint page", `/^\/e\/[^/]+$/.test(location.pathname)`)
	p.waitFor("the queue line", `document.querySelector('[data-testid=queue]')`)
	if got := p.text(`[data-testid=queue]`); !strings.Contains(got, "Queue: 0 queued, 0 in flight, 0 dead.") || !strings.Contains(got, "up to 10 at once") {
		t.Fatalf("queue line = %q", got)
	}
	if got := p.text(`.title-row .badge`); got != "Queue" {
		t.Fatalf("mode badge = %q, want Queue", got)
	}

	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(local.Close)
	id := strings.TrimPrefix(eval[string](p, `location.pathname`), "/e/")
	harness.StartWith(t, harness.Command{Env: []string{"RELAY_TOKEN=" + token}},
		"listen", strings.TrimPrefix(local.URL, "http://"), id, "--server", srv.BareURL())
	p.waitFor("the agent indicator on", `document.querySelector('[data-testid=agent-status] .agent-badge.on')`)
	if status, _ := send(t, id, http.MethodPost, "/orders/1", http.Header{"Content-Type": {"application/json"}}, []byte(`{"order":1}`)); status != http.StatusAccepted {
		t.Fatalf("queued delivery answered %d, want 202", status)
	}
	p.openRow("/orders/1")
	p.waitFor("the queued attempt's 200", `[...document.querySelectorAll('.detail [data-testid=attempt-status]')].map(e => e.textContent).join() === '200'`)
	if got := p.text(`.detail [data-testid=attempt-kind]`); !strings.HasPrefix(got, "From the queue") || strings.Contains(got, "duplicate") {
		t.Errorf("attempt kind = %q, want From the queue", got)
	}
}
