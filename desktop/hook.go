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
	"net"
	"net/http"
	"os"
	"strconv"
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
