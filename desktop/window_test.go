package desktop

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// window is the window's page (the embedded frontend, Assets) in a
// headless Chromium, its bindings answered by a real UI: each call of
// window.go.desktop.UI.<Method>(args) is posted to a server on 127.0.0.1
// that calls that method of the UI with the arguments, as Wails' bindings
// do, and answers its value or its error (a string, as Wails gives it).
// window.__ui.pending counts the calls not yet answered.
type window struct {
	t   *testing.T
	ctx context.Context
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

// openWindow serves the window's page with ui's bindings and opens it in a
// width×height viewport. It skips without Chromium (CHROMIUM, else
// /usr/bin/chromium), except in CI.
func openWindow(t *testing.T, ui *UI, width, height int64) *window {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the window's tests need Chromium in CI: %v", err)
		}
		t.Skipf("skipping the window's test: no Chromium at %s", path)
	}
	srv := httptest.NewServer(windowHandler(t, ui))
	t.Cleanup(srv.Close)

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium-profile")))
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(tabCtx, 2*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	w := &window{t: t, ctx: ctx}
	w.do(chromedp.EmulateViewport(width, height),
		func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: bindingsShim})
			return chromedp.Void{}, err
		},
		chromedp.Navigate(srv.URL+"/"))
	return w
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
