package connguard

import (
	"io"
	"net"
	"net/http"

	"github.com/relayhq/relay/internal/clientkey"
)

// InFlight caps the requests each client has in flight over all its
// connections. The connection cap alone does not bound them: an HTTP/2
// connection carries up to 250 streams at once, so a client under
// --max-conns-per-ip could hold 64 000 requests (1 MiB API bodies, held
// forwards, streams). A request counts from when its handler starts until
// it returns, so a smee stream or a WebSocket counts while it is open.
//
// It counts by clientkey.Of(r.RemoteAddr): mounted under forwarded.Handler,
// which sets RemoteAddr to the sender a trusted proxy names, it counts each
// sender behind a proxy on its own. A client's network (clientkey.Network)
// has a cap of its own over all its clients, since a /24 is 256 clients
// and a /48 65 536.
type InFlight struct {
	// Max is the most requests one client may have in flight; zero or less
	// is no cap, for the client or its network.
	Max int
	// MaxPerNetwork is the most requests one client network may have in
	// flight over all its clients; zero is clientkey.NetworkShare × Max.
	MaxPerNetwork int
	// Unlimited, when set, exempts the addresses for which it is true: a
	// trusted proxy's own requests (those that name no sender), which
	// stand for many clients.
	Unlimited func(ip string) bool
	// OnRefuse, when set, is called for every request refused (a metric).
	OnRefuse func()

	n clientkey.Caps
}

// The bodies of a refused request, by the cap it is over.
const (
	inFlightRefusal        = "Too Many Requests: too many requests in flight from your address\n"
	inFlightNetworkRefusal = "Too Many Requests: too many requests in flight from your network\n"
)

// Handler wraps next: a request whose client has Max in flight already is
// answered 429 with Retry-After: 1, and next does not see it.
func (f *InFlight) Handler(next http.Handler) http.Handler {
	if f.Max <= 0 {
		return next
	}
	perNetwork := clientkey.NetworkCap(f.MaxPerNetwork, f.Max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.Unlimited != nil {
			if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil && f.Unlimited(host) {
				next.ServeHTTP(w, r)
				return
			}
		}
		key := clientkey.Of(r.RemoteAddr)
		if full := f.n.Take(key, f.Max, perNetwork); full != clientkey.NotFull {
			if f.OnRefuse != nil {
				f.OnRefuse()
			}
			h := w.Header()
			h.Set("Content-Type", "text/plain; charset=utf-8")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			body := inFlightRefusal
			if full == clientkey.NetworkFull {
				body = inFlightNetworkRefusal
			}
			_, _ = io.WriteString(w, body)
			return
		}
		defer f.n.Release(key)
		next.ServeHTTP(w, r)
	})
}

// Clients reports how many clients have requests in flight (for tests).
func (f *InFlight) Clients() int { return f.n.Clients() }
