package desktop

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HookEnv names the file the test hook's address and secret are written
// to. Unset (always, outside tests), the hook does not exist.
//
// The hook lets a test drive the real window as a person would: it runs a
// script in the page and returns its value (clicks, typed text, the
// rendered rows), and it returns the app's state. It listens on 127.0.0.1
// only and needs the secret from that file (mode 0600).
const HookEnv = "RELAY_DESKTOP_TEST_HOOK"

var errNotUp = errors.New("the page is not up yet")

type hook struct {
	srv    *http.Server
	secret string

	mu      sync.Mutex
	waiting map[string]chan string
	next    atomic.Int64
}

// StartHook starts the test hook when HookEnv is set.
func (a *App) StartHook() error {
	file := os.Getenv(HookEnv)
	if file == "" {
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("test hook: %w", err)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := &hook{secret: hex.EncodeToString(b), waiting: map[string]chan string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /eval", func(w http.ResponseWriter, r *http.Request) {
		src, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := a.eval(r.Context(), h, string(src))
		if errors.Is(err, errNotUp) {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusGatewayTimeout)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, out)
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.status())
	})
	mux.HandleFunc("POST /quit", func(w http.ResponseWriter, r *http.Request) {
		a.Quit()
	})
	mux.HandleFunc("POST /close", func(w http.ResponseWriter, r *http.Request) {
		a.BeforeClose()
	})
	h.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+h.secret)) != 1 {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	if err := os.WriteFile(file, []byte(ln.Addr().String()+" "+h.secret+"\n"), 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("test hook: %w", err)
	}
	a.hook = h
	go func() { _ = h.srv.Serve(ln) }()
	a.log.Warn("test hook listening", "addr", ln.Addr().String())
	return nil
}

func (h *hook) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
}

// eval runs src (an expression, possibly a promise) in the page and
// returns its value as JSON, sent back through UI.HookResult.
func (a *App) eval(ctx context.Context, h *hook, src string) (string, error) {
	a.mu.Lock()
	w, up := a.win, a.pageUp
	a.mu.Unlock()
	if w == nil || !up {
		// A script sent before the page runs would be lost.
		return "", errNotUp
	}
	id := strconv.FormatInt(h.next.Add(1), 10)
	ch := make(chan string, 1)
	h.mu.Lock()
	h.waiting[id] = ch
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.waiting, id)
		h.mu.Unlock()
	}()
	w.ExecJS(`(async () => {
  let out;
  try { out = JSON.stringify({value: await (` + src + `)}); }
  catch (e) { out = JSON.stringify({error: String(e && e.stack || e)}); }
  window.go.desktop.UI.HookResult(` + strconv.Quote(id) + `, out);
})();`)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	select {
	case out := <-ch:
		return out, nil
	case <-ctx.Done():
		return "", errors.New("the page did not answer")
	}
}

func (a *App) hookResult(id, result string) {
	h := a.hook
	if h == nil {
		return
	}
	h.mu.Lock()
	ch := h.waiting[id]
	h.mu.Unlock()
	if ch != nil {
		select {
		case ch <- result:
		default:
		}
	}
}

// pageErrorsScript is the file the window's page loads first when the test
// hook is on (hookAssets): it keeps what the page reports as an error
// (console.error and console.assert, uncaught exceptions, unhandled
// promise rejections, files that failed to load) from its first script on,
// before a test first talks to the window, and on every load of the page.
// window.__pageErrors.take() returns what it kept and forgets it, so a test
// reads each error once: {errors, dropped}. It keeps at most 50 entries of
// at most 500 characters between two reads and counts the rest as
// dropped, so a page erroring in a loop grows nothing without bound.
// (Wails' own runtime scripts, which it puts first in every page, run
// before it.)
const pageErrorsScript = `(() => {
  const maxEntries = 50, maxChars = 500;
  let errors = [], dropped = 0;
  const keep = (msg) => {
    if (errors.length < maxEntries) errors.push(String(msg).slice(0, maxChars));
    else dropped++;
  };
  const text = (v) => {
    if (v instanceof Error) return v.name + ': ' + v.message + (v.stack ? '\n' + v.stack : '');
    if (typeof v === 'string') return v;
    try { return JSON.stringify(v) ?? String(v); } catch { return String(v); }
  };
  const consoleError = console.error, consoleAssert = console.assert;
  console.error = function (...args) {
    keep('console.error: ' + args.map(text).join(' '));
    return consoleError.apply(this, args);
  };
  console.assert = function (cond, ...args) {
    if (!cond) keep('console.assert: ' + (args.length ? args.map(text).join(' ') : 'Assertion failed'));
    return consoleAssert.call(this, cond, ...args);
  };
  window.addEventListener('error', (e) => {
    if (e instanceof ErrorEvent) {
      const stack = e.error instanceof Error && e.error.stack ? '\n' + e.error.stack : '';
      keep('Uncaught ' + e.message + ' (at ' + e.filename + ':' + e.lineno + ':' + e.colno + ')' + stack);
      return;
    }
    // An element's file that failed to load (script, style, image).
    const el = e.target;
    if (el instanceof Element) keep('failed to load <' + el.localName + '> ' + (el.getAttribute('src') || el.getAttribute('href') || ''));
  }, true);
  window.addEventListener('unhandledrejection', (e) => { keep('Unhandled rejection: ' + text(e.reason)); });
  Object.defineProperty(window, '__pageErrors', {
    value: Object.freeze({
      take() {
        const out = { errors, dropped };
        errors = [];
        dropped = 0;
        return out;
      },
    }),
  });
})();
`

// pageErrorsPath is where hookAssets serves pageErrorsScript.
const pageErrorsPath = "hook-page-errors.js"

// Assets is the window's files (the package's Assets). With the test hook
// on, its page loads pageErrorsScript before its own scripts, so a test
// sees every error the page reports; without the hook the files are
// Assets' own.
func (a *App) Assets() fs.FS {
	if a.hook == nil {
		return Assets()
	}
	return hookAssets{Assets()}
}

// hookAssets serves pageErrorsScript and an index.html that loads it
// first in its head.
type hookAssets struct{ fs.FS }

func (h hookAssets) Open(name string) (fs.File, error) {
	switch name {
	case pageErrorsPath:
		return &memFile{Reader: strings.NewReader(pageErrorsScript), name: name}, nil
	case "index.html":
		b, err := fs.ReadFile(h.FS, name)
		if err != nil {
			return nil, err
		}
		head, rest, ok := strings.Cut(string(b), "<head>")
		if !ok {
			return nil, errors.New("test hook: index.html has no <head> to load the error script in")
		}
		page := head + "<head>\n  <script src=\"/" + pageErrorsPath + "\"></script>" + rest
		return &memFile{Reader: strings.NewReader(page), name: name}, nil
	}
	return h.FS.Open(name)
}

// memFile is a file of hookAssets made in memory.
type memFile struct {
	*strings.Reader
	name string
}

func (f *memFile) Stat() (fs.FileInfo, error) { return memInfo{f}, nil }
func (f *memFile) Close() error               { return nil }

type memInfo struct{ f *memFile }

func (i memInfo) Name() string       { return i.f.name }
func (i memInfo) Size() int64        { return i.f.Size() }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
