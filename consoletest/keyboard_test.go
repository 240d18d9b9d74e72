package consoletest

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp/kb"
)

// Rows are reachable and operable from the keyboard: Tab into the list,
// ArrowDown/ArrowUp move between rows, Enter opens the detail, Escape closes
// it and returns focus to the row.
func TestKeyboardNavigation(t *testing.T) {
	id := newInspector(t)
	for _, path := range []string{"/first", "/second", "/third"} {
		send(t, id, http.MethodPost, path, http.Header{"Content-Type": {"text/plain"}}, []byte("body of "+path))
	}

	p := newPage(t, 1280, 800)
	p.open("/i/" + id)
	p.waitFor("three rows", `document.querySelectorAll('tr.row').length === 3`)

	// From the last filter, Tab reaches the list: one row is in the tab order.
	p.do(chromedpFocus(`input[name=body]`))
	p.key(kb.Tab)
	focusedPath := `document.activeElement.closest('tr.row')?.querySelector('.path-wrap code').textContent`
	if got := eval[string](p, focusedPath); got != "/third" {
		t.Fatalf("Tab from the filters focused %q, want the newest row /third", got)
	}
	p.key(kb.ArrowDown)
	p.key(kb.ArrowDown)
	if got := eval[string](p, focusedPath); got != "/first" {
		t.Fatalf("after ArrowDown twice focus is on %q, want /first", got)
	}
	p.key(kb.ArrowUp)
	if got := eval[string](p, focusedPath); got != "/second" {
		t.Fatalf("after ArrowUp focus is on %q, want /second", got)
	}
	if n := eval[int](p, `document.querySelectorAll('tr.row[tabindex="0"]').length`); n != 1 {
		t.Errorf("%d rows in the tab order, want exactly 1 (roving tabindex)", n)
	}

	p.key(kb.Enter)
	p.waitFor("the detail of /second", `document.querySelector('.detail .raw-path')?.textContent === '/second'`)
	if got := p.text(`[data-testid=body-text]`); got != "body of /second" {
		t.Errorf("detail body = %q", got)
	}
	if !eval[bool](p, `document.querySelector('tr.row.is-selected')?.getAttribute('aria-current') === 'true'`) {
		t.Error("the open row is not marked aria-current")
	}

	p.key(kb.Escape)
	p.waitFor("the detail closed", `!document.querySelector('.detail [data-delivery-id]')`)
	if got := eval[string](p, focusedPath); got != "/second" {
		t.Errorf("after Escape focus is on %q, want back on /second", got)
	}
	// A visible focus indicator: the focused row has an outline.
	if style := eval[string](p, `getComputedStyle(document.activeElement).outlineStyle`); style == "none" {
		t.Error("the focused row has no visible outline")
	}
}
