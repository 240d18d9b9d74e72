package ingress

import (
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/handshake"
)

// answer is what the service itself tells a sender, and why (recorded in
// DeliveryAnswered.Reason; empty for the normal 204).
type answer struct {
	status int
	reason string
	body   string
	// retryAfter, when set, is sent as Retry-After (seconds).
	retryAfter int
	// own is an answer the address is configured to give (its answer or a
	// handshake): headers and body are sent exactly as set.
	own     bool
	headers []domain.Header
}

var answerNoContent = answer{status: http.StatusNoContent}

var answerExpired = answer{status: http.StatusServiceUnavailable, reason: "expired", body: noAgentBody("address expired")}

func noAgentBody(why string) string { return "No agent for client\n" + why + "\n" }

func (a answer) write(w http.ResponseWriter) {
	if a.own {
		writeOwn(w, a)
		return
	}
	if a.status == http.StatusNoContent {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if a.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(a.retryAfter))
	}
	writeText(w, a.status, a.body)
}

// writeOwn sends an address's own answer: its headers as set, and neither a
// Content-Type nor a Date the address did not set. A Set-Cookie an answer
// stored before such answers were refused is not sent.
func writeOwn(w http.ResponseWriter, a answer) {
	h := w.Header()
	for _, hd := range a.headers {
		if domain.RefusedAnswerHeader(hd.Name) {
			continue
		}
		h.Add(hd.Name, hd.Value)
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil // a nil value stops net/http from sniffing one
	}
	bodyless := a.status == http.StatusNoContent || a.status == http.StatusNotModified
	if !bodyless {
		h.Set("Content-Length", strconv.Itoa(len(a.body)))
	}
	w.WriteHeader(a.status)
	if !bodyless {
		_, _ = io.WriteString(w, a.body) // the sender may be gone; nothing to do then
	}
}

// ownAnswer is what an inspector or a LOG Endpoint answers req: a
// handshake's answer when req is one the address enables, else its
// configured answer, else 204. A handshake's secret in the request target
// is redacted from req, which is then recorded.
//
// A request that looks like a handshake the address does not enable is
// answered the same, and recorded with a note of it (the history's hint
// says how to enable it): a provider waiting for its challenge back would
// otherwise fail with nothing in the history to say why.
func (s *Server) ownAnswer(route Route, req *domain.CapturedRequest) answer {
	if a, ok := s.handshake(route, req, req.Body); ok {
		return a
	}
	a := configuredAnswer(route)
	if h, ok := handshake.Detect(handshake.Request{Method: req.Method, Target: req.Target, Body: req.Body}); ok {
		a.reason = domain.WithUnansweredHandshake(a.reason, h)
	}
	return a
}

// handshake answers req when it is a handshake the address enables, and
// redacts from req what the relay must not record (Meta's verify token).
func (s *Server) handshake(route Route, req *domain.CapturedRequest, body []byte) (answer, bool) {
	r, ok := handshake.Answer(s.deps.Secrets, route.Handshakes, handshake.Request{Method: req.Method, Target: req.Target, Body: body})
	if !ok {
		return answer{}, false
	}
	if len(r.Redact) > 0 {
		req.Target = handshake.RedactQuery(req.Target, r.Redact)
		req.RedactedQuery = r.Redact
	}
	return answer{status: r.Status, reason: r.Reason, own: true, headers: r.Headers, body: string(r.Body)}, true
}

// configuredAnswer is the address's configured answer, else 204: what a
// LOG Endpoint answers, and a PROXY Endpoint's delivery that no listener's
// filters matched.
func configuredAnswer(route Route) answer {
	if a := route.Answer; a != nil {
		return answer{status: a.Status, reason: domain.ReasonConfiguredAnswer, own: true, headers: a.Headers, body: string(a.Body)}
	}
	return answerNoContent
}

// writeNoAgent answers 503 with the body every 503 of the service has.
func writeNoAgent(w http.ResponseWriter, why string) {
	writeText(w, http.StatusServiceUnavailable, noAgentBody(why))
}

func writeText(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body) // the sender may be gone; nothing to do then
}

// writeOutcome passes the local process's answer to the sender unchanged:
// status, every header value in order (hop-by-hop ones dropped) and the body
// bytes. net/http must not add a Content-Type the local process did not
// send, and the length is the body's, whatever the local framing was.
func writeOutcome(w http.ResponseWriter, method string, o domain.ForwardOutcome) {
	h := w.Header()
	clear(h)
	// The fields are filtered on the stack (up to 32) and their values
	// share one array, with room for Content-Length: one allocation for
	// the answer's header values instead of one per field.
	var kept [32]domain.Header
	fields := domain.AppendEndToEnd(kept[:0], o.Headers)
	values := make([]string, 0, len(fields)+1)
	for _, hd := range fields {
		k := http.CanonicalHeaderKey(hd.Name)
		if vs := h[k]; len(vs) > 0 {
			h[k] = append(vs, hd.Value) // a repeated field: a copy of its own
			continue
		}
		values = append(values, hd.Value)
		h[k] = values[len(values)-1 : len(values) : len(values)]
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil // a nil value stops net/http from sniffing one
	}
	if _, ok := h["Date"]; !ok {
		h["Date"] = nil // nor adding one the local process did not send
	}
	// HEAD answers and 204/304 carry no body; their Content-Length (if any)
	// describes the representation and passes as sent.
	bodyless := method == http.MethodHead || o.Status == http.StatusNoContent || o.Status == http.StatusNotModified
	if !bodyless {
		values = append(values, strconv.Itoa(len(o.Body)))
		h["Content-Length"] = values[len(values)-1 : len(values) : len(values)]
	}
	w.WriteHeader(o.Status)
	if !bodyless {
		_, _ = w.Write(o.Body) // the sender may be gone; nothing to do then
	}
}

// failureAnswer is the service's own answer when the local target gave none.
// The sender reads the outcome's Failure, a stable text that names the
// target; the detail (which may name local sockets) stays in the attempt's
// recorded error for the Endpoint's owner.
func failureAnswer(o domain.ForwardOutcome) answer {
	if o.Status == http.StatusServiceUnavailable {
		return answer{status: o.Status, reason: o.Error, body: noAgentBody(unavailableReason(o.Error))}
	}
	status := o.Status
	if status < 400 || status > 599 {
		status = http.StatusBadGateway
	}
	text := o.Failure
	if text == "" {
		text = "no answer from the local target"
	}
	return answer{status: status, reason: o.Error, body: http.StatusText(status) + ": " + text + "\n"}
}

// unavailableReason is the second line of a 503 the relay decided: its
// short reason ("agent disconnected", "relay node lost"), without what is
// only for the Endpoint's owner after it (a node's name in parentheses).
func unavailableReason(reason string) string {
	if i := strings.Index(reason, " ("); i >= 0 {
		reason = reason[:i]
	}
	if reason == "" {
		return "no agent connected"
	}
	return reason
}
