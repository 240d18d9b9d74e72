package consoletest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/chromedp"

	"github.com/relayhq/relay/internal/pageerrors"
	"github.com/relayhq/relay/systemtest/harness"
)

// page is one browser tab in its own browser context (fresh localStorage),
// that records every console error and uncaught exception of the page.
type page struct {
	t   *testing.T
	ctx context.Context

	mu        sync.Mutex
	problems  []string
	tolerated []*regexp.Regexp // problems a test expects, such as a refused connection
}

// newPage opens a tab with a width×height viewport. The test fails at its
// end when the page logged any console error or threw.
func newPage(t *testing.T, width, height int64) *page {
	t.Helper()
	if browserCtx == nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the console tests need a browser in CI: %s", noBrowser)
		}
		t.Skipf("skipping browser test: %s", noBrowser)
	}
	p := &page{t: t}
	tabCtx, cancelTab := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext(), chromedp.WithListener(p.listen))
	ctx, cancelTimeout := context.WithTimeout(tabCtx, 90*time.Second)
	p.ctx = ctx
	t.Cleanup(func() {
		// Listeners run in message order, so after this round trip every
		// event the page sent before it has been seen.
		_ = chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void]("0"))
		p.mu.Lock()
		for _, msg := range p.problems {
			if !slices.ContainsFunc(p.tolerated, func(re *regexp.Regexp) bool { return re.MatchString(msg) }) {
				t.Errorf("browser console: %s", msg)
			}
		}
		p.mu.Unlock()
		cancelTimeout()
		cancelTab()
	})
	p.do(chromedp.EmulateViewport(width, height))
	return p
}

func (p *page) listen(ev any) {
	msg, ok := pageerrors.Of(ev)
	if !ok {
		return
	}
	p.mu.Lock()
	p.problems = append(p.problems, msg)
	p.mu.Unlock()
}

// tolerate lets console errors that match pattern pass: a test that stops
// the relay expects the page's failed reconnects.
func (p *page) tolerate(pattern string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tolerated = append(p.tolerated, regexp.MustCompile(pattern))
}

// do runs actions and fails the test on error.
func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// open navigates to a console path on the bare domain.
func (p *page) open(path string) {
	p.t.Helper()
	p.openOn(srv, path)
}

// openOn navigates to a console path of another relay than the shared one.
func (p *page) openOn(r *harness.Relay, path string) {
	p.t.Helper()
	p.do(chromedp.Navigate(r.BareURL() + path))
}

// eval evaluates a JavaScript expression and decodes its value.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it is truthy; what names the
// condition in the failure message.
func (p *page) waitFor(what, expr string) {
	p.t.Helper()
	if err := p.poll(30*time.Second, expr); err != nil {
		p.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

// poll polls a JavaScript predicate every 50 ms until it is truthy, for
// up to d.
func (p *page) poll(d time.Duration, expr string) error {
	// !! keeps the result a boolean: DOM nodes do not serialize.
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool]("!!("+expr+")",
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(d)))
	return err
}

// click clicks the first element matching a CSS selector, with the mouse.
// The console re-renders as events arrive, so the node the query found can
// be replaced before the mouse reaches it; the browser then answers that it
// cannot find the node, before any mouse event is sent. The click queries
// again then, a bounded number of times.
func (p *page) click(css string) {
	p.t.Helper()
	const tries = 20
	for try := 1; ; try++ {
		err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible))
		if err == nil {
			return
		}
		if !nodeGone(err) || try == tries {
			p.t.Fatalf("browser: clicking %s (try %d): %v", css, try, err)
		}
	}
}

// nodeGone reports whether the browser refused an action because the node
// it was given is no longer in the document.
func nodeGone(err error) bool {
	var e *cdproto.Error
	return errors.As(err, &e) && e.Code == -32000 &&
		(strings.Contains(e.Message, "Could not find node") || strings.Contains(e.Message, "No node with given id"))
}

// key sends key presses to the focused element.
func (p *page) key(keys string) {
	p.t.Helper()
	p.do(chromedp.KeyEvent(keys))
}

// text returns the text content of the first element matching css.
func (p *page) text(css string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, css))
}

// waitLive waits until the history page's subscription is connected.
func (p *page) waitLive() {
	p.t.Helper()
	p.waitFor("live updates", `document.querySelector('.live')?.dataset.state === 'live'`)
}

// rowCount is the number of history rows shown.
func (p *page) rowCount() int {
	p.t.Helper()
	return eval[int](p, `document.querySelectorAll('tr.row').length`)
}

