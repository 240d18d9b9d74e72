package agentcli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/relayhq/relay/domain"
)

// The graphql-transport-ws subprotocol and its message types.
const (
	subprotocol = "graphql-transport-ws"

	msgConnectionInit = "connection_init"
	msgConnectionAck  = "connection_ack"
	msgPing           = "ping"
	msgPong           = "pong"
	msgSubscribe      = "subscribe"
	msgNext           = "next"
	msgError          = "error"
	msgComplete       = "complete"
)

// Close codes a graphql-transport-ws server uses to refuse a client.
const (
	closeUnauthorized = 4401
	closeForbidden    = 4403
)

const forwardRequestsQuery = `subscription($e: ID!){ forwardRequests(endpointId: $e){ attemptId deliveryId method path headers{name value} bodyBase64 } }`

// endpointQuery asks what the agent serves, to tell the user its public
// URL and whether the Endpoint forwards at all.
const endpointQuery = `query($e: ID!){ endpoint(id: $e){ url mode } }`

const completeForwardMutation = `mutation($input: CompleteForwardInput!){ completeForward(input: $input) }`

// wsMessage is one graphql-transport-ws frame.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// next is the payload of a received next message, decoded with the
	// frame (Payload is then empty).
	next *nextPayload
}

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
	} `json:"extensions"`
}

// forwardRequest is one item of the forwardRequests subscription.
type forwardRequest struct {
	AttemptID  string          `json:"attemptId"`
	DeliveryID string          `json:"deliveryId"`
	Method     string          `json:"method"`
	Path       string          `json:"path"`
	Headers    []domain.Header `json:"headers"`
	BodyBase64 string          `json:"bodyBase64"`
}

// endpointInfo is the answer to endpointQuery.
type endpointInfo struct {
	URL  string `json:"url"`
	Mode string `json:"mode"`
}

// completeInput is CompleteForwardInput.
type completeInput struct {
	AttemptID  string          `json:"attemptId"`
	Status     *int            `json:"status,omitempty"`
	Headers    []domain.Header `json:"headers"`
	BodyBase64 string          `json:"bodyBase64"`
	Error      string          `json:"error,omitempty"`
	DurationMs int64           `json:"durationMs"`
}

// refusedError is the server saying no: a bad token, an unknown Endpoint.
// The agent keeps retrying, since the Endpoint may be created later.
type refusedError struct{ reason string }

func (e *refusedError) Error() string { return e.reason }

// gqlErrorsErr turns GraphQL errors into an error; UNAUTHENTICATED and
// NOT_FOUND become a refusedError with a hint.
func gqlErrorsErr(errs []gqlError, endpoint string) error {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		switch e.Extensions.Code {
		case "UNAUTHENTICATED":
			return &refusedError{reason: fmt.Sprintf("not authenticated: %s (check --token)", e.Message)}
		case "NOT_FOUND":
			return &refusedError{reason: fmt.Sprintf("endpoint %q not found for this token: %s (check --endpoint)", endpoint, e.Message)}
		}
		if e.Extensions.Code != "" {
			msgs = append(msgs, fmt.Sprintf("%s (%s)", e.Message, e.Extensions.Code))
		} else {
			msgs = append(msgs, e.Message)
		}
	}
	return fmt.Errorf("graphql: %s", strings.Join(msgs, "; "))
}
