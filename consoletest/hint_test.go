package consoletest

import (
	"net/http"
	"strings"
	"testing"
)

// A Slack URL verification an inspector does not answer as a handshake is
// marked on its row, and the detail pane says what it looks like and the
// command that enables the handshake; a plain request has neither.
func TestUnansweredHandshakeHint(t *testing.T) {
	id := newInspector(t)
	send(t, id, http.MethodPost, "/slack", http.Header{"Content-Type": {"application/json"}},
		[]byte(`{"token":"t","challenge":"c123","type":"url_verification"}`))
	send(t, id, http.MethodPost, "/plain", nil, []byte(`{}`))

	p := newPage(t, 1280, 800)
	p.open("/i/" + id)
	p.waitFor("two rows", `document.querySelectorAll('tr.row').length === 2`)
	p.waitFor("the hint's badge", `document.querySelectorAll('tr.row [data-testid=row-hint]').length === 1`)
	if got := eval[string](p, `document.querySelector('tr.row [data-testid=row-hint]').closest('tr').querySelector('code').textContent`); got != "/slack" {
		t.Errorf("the hint's badge is on the row of %q, want /slack", got)
	}
	p.openRow("/slack")
	p.waitFor("the detail's hint", `!!document.querySelector('.detail [data-testid=hint]')`)
	got := p.text(`.detail [data-testid=hint]`)
	if !strings.HasPrefix(got, "This looks like a Slack URL verification, which this address does not answer; enable the Slack handshake to answer it") ||
		!strings.Contains(got, "relay inspector answer "+id+" --handshake slack") {
		t.Errorf("detail hint = %q", got)
	}
	p.openRow("/plain")
	p.waitFor("the plain request's detail", `document.querySelector('.detail code.raw-path')?.textContent === '/plain'`)
	if eval[bool](p, `!!document.querySelector('.detail [data-testid=hint]')`) {
		t.Error("a plain request shows a hint")
	}
}
