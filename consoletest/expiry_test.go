package consoletest

import (
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// An open inspector page turns from "Recording" to "Expired" once the
// inspector has been idle past its TTL, with no request and no reload.
func TestInspectorPageShowsExpiry(t *testing.T) {
	r := harness.Start(t, "", "--inspector-ttl", "3s")
	p := newPage(t, 1280, 800)
	id := newInspectorOn(t, r)
	p.openOn(r, "/i/"+id)
	p.waitFor("the inspector's state", `document.querySelector('[data-testid=inspector-state]')`)
	if got := p.text(`[data-testid=inspector-state]`); got != "Recording" {
		t.Fatalf("a fresh inspector shows %q, want Recording (or the page took longer than the TTL to load)", got)
	}
	eval[bool](p, `(() => { window.sameDocument = true; return true; })()`)
	p.waitFor("the Expired badge", `document.querySelector('[data-testid=inspector-state]').textContent === 'Expired'`)
	if !eval[bool](p, `window.sameDocument === true`) {
		t.Error("the page reloaded")
	}
	if got := p.text(`.page-head`); !strings.Contains(got, "expired") {
		t.Errorf("page head %q does not say the inspector expired", got)
	}
}

// An unknown inspector's page says so, and shows no "Connecting…" for a
// subscription it never starts.
func TestUnknownInspectorPageSaysSo(t *testing.T) {
	p := newPage(t, 1280, 800)
	p.open("/i/nosuchinspector")
	p.waitFor("the not-found heading", `document.querySelector('[data-testid=not-found]')`)
	if got := p.text(`[data-testid=not-found]`); got != "No such inspector" {
		t.Errorf("heading = %q, want No such inspector", got)
	}
	if shown := eval[string](p, `document.querySelector('main').innerText`); strings.Contains(shown, "Connecting") {
		t.Errorf("the page shows Connecting for an unknown inspector:\n%s", shown)
	}
}
