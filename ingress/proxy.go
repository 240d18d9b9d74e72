package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/connguard"
	"github.com/relayhq/relay/record"
)

var errNoForwarder = errors.New("no forwarder configured")

// serveProxy records a request to a PROXY Endpoint, hands it to the
// Forwarder and passes the local process's answer back unchanged.
func (s *Server) serveProxy(ctx context.Context, w http.ResponseWriter, r *http.Request, route Route) {
	id := s.deps.NewDeliveryID()
	c, ok := s.captureToForward(ctx, w, r, route, id, s.cfg.MaxBody, forwardRefusals{
		tooLarge: func(e *BodyTooLargeError) (string, string) {
			return e.Error(), fmt.Sprintf("Request body larger than %d bytes\n", e.Max)
		},
		busy: "relay busy: the request bodies it is already forwarding hold its memory budget; retry later",
	})
	// The body is held (by the forward command, the tunnel and the agent's
	// message) until the answer is back; then its memory returns.
	defer releaseBody(s.bodies, r, route.AccountID, c.reserved)
	if !ok {
		return
	}
	req, full, received := c.req, c.full, c.received

	if route.Handshakes.RelayInProxy() {
		if a, ok := s.handshake(route, &req, full); ok {
			s.recordAnswer(ctx, w, id, route, req, a)
			return
		}
	}

	// A delivery no listener's filters match is recorded and answered as
	// a LOG Endpoint answers (its configured answer, else 204), with why.
	if why, filtered := s.filtered(route, req, received, full); filtered {
		a := configuredAnswer(route)
		a.reason = domain.ReasonFiltered + why
		s.recordAnswer(ctx, w, id, route, req, a)
		return
	}
	// Every header received is forwarded (fidelity); only storage is
	// limited.
	cmd, recorded, err := s.deps.Recorder.ReceiveForward(ctx, receipt(id, route, req), record.Forward{
		Method: req.Method, Target: req.Target, Headers: received, Body: full,
		Timeout: s.cfg.ForwardTimeout, CaptureResponse: route.ResponseCapture,
		Host: req.Host, Scheme: req.Scheme, RemoteAddr: req.RemoteAddr,
	})
	var broken *record.InvariantError
	switch {
	case errors.As(err, &broken):
		s.invariantBroken(ctx, w, id, route.ID, req.Method, broken.Err)
		return
	case err != nil:
		s.storeUnavailable(ctx, w, id, route.ID, req.Method, err)
		return
	}
	status := s.forward(ctx, w, r.Method, route, cmd, recorded.Wait)
	s.logDelivery(ctx, id, route.ID, req.Method, status)
}

// filtered tells a request that no listener of the Endpoint would be
// given, and why.
func (s *Server) filtered(route Route, req domain.CapturedRequest, headers []domain.Header, body []byte) (string, bool) {
	fr := &domain.FilterRequest{Method: req.Method, Target: req.Target, Headers: headers, Body: body}
	if ok, why := domain.Match(route.Filters, fr); !ok {
		return "the Endpoint's filters: " + why, true
	}
	a, ok := s.deps.Forwarder.(Admitter)
	if !ok {
		return "", false
	}
	admitted, why := a.Admits(route.ID, route.AccountID, fr)
	return why, !admitted
}

// forward runs one attempt and answers the sender; it returns the status
// the sender got. The attempt starts while the delivery's record may still
// be on its way to disk: recorded waits for it, and nothing is answered
// before it is durable. Outcomes from the tunnel are already recorded by the
// tunnel (their append is queued after the delivery's, so it cannot land
// first); only answers ingress decides alone are recorded here.
func (s *Server) forward(ctx context.Context, w http.ResponseWriter, method string, route Route, cmd domain.ForwardCommand, recorded func() error) int {
	o, err := s.runForward(ctx, cmd)
	if rerr := recorded(); rerr != nil {
		// The local target may have seen the request, but the sender is
		// told it failed, as for any request the relay could not record.
		s.storeUnavailable(ctx, w, cmd.DeliveryID, route.ID, method, rerr)
		return http.StatusServiceUnavailable
	}
	switch {
	case errors.Is(err, domain.ErrOutcomeNotRecorded):
		// The local target may have answered, but the store did not take
		// the outcome: the sender is told the relay could not record it
		// (503, retry later), never given an answer the log does not hold
		// nor told that none came. That answer is recorded if the store
		// takes it now.
		s.recordLateAnswer(ctx, cmd.DeliveryID, route.ID, http.StatusServiceUnavailable, domain.ReasonOutcomeNotRecorded+err.Error())
		writeNoAgent(w, "store unavailable")
		return http.StatusServiceUnavailable
	case err != nil:
		reason := domain.ReasonNoOutcome + err.Error()
		s.recordLateAnswer(ctx, cmd.DeliveryID, route.ID, http.StatusGatewayTimeout, reason)
		writeText(w, http.StatusGatewayTimeout,
			fmt.Sprintf("Gateway Timeout: no answer from the local target within %s\n", s.cfg.ForwardTimeout))
		return http.StatusGatewayTimeout
	case o.Failed():
		a := failureAnswer(o)
		a.write(w)
		return a.status
	}
	writeOutcome(w, method, o)
	return o.Status
}

