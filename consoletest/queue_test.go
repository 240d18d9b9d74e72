package consoletest

import (
	"strings"
	"testing"
)

// The create form makes a QUEUE Endpoint; its page says where its queue
// stands and how it sends.
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
}
