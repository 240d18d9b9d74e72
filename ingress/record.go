package ingress

import (
	"context"
	"errors"
	"net/http"
	"os"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/connguard"
	"github.com/relayhq/relay/record"
)

// serveRecord captures a request to an inspector or a LOG Endpoint, records
// it with the answer ans and then gives that answer. The plain 204 gives
// way to the address's own answer (ownAnswer).
func (s *Server) serveRecord(ctx context.Context, w http.ResponseWriter, r *http.Request, route Route, ans answer) {
	req, reserved, err := captureRecord(r, s.cfg.CaptureCap, s.cfg.MaxBody, s.bodies, route.AccountID)
	// The body is held until its record is committed (recordAnswer
	// returns); then its memory returns.
	defer releaseBody(s.bodies, r, route.AccountID, reserved)
	limitStored(&req, s.cfg.MaxHeaders, s.cfg.MaxHeaderBytes)
	var full *BodyBudgetError
	switch {
	case errors.Is(err, ErrUnsupportedTarget):
		s.refuseTarget(ctx, w, r, route, err)
		return
	case errors.As(err, &full):
		// As a forwarded body past the budget: recorded with its headers,
		// the sender told which share was full and to come back.
		s.recordAnswer(ctx, w, s.deps.NewDeliveryID(), route, req, answer{
			status: http.StatusServiceUnavailable, reason: domain.ReasonBodyBudget, retryAfter: 1,
			body: "relay busy: the request bodies it is already recording hold its memory budget; retry later\nfull: " +
				full.Share + " share: " + full.Why() + "\n",
		})
		connguard.Linger(w, r.Body)
		return
	case errors.Is(err, ErrBodyTooLarge):
		// Recorded as incomplete and answered as usual: only forwarding
		// needs the whole body.
	case err != nil && ans.status == http.StatusNoContent:
		ans = unreadableBody(err)
	}
	if ans.status == http.StatusNoContent && ans.reason == "" && !ans.own {
		ans = s.ownAnswer(route, &req)
	}
	s.recordAnswer(ctx, w, s.deps.NewDeliveryID(), route, req, ans)
}

// recordAnswer records the delivery carrying the answer ans, durably, and
// only then answers the sender: one event per delivery. The record does not
// end when the sender hangs up: once a request is captured, recording it
// must not depend on the sender still waiting.
func (s *Server) recordAnswer(ctx context.Context, w http.ResponseWriter, id string, route Route, req domain.CapturedRequest, ans answer) {
	err := s.deps.Recorder.ReceiveAnswered(ctx, receipt(id, route, req), ans.status, ans.reason)
	if err != nil {
		s.notRecorded(ctx, w, id, route.ID, req.Method, err)
		return
	}
	ans.write(w)
	s.logDelivery(ctx, id, route.ID, req.Method, ans.status)
}

// notRecorded answers a delivery whose record failed. A function of its
// own: the target of errors.As lives on the heap, and only failures need it.
func (s *Server) notRecorded(ctx context.Context, w http.ResponseWriter, id, address, method string, err error) {
	var broken *record.InvariantError
	if errors.As(err, &broken) {
		s.invariantBroken(ctx, w, id, address, method, broken.Err)
		return
	}
	s.storeUnavailable(ctx, w, id, address, method, err)
}

func receipt(id string, route Route, req domain.CapturedRequest) record.Receipt {
	return record.Receipt{DeliveryID: id, Address: route.ID, Kind: route.Kind, AccountID: route.AccountID, Request: req}
}

// invariantBroken answers a request whose capture the domain refused: a
// bug, not the sender's fault, so it is logged as an error.
func (s *Server) invariantBroken(ctx context.Context, w http.ResponseWriter, id, address, method string, err error) {
	s.log.ErrorContext(ctx, "ingress: capture broke a delivery invariant", "delivery_id", id, "address", address, "error", err)
	writeText(w, http.StatusInternalServerError, "Internal Server Error\n")
	s.logDelivery(ctx, id, address, method, http.StatusInternalServerError)
}

// storeUnavailable answers a delivery that could not be recorded. It is
// never answered as if it had been.
func (s *Server) storeUnavailable(ctx context.Context, w http.ResponseWriter, id, address, method string, err error) {
	s.log.ErrorContext(ctx, "ingress: record delivery", "delivery_id", id, "address", address, "error", err)
	writeNoAgent(w, "store unavailable")
	s.logDelivery(ctx, id, address, method, http.StatusServiceUnavailable)
}

// refuseTarget answers a request whose target names no path (CONNECT's
// authority form): there is nothing to record or forward.
func (s *Server) refuseTarget(ctx context.Context, w http.ResponseWriter, r *http.Request, route Route, err error) {
	s.log.DebugContext(ctx, "ingress: refused request target", "address", route.ID, "method", r.Method, "error", err)
	writeText(w, http.StatusBadRequest, "Bad Request: the request target must be a path\n")
}

// unreadableBody is the answer to a body that could not be read in full.
// What did arrive is still recorded with it. A body that stopped arriving
// (the server's body timeout) gets 408; the connection is closed after it.
func unreadableBody(err error) answer {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return answer{
			status: http.StatusRequestTimeout,
			reason: domain.ReasonBodyStalled + err.Error(),
			body:   "Request Timeout: the request body stopped arriving\n",
		}
	}
	return answer{
		status: http.StatusBadRequest,
		reason: domain.ReasonBodyUnreadable + err.Error(),
		body:   "Bad Request: the request body could not be read\n",
	}
}
