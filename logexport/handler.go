package logexport

import (
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/relayhq/relay/domain"
)

// Handler serves GET /log/export to the operator (the admin token as a
// Bearer token): the whole log as relay events export writes it, streamed
// page by page, so that relay events verify --server checks a running
// relay without access to its data folder. With no admin token configured
// it answers 404: nobody may read the whole log.
func Handler(s domain.EventStore, adminToken string, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if adminToken == "" {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(adminToken)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="relay"`)
			http.Error(w, "the log export needs the admin token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/jsonl")
		w.Header().Set("Cache-Control", "no-store")
		// The answer is as long as the log: no write deadline, as for a
		// download (the server's WriteTimeout would cut it).
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		if err := Write(r.Context(), s, w); err != nil && r.Context().Err() == nil {
			// The status is sent; a cut stream fails the client's
			// verification, which names where it ended.
			log.WarnContext(r.Context(), "log export", "error", err)
		}
	})
}
