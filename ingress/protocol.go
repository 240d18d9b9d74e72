package ingress

import (
	"net/http"
	"slices"
	"strings"

	"github.com/relayhq/relay/domain"
)

// plainWhereHTTPSIsRequired reports whether r is known to have come over
// plain HTTP while public URLs are https (spec section 7, wrong protocol).
// When the relay cannot know (no TLS of its own, no trusted proxy telling)
// it does not guess.
func (s *Server) plainWhereHTTPSIsRequired(r *http.Request) bool {
	if !s.cfg.RequireHTTPS {
		return false
	}
	c := sender(r)
	return c.Known && c.Proto != "https"
}

// wrongProtocol is the answer to a plain-HTTP request at an address whose
// public URL is https. It is recorded like any delivery.
func (s *Server) wrongProtocol(address string) answer {
	why := "wrong protocol: this address needs https"
	if s.cfg.PublicURL != nil {
		why += " (" + s.cfg.PublicURL(address) + ")"
	}
	return answer{status: http.StatusServiceUnavailable, reason: domain.ReasonWrongProtocol, body: noAgentBody(why)}
}

// plainRoutes answer over plain HTTP too: load balancers and monitoring
// probe them there.
var plainRoutes = []string{"/healthz", "/readyz", "/metrics"}

// redirectToHTTPS sends a plain-HTTP request for the console or the API to
// the same path over https (308 keeps the method and body). It reports
// false for the routes that answer over plain HTTP too.
func (s *Server) redirectToHTTPS(w http.ResponseWriter, r *http.Request) bool {
	for _, p := range plainRoutes {
		if r.URL.Path == p {
			return false
		}
	}
	base := s.cfg.ConsoleURL
	if base == "" {
		base = "https://" + r.Host
	}
	redirectTo(w, r, base)
	return true
}

// redirectToConsoleHTTPS is redirectToHTTPS for the console's own host,
// whose URL is https: a request known to be plain goes there.
func (s *Server) redirectToConsoleHTTPS(w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasPrefix(s.cfg.ConsoleSite, "https://") || slices.Contains(plainRoutes, r.URL.Path) {
		return false
	}
	if c := sender(r); !c.Known || c.Proto == "https" {
		return false
	}
	redirectTo(w, r, s.cfg.ConsoleSite)
	return true
}

// redirectTo answers 308 to the request's path and query on base.
func redirectTo(w http.ResponseWriter, r *http.Request, base string) {
	target := r.URL.RequestURI()
	if !strings.HasPrefix(target, "/") {
		target = "/"
	}
	w.Header().Set("Location", strings.TrimSuffix(base, "/")+target)
	writeText(w, http.StatusPermanentRedirect, "Permanent Redirect: the relay is served over https: "+strings.TrimSuffix(base, "/")+target+"\n")
}
