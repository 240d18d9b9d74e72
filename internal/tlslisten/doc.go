// Package tlslisten serves TLS and plain HTTP on one port: Listener looks
// at the first byte of each connection (a TLS handshake begins with 0x16)
// and hands net/http either a finished TLS connection or the plain one, so
// a plain-HTTP request to the TLS port reaches the relay's handler (which
// answers it with the wrong-protocol 503) instead of Go's TLS error.
//
// Certs holds the certificate behind tls.Config.GetCertificate and swaps
// it atomically when its files change or on SIGHUP: new handshakes get the
// new certificate, open connections keep theirs.
package tlslisten
