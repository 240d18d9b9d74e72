package graph

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/clientkey"
)

// NewSmeeChannel serves smee.io's "new channel" route (GET or HEAD /new on
// the bare domain): it opens a smee-compatible inspector and answers 307
// with its URL in Location, which smee's client (createChannel) and
// Probot's setup read. It takes one of the client address's anonymous
// mutations, as createInspector does.
func (r *Resolver) NewSmeeChannel() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method Not Allowed: GET or HEAD /new opens a smee-compatible inspector", http.StatusMethodNotAllowed)
			return
		}
		ctx := context.WithValue(req.Context(), clientKey, clientkey.Of(req.RemoteAddr))
		var limited *RateLimitedError
		err := r.limitAnonymous(ctx)
		if errors.As(err, &limited) {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(limited.RetryAfter)))
			http.Error(w, "Too Many Requests: "+err.Error(), http.StatusTooManyRequests)
			return
		}
		in, err := r.Service.CreateInspectorWith(ctx, domain.InspectorOptions{Smee: true, Network: clientNetwork(ctx)})
		if errors.Is(err, domain.ErrDiskReserve) || errors.Is(err, domain.ErrStorageQuota) {
			http.Error(w, "Insufficient Storage: "+err.Error(), http.StatusInsufficientStorage)
			return
		}
		if err != nil {
			r.Logger.ErrorContext(ctx, "smee: open a channel", "error", err)
			http.Error(w, "Service Unavailable: the inspector could not be opened", http.StatusServiceUnavailable)
			return
		}
		url := r.PublicURL(in.ID)
		w.Header().Set("Location", url)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusTemporaryRedirect)
		if req.Method == http.MethodGet {
			_, _ = w.Write([]byte(url + "\n"))
		}
	})
}

// smeeStreamURL is an Endpoint's smee stream URL: its public URL with the
// key as the path (ingress.SmeeKeyPath).
func (r *Resolver) smeeStreamURL(id, key string) string {
	return strings.TrimSuffix(r.PublicURL(id), "/") + ingress.SmeeKeyPath + key
}
