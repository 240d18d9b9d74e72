// Package connguard bounds what one client can hold on the relay's HTTP
// server: how many connections one address, and one network of addresses,
// keeps open, how many the relay holds in all below its descriptor limit,
// and how long a request body or a response may stall. The http.Server's
// own timeouts cover idle connections and headers; these cover what it
// cannot: caps per client, per network and in all, and a deadline that
// moves with progress rather than one for the whole request, so a slow but
// steady upload still succeeds.
package connguard
