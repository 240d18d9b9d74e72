package app

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// healthCheck answers /healthz and /readyz from the views' runner and the
// log's position.
type healthCheck struct {
	store domain.EventStore
	views interface{ Health() readmodel.Health }
	// stall is how long the views may take to reach a log position before
	// the relay is not ready: the bound a command waits for them.
	stall time.Duration
	// bus says why this node cannot reach the other nodes, "" when it
	// can; nil for a single process.
	bus func() string

	// mark is a log position seen at markAt that the views had not reached
	// yet: they are stalled when they still have not after stall. A new
	// mark is taken once they pass it, so a busy relay whose views trail
	// the log by a few events, as they always do, is not stalled.
	mu     sync.Mutex
	mark   uint64
	markAt time.Time
}

// problem says why the relay is not ready, "" when it is: the views'
// runner is failing, or they have not reached a log position for stall.
func (h *healthCheck) problem(ctx context.Context) string {
	if h.bus != nil {
		if p := h.bus(); p != "" {
			return p
		}
	}
	vh := h.views.Health()
	last, err := h.store.LastPosition(ctx)
	if err != nil {
		return fmt.Sprintf("event log unreadable: %v", err)
	}
	var lag uint64
	if last > vh.Position {
		lag = last - vh.Position
	}
	now := time.Now()
	h.mu.Lock()
	if vh.Position >= h.mark || h.markAt.IsZero() {
		h.mark, h.markAt = last, now
	}
	waited := now.Sub(h.markAt)
	stalled := vh.Position < h.mark && waited > h.stall
	h.mu.Unlock()
	switch {
	case vh.Err != nil:
		return fmt.Sprintf("views failing since %s (%d tries): %v; lag %d positions (views %d, log %d)",
			vh.FailingSince.UTC().Format(time.RFC3339), vh.Retries, vh.Err, lag, vh.Position, last)
	case stalled:
		return fmt.Sprintf("views stalled: position %d not reached in %s; lag %d positions (views %d, log %d)",
			h.mark, waited.Round(time.Second), lag, vh.Position, last)
	}
	return ""
}

// readiness is /readyz, for orchestrators and load balancers: 200 "ready",
// or 503 with the reason and the lag while the views cannot keep up. New
// webhooks are still recorded then, but reads are stale and mutations fail
// with UNAVAILABLE.
func (h *healthCheck) readiness(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if p := h.problem(r.Context()); p != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready:", p)
		return
	}
	fmt.Fprintln(w, "ready")
}

// liveness is /healthz: 200 while the process serves, its body naming a
// fault readiness reports. It stays 200 through such a fault on purpose:
// the log still records every webhook, and a restart cures no full disk
// but would drop every agent session (see docs/operations.md).
func (h *healthCheck) liveness(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if p := h.problem(r.Context()); p != "" {
		fmt.Fprintln(w, "ok, degraded:", p)
		return
	}
	fmt.Fprintln(w, "ok")
}
