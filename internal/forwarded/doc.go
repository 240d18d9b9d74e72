// Package forwarded reads and writes the headers a reverse proxy uses to
// say whom it forwards for: Forwarded (RFC 7239) and the older
// X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host.
//
// The relay believes them only from peers it is told to trust
// (--trusted-proxies): Resolve turns a request into the sender's address
// and the protocol the sender used, and Handler makes every layer below
// see that address as the request's RemoteAddr, so per-client limits count
// senders, not the proxy.
package forwarded
