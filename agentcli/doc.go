// Package agentcli is the agent: it holds one graphql-transport-ws
// WebSocket to the relay, subscribes to the forward requests of one or
// more Endpoints on it (one forwardRequests subscription each), sends each
// request to the developer's local target, and reports the answer
// (mutation completeForward) over the same socket. `relay agent`,
// `relay listen` and the desktop agent all run it.
//
// As a library:
//
//	err := agentcli.Serve(ctx, agentcli.Options{
//		Server:    "http://localhost:8080",
//		Token:     token,
//		Endpoints: []agentcli.Route{{EndpointID: "ep1", Target: "3000"}, {EndpointID: "ep2", Target: "https://localhost:8443/api"}},
//		Insecure:  true,     // accept a self-signed certificate of an https target
//		Observer:  observer, // State(StateEvent) and Forwarded(ForwardEvent)
//	})
//
// Serve blocks until ctx ends (then it closes the WebSocket normally, so
// the relay records the disconnect, and returns nil), or the relay refuses
// the token or an Endpoint (*RefusedError, after a Refused state event), or
// the Options are unusable (*OptionsError). Network failures and relay
// restarts are Reconnecting events, retried with exponential backoff and
// jitter. TextObserver prints the events as the command line does;
// CommandLine holds the command line's flags; ParseTarget and ParseRoute
// read targets (3000, localhost:3000, http(s)://localhost:3000/prefix) and
// --endpoint values (ID or ID=TARGET).
//
// The local URL is always the agent's own target plus the recorded raw
// path; the server never chooses the host. The target stays on loopback
// (localhost or 127.0.0.1). Headers (hop-by-hop ones dropped) and body
// bytes pass unchanged both ways, redirects are returned rather than
// followed, and no transparent compression is negotiated.
//
// The agent pings the server every few seconds and treats a silent socket
// as dead.
package agentcli
