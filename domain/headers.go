package domain

import (
	"net/textproto"
	"strings"
)

// hopByHop are the connection-specific headers of RFC 9110 §7.6.1 that a
// relay must not pass on, in both directions. Proxy-Authenticate and
// Proxy-Authorization are there too, as in Go's ReverseProxy: RFC 9110
// §11.7 scopes them to the next hop (a proxy and its client), and the relay
// is not the proxy a sender authenticates to, nor is the local process the
// sender's proxy.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true,
}

// StripHopByHop returns headers without hop-by-hop fields, including any
// header named in Connection. Repeats and their order are kept.
func StripHopByHop(headers []Header) []Header {
	return AppendEndToEnd(make([]Header, 0, len(headers)), headers)
}

// AppendEndToEnd appends to dst the fields of headers StripHopByHop keeps.
// dst may be headers[:0], to filter in place: fields only move towards
// the front.
func AppendEndToEnd(dst, headers []Header) []Header {
	named := map[string]bool{}
	addConnectionNames(named, headers)
	for _, h := range headers {
		k := textproto.CanonicalMIMEHeaderKey(h.Name)
		if hopByHop[k] || named[k] {
			continue
		}
		dst = append(dst, h)
	}
	return dst
}

// addConnectionNames adds to named the canonical names the Connection
// fields of headers list.
func addConnectionNames(named map[string]bool, headers []Header) {
	for _, h := range headers {
		if textproto.CanonicalMIMEHeaderKey(h.Name) != "Connection" {
			continue
		}
		for list := h.Value; list != ""; {
			var f string
			f, list, _ = strings.Cut(list, ",")
			if f = strings.TrimSpace(f); f != "" {
				named[textproto.CanonicalMIMEHeaderKey(f)] = true
			}
		}
	}
}