func (s *Server) runForward(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error) {
	if s.deps.Forwarder == nil {
		return domain.ForwardOutcome{}, errNoForwarder
	}
	// The Forwarder bounds its own wait (cmd.Timeout and a grace).
	o, err := s.deps.Forwarder.Forward(ctx, cmd)
	if err != nil {
		return o, fmt.Errorf("forward %s: %w", cmd.AttemptID, err)
	}
	return o, nil
}

// recordLateAnswer records the status ingress answered on its own after the
// delivery was recorded.
func (s *Server) recordLateAnswer(ctx context.Context, deliveryID, address string, status int, reason string) {
	if err := s.deps.Recorder.RecordLateAnswer(ctx, deliveryID, status, reason); err != nil {
		s.log.ErrorContext(ctx, "ingress: record answer", "delivery_id", deliveryID, "address", address, "status", status, "error", err)
	}
}

// captured is a request captured whole to be forwarded: req with its
// headers limited for storage, the full body, the headers as received
// (all forwarded), and the bytes reserved of the body budget.
type captured struct {
	req      domain.CapturedRequest
	full     []byte
	received []domain.Header
	reserved int64
}

// forwardRefusals are the words of a mode's refusals: a body past its
// bound (the recorded reason and the sender's text) and a full body budget.
type forwardRefusals struct {
	tooLarge func(*BodyTooLargeError) (reason, body string)
	busy     string
}

// captureToForward captures a request a PROXY or QUEUE Endpoint forwards,
// its body held to maxBody. A request that cannot be (a target it cannot
// record, a body too large or past the budget, one it cannot read) is
// recorded with its answer, the sender answered, and ok is false. The
// caller releases c.reserved either way.
func (s *Server) captureToForward(ctx context.Context, w http.ResponseWriter, r *http.Request, route Route, id string, maxBody int64, words forwardRefusals) (c captured, ok bool) {
	req, full, reserved, err := captureProxied(r, s.cfg.CaptureCap, maxBody, s.bodies, route.AccountID)
	received := limitStored(&req, s.cfg.MaxHeaders, s.cfg.MaxHeaderBytes)
	c = captured{req: req, full: full, received: received, reserved: reserved}
	var tooLarge *BodyTooLargeError
	switch {
	case errors.Is(err, ErrUnsupportedTarget):
		s.refuseTarget(ctx, w, r, route, err)
	case errors.As(err, &tooLarge):
		reason, body := words.tooLarge(tooLarge)
		s.recordAnswer(ctx, w, id, route, req, answer{status: http.StatusRequestEntityTooLarge, reason: reason, body: body})
		connguard.Linger(w, r.Body)
	case errors.Is(err, ErrBodyBudget):
		// The third line names the share that was full (the sender's,
		// its network's, the account's, the reserve's or the whole), never
		// what another holds.
		busy := words.busy
		var full *BodyBudgetError
		if errors.As(err, &full) {
			busy += "\nfull: " + full.Share + " share: " + full.Why()
		}
		s.recordAnswer(ctx, w, id, route, req, answer{
			status: http.StatusServiceUnavailable, reason: domain.ReasonBodyBudget,
			body: noAgentBody(busy), retryAfter: 1,
		})
		connguard.Linger(w, r.Body)
	case err != nil:
		s.recordAnswer(ctx, w, id, route, req, unreadableBody(err))
	default:
		return c, true
	}
	return c, false
}
