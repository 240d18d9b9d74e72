// Package gqlws is the vocabulary of graphql-transport-ws, the WebSocket
// protocol of GraphQL over which the console, the agents and the CLI talk
// to the relay: the subprotocol's name, its message types, the frame and
// the close codes. The server (graph/wsgql) and both clients (agentcli,
// apiclient) speak it from this one declaration. Standard library only.
package gqlws

import "encoding/json"

// Subprotocol is the WebSocket subprotocol both sides must agree on.
const Subprotocol = "graphql-transport-ws"

// Message types.
const (
	ConnectionInit = "connection_init"
	ConnectionAck  = "connection_ack"
	Ping           = "ping"
	Pong           = "pong"
	Subscribe      = "subscribe"
	Next           = "next"
	Error          = "error"
	Complete       = "complete"
)

// Close codes the protocol gives a server to end a socket with.
const (
	CloseBadRequest        = 4400 // invalid message or payload
	CloseUnauthorized      = 4401 // subscribe before connection_ack
	CloseForbidden         = 4403 // connection_init refused (a bad token)
	CloseBadSubprotocol    = 4406 // the client did not offer Subprotocol
	CloseInitTimeout       = 4408 // no connection_init in time
	CloseSubscriberExists  = 4409 // subscribe with the id of a running operation
	CloseTooManyInitialise = 4429 // a second connection_init
)

// Message is one frame, in either direction.
type Message struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// SubscribePayload is the payload of a subscribe message; its optional
// fields may be null.
type SubscribePayload struct {
	Query         *string        `json:"query"`
	OperationName *string        `json:"operationName"`
	Variables     map[string]any `json:"variables"`
	Extensions    map[string]any `json:"extensions"`
}
