package consoletest

import (
	"net/http"
	"testing"
)

// A recognised provider's event shows on its row, and a redelivery of the
// same provider delivery id is marked on each copy; the detail pane names
// the provider, the event, the provider's delivery id and how many times
// it was sent.
func TestProviderBadges(t *testing.T) {
	id := newInspector(t)
	gh := http.Header{"X-Github-Event": {"push"}, "X-Github-Delivery": {"72d3162e"}}
	send(t, id, http.MethodPost, "/gh", gh, []byte(`{}`))
	send(t, id, http.MethodPost, "/gh", gh, []byte(`{}`))
	send(t, id, http.MethodPost, "/plain", nil, []byte(`{}`))

	p := newPage(t, 1280, 800)
	p.open("/i/" + id)
	p.waitFor("three rows", `document.querySelectorAll('tr.row').length === 3`)
	p.waitFor("both copies marked", `document.querySelectorAll('tr.row .badge.duplicate').length === 2`)
	if got := eval[string](p, `document.querySelector('tr.row .badge.duplicate').textContent`); got != "github push ×2" {
		t.Errorf("badge %q, want %q", got, "github push ×2")
	}
	if n := eval[int](p, `document.querySelectorAll('tr.row .badge.provider').length`); n != 2 {
		t.Errorf("%d provider badges, want 2 (the plain request has none)", n)
	}

	p.click(`tr.row .badge.duplicate`)
	p.waitFor("the detail's provider", `document.querySelector('.detail [data-testid=provider]')`)
	for css, want := range map[string]string{
		"provider-name":       "github",
		"provider-event":      "push",
		"provider-delivery":   "72d3162e",
		"provider-duplicates": "sent 2 times",
	} {
		if got := p.text(`.detail [data-testid=` + css + `]`); got != want {
			t.Errorf("detail %s = %q, want %q", css, got, want)
		}
	}
	p.openRow("/plain")
	if eval[bool](p, `!!document.querySelector('.detail [data-testid=provider]')`) {
		t.Error("a request of no recognised provider shows a provider")
	}
}