// rowSelector finds the history row of a raw path (paths are unique per test).
func rowSelector(path string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('tr.row')].find(r => r.querySelector('.path-wrap code').textContent === %q)`, path)
}

// openRow clicks the row with this raw path and waits for its detail.
// The mouse goes to where the row was when the click was sent: a row
// re-rendered or moved meanwhile (a queued delivery's row changes as its
// attempt runs, the lines above it grow) takes no click, as a person's
// click would miss it. Like that person, the test clicks again when no
// detail has opened after a few seconds, a bounded number of times.
func (p *page) openRow(path string) {
	p.t.Helper()
	p.waitFor("row "+path, rowSelector(path))
	id := eval[string](p, rowSelector(path)+`.dataset.id`)
	detail := fmt.Sprintf(`document.querySelector('.detail [data-delivery-id=%q]')`, id)
	const tries, each = 6, 5 * time.Second
	for try := 1; try < tries; try++ {
		p.click(fmt.Sprintf(`tr.row[data-id=%q]`, id))
		if p.poll(each, detail) == nil {
			return
		}
		p.t.Logf("no detail of %s %s after a click (try %d): clicking again", path, each, try)
	}
	p.click(fmt.Sprintf(`tr.row[data-id=%q]`, id))
	p.waitFor("detail of "+path, detail)
}

// screenshot writes the viewport to docs/screenshots/name when
// RELAY_SCREENSHOTS=1.
func (p *page) screenshot(name string) {
	p.t.Helper()
	if os.Getenv("RELAY_SCREENSHOTS") != "1" {
		return
	}
	// Let fonts and layout settle: wait for two animation frames.
	eval[chromedp.Void](p, `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r())))`)
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	dir := filepath.Join(harness.ModuleRoot(), "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("wrote docs/screenshots/%s", name)
}

// screenshots reports whether this run writes docs/screenshots.
func screenshots() bool { return os.Getenv("RELAY_SCREENSHOTS") == "1" }

// chromedpSendKeys types text into the element, as a user would.
func chromedpSendKeys(css, text string) chromedp.Action[chromedp.Void] {
	return chromedp.SendKeys(chromedp.CSS(css), text, chromedp.NodeVisible)
}

// chromedpSetValue sets a form control's value and fires its input and
// change events, so the page sees the edit.
func chromedpSetValue(css, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		el.value = %q;
		el.dispatchEvent(new Event('input', {bubbles: true}));
		el.dispatchEvent(new Event('change', {bubbles: true}));
	})()`, css, value))
}

// chromedpFocus focuses the element matching css.
func chromedpFocus(css string) chromedp.Action[chromedp.Void] {
	return chromedp.Focus(chromedp.CSS(css), chromedp.NodeVisible)
}

// assertLabelled fails the test when a visible form control has no label.
func (p *page) assertLabelled() {
	p.t.Helper()
	unlabelled := eval[[]string](p, `[...document.querySelectorAll('input, select, textarea')]
		.filter(el => el.type !== 'hidden' && !el.closest('[aria-hidden=true]'))
		.filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby'))
		.map(el => el.outerHTML)`)
	for _, html := range unlabelled {
		p.t.Errorf("form control without a label: %s", html)
	}
}

// TestNodeGoneIsWhatTheBrowserAnswers: click retries only on the answer the
// browser gives when a node it was handed has left the document, so that
// answer must be the one nodeGone recognises.
func TestNodeGoneIsWhatTheBrowserAnswers(t *testing.T) {
	p := newPage(t, 800, 600)
	p.open("/")
	p.do(chromedp.Evaluate[chromedp.Void](`document.body.insertAdjacentHTML('beforeend', '<button id=stale>x</button>')`))
	nodes, err := chromedp.Run(p.ctx, chromedp.Nodes(chromedp.CSS(`#stale`), chromedp.NodeVisible))
	if err != nil || len(nodes) != 1 {
		t.Fatalf("finding the button: %v (%d nodes)", err, len(nodes))
	}
	p.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('stale').remove()`))
	err = chromedp.Do(p.ctx, chromedp.MouseClickNode(nodes[0]))
	if err == nil || !nodeGone(err) {
		t.Fatalf("clicking a removed node answered %v, want what nodeGone recognises", err)
	}
	if nodeGone(fmt.Errorf("another failure")) {
		t.Fatal("nodeGone recognises any error")
	}
}
