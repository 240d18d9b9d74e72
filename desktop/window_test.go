package desktop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/relayhq/relay/internal/pageerrors"
)

// window is the window's page (the embedded frontend, Assets) in a
// headless Chromium, its bindings answered by a real UI: each call of
// window.go.desktop.UI.<Method>(args) is posted to a server on 127.0.0.1
// that calls that method of the UI with the arguments, as Wails' bindings
// do, and answers its value or its error (a string, as Wails gives it).
// window.__ui.pending counts the calls not yet answered, and
// window.__ui.advance(ms) moves the page's clock (clockShim).
//
// The window records every console error, uncaught exception and
// unhandled promise rejection of the page, and the test fails at its end
// on each one it did not name with tolerate.
type window struct {
	t   *testing.T
	ctx context.Context

	mu        sync.Mutex
	problems  []string         // the page's errors, in order
	tolerated []*regexp.Regexp // errors the test expects
}

// bindingsShim stands in for the bindings and runtime Wails injects.
const bindingsShim = `(() => {
  const seen = window.__ui = { pending: 0 };
  const call = async (method, args) => {
    seen.pending++;
    try {
      const r = await fetch('/__ui/' + method, { method: 'POST', body: JSON.stringify(args) });
      const out = await r.json();
      if (out.error) throw out.error;
      return out.result;
    } finally {
      seen.pending--;
    }
  };
  window.go = { desktop: { UI: new Proxy({}, { get: (_, method) => (...args) => call(String(method), args) }) } };
  window.runtime = { EventsOn() {} };
})();`

// clockShim gives the page's setInterval a clock the test moves: a timer
// runs only when window.__ui.advance(ms) says ms have passed, as often as
// it would have in that time, in time order. The page's own timers (the
// refresh every 5 s) then run when the test says, and never between its
// steps. setTimeout keeps the real clock.
const clockShim = `(() => {
  const timers = new Map();
  let now = 0, ids = 0;
  window.setInterval = (fn, ms, ...args) => {
    const every = Math.max(1, Number(ms) || 0);
    timers.set(++ids, { run: () => fn(...args), every, due: now + every });
    return ids;
  };
  window.clearInterval = (id) => { timers.delete(id); };
  window.__ui.advance = (ms) => {
    const end = now + ms;
    for (;;) {
      let first = null;
      for (const t of timers.values()) if (t.due <= end && (!first || t.due < first.due)) first = t;
      if (!first) break;
      now = first.due;
      first.due += first.every;
      first.run();
    }
    now = end;
  };
})();`

// openWindow serves the window's page with ui's bindings and opens it in a
// width×height viewport, in a tab of its own browser context (its own
// storage) of the package's one Chromium. It skips without Chromium
// (CHROMIUM, else /usr/bin/chromium), except in CI.
func openWindow(t *testing.T, ui *UI, width, height int64) *window {
	t.Helper()
	browserCtx, err := sharedBrowser()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the window's tests need Chromium in CI: %v", err)
		}
		t.Skipf("skipping the window's test: %v", err)
	}
	srv := httptest.NewServer(windowHandler(t, ui))
	t.Cleanup(srv.Close)

	w := &window{t: t}
	tabCtx, cancelTab := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext(), chromedp.WithListener(w.listen))
	ctx, cancelTimeout := context.WithTimeout(tabCtx, 2*time.Minute)
	w.ctx = ctx
	t.Cleanup(func() {
		for _, msg := range w.consoleErrors() {
			t.Errorf("the page's console: %s", msg)
		}
		cancelTimeout()
		cancelTab()
	})
	w.do(chromedp.EmulateViewport(width, height),
		func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: bindingsShim + clockShim})
			return chromedp.Void{}, err
		},
		chromedp.Navigate(srv.URL+"/"))
	return w
}

// browser is the package's one headless Chromium, started by the first
// window and stopped by TestMain (stopBrowser): each window's tab is in a
// browser context of its own, and no test pays for another start.
var browser struct {
	once sync.Once
	ctx  context.Context // nil when err says why there is none
	err  error
	stop func() // nil until the first window
}

// stopBrowser stops the package's Chromium, if a window started it.
func stopBrowser() {
	if browser.stop != nil {
		browser.stop()
	}
}

// sharedBrowser starts the package's Chromium once and returns its
// context.
func sharedBrowser() (context.Context, error) {
	browser.once.Do(func() {
		path := os.Getenv("CHROMIUM")
		if path == "" {
			path = "/usr/bin/chromium"
		}
		if _, err := os.Stat(path); err != nil {
			browser.err = fmt.Errorf("no Chromium at %s (%w)", path, err)
			return
		}
		profile, err := os.MkdirTemp("", "desktop-chromium-")
		if err != nil {
			browser.err = err
			return
		}
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.UserDataDir(profile))
		ctx, cancelBrowser := chromedp.NewContext(allocCtx)
		browser.stop = func() {
			cancelBrowser()
			cancelAlloc()
			_ = os.RemoveAll(profile)
		}
		if err := chromedp.Do(ctx); err != nil {
			browser.err = fmt.Errorf("starting Chromium: %w", err)
			return
		}
		browser.ctx = ctx
	})
	return browser.ctx, browser.err
}

