// Package agentcli is the agent: it holds one graphql-transport-ws
// WebSocket to the relay, receives the forward requests of one Endpoint
// (subscription forwardRequests), sends each to the developer's local
// target, and reports the answer (mutation completeForward) over the same
// socket.
//
// The local URL is always http://<--target> plus the recorded raw path; the
// server never chooses the host. Headers (hop-by-hop ones dropped) and body
// bytes pass unchanged both ways, redirects are returned rather than
// followed, and no transparent compression is negotiated.
//
// The agent pings the server every few seconds and treats a silent socket
// as dead; it reconnects after any drop with exponential backoff and jitter,
// including after refusals (bad token, unknown Endpoint), because the
// Endpoint may be created later. Only bad flags end Run with an error.
package agentcli
