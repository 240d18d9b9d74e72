package ingress

import (
	"context"
	"errors"
	"net/http"

	"github.com/relayhq/relay/domain"
)

// serveInspector records a request to a guest inspector and answers ans
// (204, or the wrong-protocol 503). An
// expired inspector answers 503, one whose storage quota is used up 429,
// and one past the relay's storage for guests 507, and none records the
// request: an expired inspector's deliveries are
// on their way out of the log (retention), and recording would let a
// sender fill the disk through an address nobody reads.
func (s *Server) serveInspector(ctx context.Context, w http.ResponseWriter, r *http.Request, route Route, ans answer) {
	expired, err := s.inspectorExpired(ctx, route)
	switch {
	case errors.Is(err, domain.ErrStreamNotFound):
		writeNoAgent(w, "unknown address")
		return
	case err != nil:
		s.log.ErrorContext(ctx, "ingress: check inspector expiry", "address", route.ID, "error", err)
		writeNoAgent(w, "store unavailable")
		return
	}
	if expired {
		answerExpired.write(w)
		return
	}
	if s.overQuota(w, route) || s.overGuestStorage(w, route) {
		return
	}
	s.serveRecord(ctx, w, r, route, ans)
}

// serveSmeeInspector opens smee's stream of a smee-compatible inspector
// that is not expired.
func (s *Server) serveSmeeInspector(ctx context.Context, w http.ResponseWriter, r *http.Request, route Route) {
	expired, err := s.inspectorExpired(ctx, route)
	switch {
	case errors.Is(err, domain.ErrStreamNotFound):
		writeNoAgent(w, "unknown address")
	case err != nil:
		s.log.ErrorContext(ctx, "ingress: check inspector expiry", "address", route.ID, "error", err)
		writeNoAgent(w, "store unavailable")
	case expired:
		answerExpired.write(w)
	default:
		s.serveSmee(ctx, w, r, route)
	}
}

// inspectorExpired tells whether the inspector is expired, and records the
// expiry when this request is the first to find it idle past its TTL.
func (s *Server) inspectorExpired(ctx context.Context, route Route) (bool, error) {
	if route.Expired {
		return true, nil
	}
	if route.LastActivityAt.IsZero() {
		return false, nil
	}
	if !route.ExpiresAt.IsZero() && s.deps.Recorder.Now().Before(route.ExpiresAt) {
		return false, nil // the hot path: no read of the stream
	}
	return s.deps.Recorder.ExpireIfIdle(ctx, route.ID, route.LastActivityAt)
}