// windowHandler serves Assets and answers the bindings' calls with ui.
func windowHandler(t *testing.T, ui *UI) http.Handler {
	t.Helper()
	errType := reflect.TypeFor[error]()
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(Assets()))
	mux.HandleFunc("POST /__ui/{method}", func(w http.ResponseWriter, r *http.Request) {
		m := reflect.ValueOf(ui).MethodByName(r.PathValue("method"))
		if !m.IsValid() {
			http.Error(w, "no such binding", http.StatusNotFound)
			return
		}
		var raw []json.RawMessage
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		args := make([]reflect.Value, m.Type().NumIn())
		for i := range args {
			v := reflect.New(m.Type().In(i))
			if i < len(raw) {
				if err := json.Unmarshal(raw[i], v.Interface()); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
			}
			args[i] = v.Elem()
		}
		out := map[string]any{}
		for _, v := range m.Call(args) {
			switch {
			case v.Type() != errType:
				out["result"] = v.Interface()
			case !v.IsNil():
				out["error"] = v.Interface().(error).Error()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	return mux
}

// listen records the page's console errors (console.error and
// console.assert), its uncaught exceptions and unhandled promise
// rejections, and the browser's own errors about it (a script that failed
// to load, a refused fetch), each with its message.
func (w *window) listen(ev any) {
	msg, ok := pageerrors.Of(ev)
	if !ok {
		return
	}
	w.mu.Lock()
	w.problems = append(w.problems, msg)
	w.mu.Unlock()
}

// tolerate lets the page's errors that match pattern pass: a test that
// makes the page fail on purpose says so with it.
func (w *window) tolerate(pattern string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tolerated = append(w.tolerated, regexp.MustCompile(pattern))
}

// consoleErrors returns the errors the page reported until now that the
// test did not tolerate, and forgets all it reported.
func (w *window) consoleErrors() []string {
	w.t.Helper()
	// The listener sees the page's events in the order the browser sends
	// them, so after this round trip it has seen every one sent before.
	if _, err := chromedp.Run(w.ctx, chromedp.Evaluate[chromedp.Void]("0")); err != nil {
		w.t.Errorf("browser: reading the page's last events: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, msg := range w.problems {
		if !slices.ContainsFunc(w.tolerated, func(re *regexp.Regexp) bool { return re.MatchString(msg) }) {
			out = append(out, msg)
		}
	}
	w.problems = nil
	return out
}

// do runs actions in the page and fails the test on error.
func (w *window) do(actions ...chromedp.Action[chromedp.Void]) {
	w.t.Helper()
	if err := chromedp.Do(w.ctx, actions...); err != nil {
		w.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression in the page and decodes its value.
func windowEval[T any](w *window, expr string) T {
	w.t.Helper()
	v, err := chromedp.Run(w.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		w.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it is truthy; what names the
// condition in the failure message.
func (w *window) waitFor(what, expr string) {
	w.t.Helper()
	_, err := chromedp.Run(w.ctx, chromedp.Poll[bool]("!!("+expr+")",
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	if err != nil {
		w.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

// TestWindowReportsPageErrors: the window reports each console error,
// uncaught exception, unhandled rejection and failed load of its page with
// its message, and nothing for an error the test tolerates or a page that
// only logs. The page is the sign-in screen of a real UI.
func TestWindowReportsPageErrors(t *testing.T) {
	app := New(Options{Store: Store{Config: LoginFile{path: filepath.Join(t.TempDir(), "config.json")}}})
	app.Start(t.Context(), &recorder{})
	t.Cleanup(app.Shutdown)
	w := openWindow(t, app.Bindings(), 800, 600)
	w.waitFor("the sign-in form", `document.querySelector('[data-testid=signin]')`)
	w.tolerate(`made on purpose`)
	tests := []struct {
		name string
		js   string // awaited, then two turns of the page's event loop
		want string // in the one error reported; "" for none
	}{
		{"console.error", `console.error('stats:', new Error('no budget'))`, "console.error: stats: Error: no budget"},
		{"an uncaught exception", `setTimeout(() => { throw new TypeError('card is undefined'); })`, "Uncaught TypeError: card is undefined"},
		{"an unhandled rejection", `void Promise.reject(new Error('refused'))`, "Uncaught (in promise) Error: refused"},
		{"a binding's error unhandled", `(() => {
		  const answer = window.go.desktop.UI.Delivery('nosuch');
		  void answer.then(() => {}); // rejects, and nothing handles it
		  return answer.catch(() => {});
		})()`, "Uncaught (in promise) not signed in"},
		{"a file not there", `fetch('/console/nosuch.js')`, "404"},
		{"an error tolerated", `console.error('an error made on purpose')`, ""},
		{"logs and warnings", `(console.log('a log'), console.warn('a warning'))`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_ = windowEval[any](w, `(async () => {
			  await (`+tt.js+`);
			  for (let i = 0; i < 2; i++) await new Promise((r) => setTimeout(r));
			})()`)
			got := w.consoleErrors()
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("reported %q, want nothing", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("reported %q, want one error with %q", got, tt.want)
			}
		})
	}
}
