package agentcli

import (
	"crypto/x509"
	"errors"
	"net/http"
	"strings"

	"github.com/relayhq/relay/internal/forwarded"
)

// Host header choices for the local request (Options.HostHeader, --host-header).
const (
	HostRewrite  = "rewrite"  // the target's host:port, as a local server expects
	HostPreserve = "preserve" // the public host the sender called
)

// origin is what the sender called and who it is, as the relay recorded
// it: what a reverse proxy tells the process behind it.
type origin struct {
	Host   string // the public host, with its port when it has one
	Scheme string // https or http
	Sender string // the sender's address, "ip" or "ip:port"
}

// addForwardedHeaders tells the local process, as a reverse proxy does,
// where the request came from, so a framework that trusts its proxy
// rebuilds the public URL (URL-signed webhooks such as Twilio's verify
// against it): X-Forwarded-Host and X-Forwarded-Proto replace any the
// sender sent (the sender cannot speak for the relay), the sender's
// address is appended to X-Forwarded-For, and an element is appended to
// Forwarded (RFC 7239). A field the relay did not record is left out.
// These headers exist only on the way to the local process: the recorded
// delivery has the headers as they arrived.
func addForwardedHeaders(h http.Header, o origin, vals *fieldValues) {
	if o.Host != "" {
		h["X-Forwarded-Host"] = vals.one(o.Host)
	}
	if o.Scheme != "" {
		h["X-Forwarded-Proto"] = vals.one(o.Scheme)
	}
	var node string
	if o.Sender != "" {
		node = forwarded.Node(o.Sender)
		ip := strings.Trim(node, "[]")
		// A trusted proxy in front of the relay already named the sender
		// last; naming it twice would read as one more hop.
		if chain := forwarded.List(h["X-Forwarded-For"]); len(chain) == 0 || chain[len(chain)-1] != ip {
			appendValue(h, "X-Forwarded-For", ip, vals)
		}
	}
	if e := (forwarded.Element{For: node, Host: o.Host, Proto: o.Scheme}); e != (forwarded.Element{}) {
		appendValue(h, "Forwarded", e.String(), vals)
	}
}

// forwardedFields is how many fields addForwardedHeaders may set.
const forwardedFields = 4

// appendValue adds v to the comma-separated list in h's field name (a
// canonical key), as proxies do (one field line, so readers that take only
// the first line see the whole list).
func appendValue(h http.Header, name, v string, vals *fieldValues) {
	if prev := h[name]; len(prev) > 0 {
		v = strings.Join(prev, ", ") + ", " + v
	}
	h[name] = vals.one(v)
}

// tlsHint says what to do about a certificate the agent does not trust.
func tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) {
		return "the relay's certificate is signed by a CA this machine does not trust: give it with --ca-file"
	}
	return ""
}
