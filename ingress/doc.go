// Package ingress is the HTTP server behind public addresses
// (http://<id>.<domain>/). It routes by Host, captures every request
// losslessly (raw request target, every header value in order, body read
// through a limit), records what happened (through its Recorder) and only then
// answers the sender, so an answered request is never lost.
//
// Guest inspectors and Endpoints in LOG mode are answered 204 with an empty
// body. Endpoints in PROXY mode hand the request to a Forwarder (the tunnel)
// and pass the local process's status, headers and body back unchanged. The
// service itself never answers 404: unknown or expired addresses and missing
// agents get 503 with a body that begins "No agent for client".
//
// The package builds an http.Handler; listening, TLS and graceful drain
// (http.Server.Shutdown) belong to the caller. The caller's http.Server
// should set DisableGeneralOptionsHandler so that "OPTIONS *" reaches the
// handler and is recorded like any other request.
package ingress
