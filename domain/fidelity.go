package domain

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/textproto"
	"slices"
	"strings"
	"unicode/utf8"
)

// A fidelity receipt is an agent's account of the request it handed to the
// local process: SHA-256 digests of three canonical parts. The relay keeps
// the same digests of the request it sent the agent; the attempt's
// fidelity is whether they match, and which parts do not. docs/evidence.md
// gives the canonical forms for anyone recomputing them:
//
//   - request line: the method, one space, the request target (path and
//     query, byte for byte, without the agent's own target prefix);
//   - headers: each field the agent did not legitimately add or rewrite
//     (see fidelityExcluded) as "name: value\n", the name in lower case,
//     fields stably sorted by name, so fields of one name keep their order
//     (HTTP gives meaning to that order only);
//   - body: the bytes, as they are.

// Parts of a request a fidelity receipt covers, in the order they are named.
const (
	PartRequestLine = "request_line"
	PartHeaders     = "headers"
	PartBody        = "body"
)

// FidelityDigests are the SHA-256 digests, lower-case hex, of a request's
// three canonical parts.
type FidelityDigests struct {
	RequestLine string `json:"request_line"`
	Headers     string `json:"headers"`
	Body        string `json:"body"`
}

// Fidelity is what an attempt records of its receipt: the agent's digests
// of what it handed to the local process, and the relay's of what it sent.
type Fidelity struct {
	Agent FidelityDigests `json:"agent"`
	Relay FidelityDigests `json:"relay"`
}

// Differences names the parts whose digests differ, in part order; none
// when the agent handed over what the relay sent.
func (f Fidelity) Differences() []string {
	var out []string
	if f.Agent.RequestLine != f.Relay.RequestLine {
		out = append(out, PartRequestLine)
	}
	if f.Agent.Headers != f.Relay.Headers {
		out = append(out, PartHeaders)
	}
	if f.Agent.Body != f.Relay.Body {
		out = append(out, PartBody)
	}
	return out
}

// DigestRequest computes the digests of a request's canonical parts. It
// runs for every forward on both sides (the relay's record, the agent's
// receipt): the canonical forms are written into one buffer, on the stack
// for a typical request, and the three digests share one string.
func DigestRequest(method, target string, headers []Header, body []byte) FidelityDigests {
	var buf [1024]byte
	b := append(append(append(buf[:0], method...), ' '), target...)
	line := sha256.Sum256(b)
	b = appendCanonicalHeaders(b[:0], headers)
	fields := sha256.Sum256(b)
	content := sha256.Sum256(body)
	const n = 2 * sha256.Size
	var hexed [3 * n]byte
	hex.Encode(hexed[:n], line[:])
	hex.Encode(hexed[n:2*n], fields[:])
	hex.Encode(hexed[2*n:], content[:])
	all := string(hexed[:])
	return FidelityDigests{RequestLine: all[:n], Headers: all[n : 2*n], Body: all[2*n:]}
}

// CanonicalRequestLine is the request line as a fidelity receipt digests
// it: method, a space, target; no HTTP version (the agent's client
// chooses it) and no line end.
func CanonicalRequestLine(method, target string) []byte {
	return []byte(method + " " + target)
}

// CanonicalHeaders is the header block as a fidelity receipt digests it:
// the fields fidelityExcluded keeps, "name: value\n" each, the name in
// lower case, stably sorted by name. The relay records names as the sender
// spelled them and agents' HTTP clients rewrite their case and order
// between names; neither carries meaning in HTTP, the order of one name's
// values does and is kept.
func CanonicalHeaders(headers []Header) []byte {
	return appendCanonicalHeaders([]byte{}, headers)
}

// appendCanonicalHeaders appends CanonicalHeaders(headers) to dst. It
// sorts the indexes of the kept fields and lowers names as it writes them,
// so a typical request's block costs no allocation besides dst's.
func appendCanonicalHeaders(dst []byte, headers []Header) []byte {
	var small [32]int
	kept := fidelityKept(small[:0], headers)
	slices.SortStableFunc(kept, func(a, b int) int { return compareLower(headers[a].Name, headers[b].Name) })
	for _, i := range kept {
		dst = appendLower(dst, headers[i].Name)
		dst = append(dst, ": "...)
		dst = append(dst, headers[i].Value...)
		dst = append(dst, '\n')
	}
	return dst
}

// compareLower is strings.Compare of a and b in lower case (strings.ToLower),
// without building them when both are ASCII, as field names are.
func compareLower(a, b string) int {
	if !isASCII(a) || !isASCII(b) {
		return strings.Compare(strings.ToLower(a), strings.ToLower(b))
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if x, y := lowerASCII(a[i]), lowerASCII(b[i]); x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return cmp.Compare(len(a), len(b))
}

// appendLower appends strings.ToLower(s) to dst.
func appendLower(dst []byte, s string) []byte {
	if !isASCII(s) {
		return append(dst, strings.ToLower(s)...)
	}
	for i := 0; i < len(s); i++ {
		dst = append(dst, lowerASCII(s[i]))
	}
	return dst
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// FidelityHeaders returns headers without the fields a fidelity receipt
// leaves out on both sides: those an agent legitimately adds or rewrites.
// They are the hop-by-hop fields (and those Connection names), which the
// relay does not pass on; Host and Content-Length, which the agent sets
// from its own target and the body; Forwarded and X-Forwarded-For, -Host
// and -Proto, which the agent extends with the sender's origin; and a
// User-Agent with an empty value, which the agent sets only so its HTTP
// client sends none of its own.
func FidelityHeaders(headers []Header) []Header {
	kept := fidelityKept(nil, headers)
	out := make([]Header, 0, len(kept))
	for _, i := range kept {
		out = append(out, headers[i])
	}
	return out
}

// fidelityKept appends to dst the indexes of the fields of headers that
// FidelityHeaders keeps, in order.
func fidelityKept(dst []int, headers []Header) []int {
	named := map[string]bool{}
	addConnectionNames(named, headers)
	for i, h := range headers {
		k := textproto.CanonicalMIMEHeaderKey(h.Name)
		if hopByHop[k] || named[k] || fidelityExcluded[k] || (k == "User-Agent" && h.Value == "") {
			continue
		}
		dst = append(dst, i)
	}
	return dst
}

// fidelityExcluded are the fields besides hop-by-hop ones that
// FidelityHeaders leaves out.
var fidelityExcluded = map[string]bool{
	"Host": true, "Content-Length": true,
	"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true,
}

// Check refuses digests that are not SHA-256 in lower-case hex, naming
// the part at fault under field (the report's field name).
func (d FidelityDigests) Check(field string) error {
	for _, p := range []struct{ name, v string }{
		{"requestLine", d.RequestLine}, {"headers", d.Headers}, {"body", d.Body},
	} {
		if !isDigest(p.v) {
			return &InvalidInputError{Field: field + "." + p.name,
				Reason: fmt.Sprintf("must be a SHA-256 digest in 64 lower-case hex digits, got %q", truncate(p.v, 80))}
		}
	}
	return nil
}

func isDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
