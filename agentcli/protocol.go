package agentcli

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/agentwire"
	"github.com/relayhq/relay/internal/binwire"
)

// forwardRequestsQuery names the agent's local target ($t, host:port) for
// the relay's record of the session; each Endpoint may have its own.
const forwardRequestsQuery = `subscription($e: ID!, $t: String, $p: Boolean, $f: [FilterInput!]){ forwardRequests(endpointId: $e, target: $t, primary: $p, filters: $f){ attemptId deliveryId method path pathBase64 headers{name value valueBase64} bodyBase64 host scheme remoteAddress } }`

// endpointQuery asks what the agent serves before it subscribes: it tells a
// bad token or an unknown Endpoint apart from a working connection, gives
// the public URL, whether the Endpoint forwards at all, and how many agents
// already serve it.
const endpointQuery = `query($e: ID!){ endpoint(id: $e){ name url mode target agentCount } }`

// roleQuery asks, over the agent's own connection, which of the
// Endpoint's listeners are this connection's and which is primary.
const roleQuery = `query($e: ID!){ endpoint(id: $e){ listeners{ primary mine } } }`

const completeForwardMutation = `mutation($input: CompleteForwardInput!){ completeForward(input: $input) }`

// wsMessage is one graphql-transport-ws frame.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// next is the payload of a received next message, decoded with the
	// frame (Payload is then empty).
	next *nextPayload
	// frame is a received binary frame (Type binaryFrame).
	frame []byte
	// reused: frame is the session's read buffer, which the next read
	// overwrites (see session.read).
	reused bool
}

// binaryFrame is the Type of a wsMessage that holds an agentwire frame.
const binaryFrame = "binary"

// nextPayload is the payload of a next message: a forwardRequests item or
// the result of a completeForward.
type nextPayload struct {
	Data struct {
		ForwardRequests *forwardRequest `json:"forwardRequests"`
		Endpoint        *endpointInfo   `json:"endpoint"`
	} `json:"data"`
	Errors []gqlError `json:"errors"`
}

// nextFrame is a received frame decoded in one pass as a next message. A
// forward request is mostly its base64 body; decoding the frame, then its
// payload, then its data as separate JSON documents scanned it six times.
type nextFrame struct {
	ID      string      `json:"id"`
	Type    string      `json:"type"`
	Payload nextPayload `json:"payload"`
}

// gqlRequest is the payload of a subscribe message.
type gqlRequest struct {
	Query     string         `json:"query"`
	Variables map[string]any `json:"variables,omitempty"`
}

// gqlError is a GraphQL error with its machine-readable code.
type gqlError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code string `json:"code"`
		// RetryAfterSeconds comes with RATE_LIMITED.
		RetryAfterSeconds int `json:"retryAfterSeconds"`
	} `json:"extensions"`
}

// forwardRequest is one item of the forwardRequests subscription.
type forwardRequest struct {
	AttemptID  string       `json:"attemptId"`
	DeliveryID string       `json:"deliveryId"`
	Method     string       `json:"method"`
	Path       string       `json:"path"`
	PathBase64 *string      `json:"pathBase64"`
	Headers    []wireHeader `json:"headers"`
	BodyBase64 string       `json:"bodyBase64"`
	Host       string       `json:"host"`
	Scheme     string       `json:"scheme"`
	Remote     *string      `json:"remoteAddress"`
}

// wireHeader is a Header or HeaderInput of the API. GraphQL strings are
// UTF-8, so a value that is not travels in ValueBase64 as well, which wins.
type wireHeader struct {
	Name        string  `json:"name"`
	Value       string  `json:"value"`
	ValueBase64 *string `json:"valueBase64,omitempty"`
}

// MaxForwardHeaders bounds the header fields of a forward the agent takes
// from the relay, on either path. A relay forwards at most the request's
// header lines (ingress.MaxHeaderLines, 1 000), an edit's (100 set) and
// the few it adds; the bound leaves eight times room. Without it a binary
// frame of MaxRelayMessage bytes declared up to 11 M three-byte headers,
// 32 bytes each decoded: 358 MiB allocated before the agent looked at
// the request.
const MaxForwardHeaders = 8 << 10

// TooManyHeadersError is a forward with more header fields than
// MaxForwardHeaders.
type TooManyHeadersError struct{ Headers uint64 }

func (e *TooManyHeadersError) Error() string {
	return fmt.Sprintf("a forward of %d header fields, more than the %d the agent takes from a relay", e.Headers, MaxForwardHeaders)
}

// decodeForward decodes a forward frame whose count of headers is within
// MaxForwardHeaders, read before anything is decoded.
func decodeForward(frame []byte) (agentwire.Forward, error) {
	r := binwire.NewReader(frame)
	r.Expect(agentwire.KindForward)
	for range 5 { // operation, attempt, delivery, method, target
		r.Bytes()
	}
	if n := r.Uint(); n > MaxForwardHeaders {
		return agentwire.Forward{}, fmt.Errorf("forward frame: %w", &TooManyHeadersError{Headers: n})
	}
	return agentwire.DecodeForward(frame)
}

// local is fr as the request to send to the local target, with the exact
// bytes of its target and header values.
func (fr forwardRequest) local() (localRequest, error) {
	if len(fr.Headers) > MaxForwardHeaders {
		return localRequest{}, &TooManyHeadersError{Headers: uint64(len(fr.Headers))}
	}
	path, err := exact(fr.Path, fr.PathBase64)
	if err != nil {
		return localRequest{}, fmt.Errorf("request target: %w", err)
	}
	headers, err := fromWireHeaders(fr.Headers)
	if err != nil {
		return localRequest{}, err
	}
	body, err := base64.StdEncoding.DecodeString(fr.BodyBase64)
	if err != nil {
		return localRequest{}, fmt.Errorf("undecodable request body: %w", err)
	}
	o := origin{Host: fr.Host, Scheme: fr.Scheme}
	if fr.Remote != nil {
		o.Sender = *fr.Remote
	}
	return localRequest{Method: fr.Method, Path: path, Headers: headers, Body: body, Origin: o}, nil
}

// exact is text, or the bytes of raw when the server sent them.
func exact(text string, raw *string) (string, error) {
	if raw == nil {
		return text, nil
	}
	b, err := base64.StdEncoding.DecodeString(*raw)
	if err != nil {
		return "", fmt.Errorf("undecodable base64 %q: %w", *raw, err)
	}
	return string(b), nil
}

func fromWireHeaders(hs []wireHeader) ([]domain.Header, error) {
	out := make([]domain.Header, 0, len(hs))
	for _, h := range hs {
		v, err := exact(h.Value, h.ValueBase64)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", h.Name, err)
		}
		out = append(out, domain.Header{Name: h.Name, Value: v})
	}
	return out, nil
}

func toWireHeaders(hs []domain.Header) []wireHeader {
	out := make([]wireHeader, 0, len(hs))
	for _, h := range hs {
		w := wireHeader{Name: h.Name, Value: h.Value}
		if !utf8.ValidString(h.Value) {
			b := base64.StdEncoding.EncodeToString([]byte(h.Value))
			w.ValueBase64 = &b
		}
		out = append(out, w)
	}
	return out
}

// endpointInfo is the answer to endpointQuery.
type endpointInfo struct {
	Name       string  `json:"name"`
	URL        string  `json:"url"`
	Mode       string  `json:"mode"`
	Target     *string `json:"target"`
	AgentCount int     `json:"agentCount"`
	Listeners  []struct {
		Primary bool `json:"primary"`
		Mine    bool `json:"mine"`
	} `json:"listeners"`
}

// report is the agent's report of one attempt: the local answer, or why
// there is none. A timed-out target keeps its 504 (too slow, not
// unreachable), a request the agent refused its 400 (a dot-segment under
// the target's prefix); other failures give no status.
func report(attemptID string, res localResult) agentwire.Complete {
	c := agentwire.Complete{AttemptID: attemptID, Headers: res.Headers, Body: res.Body, DurationMs: res.Duration.Milliseconds(), Signature: res.Signature, Receipt: res.Receipt}
	if res.Err != nil {
		c.Error, c.Failure = res.Err.Error(), res.Failure
		if res.Status == http.StatusGatewayTimeout || res.Status == http.StatusBadRequest {
			c.Status = res.Status
		}
	} else {
		c.Status = res.Status
	}
	return c
}

// toCompleteInput is a report as completeForward's input.
func toCompleteInput(c agentwire.Complete) completeInput {
	in := completeInput{AttemptID: c.AttemptID, Headers: toWireHeaders(c.Headers),
		BodyBase64: base64.StdEncoding.EncodeToString(c.Body), Error: c.Error, Failure: c.Failure, DurationMs: c.DurationMs, Signature: c.Signature}
	if r := c.Receipt; r != nil {
		in.Receipt = &receiptInput{RequestLine: r.RequestLine, Headers: r.Headers, Body: r.Body}
	}
	if c.Status != 0 {
		in.Status = &c.Status
	}
	return in
}

// completeInput is CompleteForwardInput.
type completeInput struct {
	AttemptID  string       `json:"attemptId"`
	Status     *int         `json:"status,omitempty"`
	Headers    []wireHeader `json:"headers"`
	BodyBase64 string       `json:"bodyBase64"`
	Error      string       `json:"error,omitempty"`
	Failure    string       `json:"failure,omitempty"`
	DurationMs int64        `json:"durationMs"`
	Signature  string       `json:"signature,omitempty"`
	// Receipt is omitted when there is none, so relays older than
	// receipts take the report.
	Receipt *receiptInput `json:"receipt,omitempty"`
}

// receiptInput is FidelityReceiptInput.
type receiptInput struct {
	RequestLine string `json:"requestLine"`
	Headers     string `json:"headers"`
	Body        string `json:"body"`
}

// gqlErrorsErr turns GraphQL errors of the agent's connection (the
// Endpoint query and the forwardRequests subscription) into an error;
// UNAUTHENTICATED, FORBIDDEN (the relay's admin token, which acts for no
// account) and NOT_FOUND become a *RefusedError with a hint,
// TOO_MANY_SESSIONS and RATE_LIMITED a *heldOffError.
func gqlErrorsErr(errs []gqlError, endpoint string) error {
	for _, e := range errs {
		switch e.Extensions.Code {
		case "UNAUTHENTICATED":
			return &RefusedError{reason: fmt.Sprintf("not authenticated: %s (check --token)", e.Message)}
		case "FORBIDDEN":
			return &RefusedError{reason: fmt.Sprintf("%s (FORBIDDEN; check --token)", e.Message)}
		case "NOT_FOUND":
			// The relay's message is "not found"; what a user gets wrong
			// is giving the Endpoint's name, which relay listen takes.
			return &RefusedError{reason: fmt.Sprintf("endpoint %q not found for this token (NOT_FOUND): --endpoint takes an Endpoint's id, as relay endpoints list shows it (relay listen takes names)", endpoint)}
		case "TOO_MANY_SESSIONS":
			// The relay's words name the cap and say to end a listener;
			// the agent adds where to see them.
			return &heldOffError{full: true, reason: fmt.Sprintf("%s (TOO_MANY_SESSIONS; `relay endpoints show %s` lists the Endpoint's listeners)", e.Message, endpoint)}
		case "RATE_LIMITED":
			return &heldOffError{reason: e.Message + " (RATE_LIMITED)", retryAfter: time.Duration(e.Extensions.RetryAfterSeconds) * time.Second}
		}
	}
	return plainGQLErr(errs)
}

func plainGQLErr(errs []gqlError) error {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		if e.Extensions.Code != "" {
			msgs = append(msgs, fmt.Sprintf("%s (%s)", e.Message, e.Extensions.Code))
		} else {
			msgs = append(msgs, e.Message)
		}
	}
	return fmt.Errorf("graphql: %s", strings.Join(msgs, "; "))
}

// errAttemptGone is completeForward refused with NOT_FOUND: the relay no
// longer waits for the attempt, because it already answered the sender
// (504 at --forward-timeout) or the connection that took the work ended.
var errAttemptGone = errors.New("the relay no longer waits for this answer (it already answered the sender, usually 504 after --forward-timeout); the answer was not passed on")

// completeErr turns GraphQL errors of a completeForward into an error.
func completeErr(errs []gqlError) error {
	for _, e := range errs {
		if e.Extensions.Code == "NOT_FOUND" {
			return errAttemptGone
		}
	}
	return plainGQLErr(errs)
}
