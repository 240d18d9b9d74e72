package domain

import (
	"fmt"
	"net/textproto"
	"slices"
	"strings"
)

// An address's own answer:
//  1. A LOG Endpoint or an inspector answers its configured Answer (204 with
//     no header and no body when none is set); a PROXY Endpoint answers what
//     its local process answers.
//  2. An Answer's status is 200 to 599; 204 and 304 carry no body.
//  3. At most MaxAnswerHeaders headers of at most MaxAnswerHeaderBytes in
//     all; names are HTTP tokens, values HTTP field values; the framing
//     (Content-Length, Transfer-Encoding) and hop-by-hop headers are the
//     relay's own.
//     Set-Cookie is refused (RefusedAnswerHeader).
//  4. A body is at most MaxAnswerBody bytes.
//  5. Handshakes are answered before the configured Answer, only those
//     enabled; Meta needs a verify token and Zoom a secret token.
//  6. An Answer equal to the default (204, nothing else) and Handshakes
//     with nothing set are stored as none.

// Limits of a configured answer: it is held by every node in memory and
// sent on every request, so it stays small.
const (
	MaxAnswerBody        = 64 << 10
	MaxAnswerHeaders     = 32
	MaxAnswerHeaderBytes = 8 << 10
	// MaxHandshakeSecret bounds the Meta verify token and the Zoom secret.
	MaxHandshakeSecret = 256
)

// Answer is what an address answers by itself.
type Answer struct {
	Status  int      `json:"status"`
	Headers []Header `json:"headers,omitempty"`
	Body    []byte   `json:"body,omitempty"`
}

// DefaultAnswer is what an address answers when nothing is configured.
var DefaultAnswer = Answer{Status: 204}

// Validate checks the answer's invariants; the error names the field.
func (a Answer) Validate() error {
	if a.Status < 200 || a.Status > 599 {
		return &InvalidInputError{Field: "answer.status", Reason: fmt.Sprintf("%d is not a status from 200 to 599", a.Status)}
	}
	if len(a.Body) > MaxAnswerBody {
		return &InvalidInputError{Field: "answer.body", Reason: fmt.Sprintf("%d bytes is over the limit of %d bytes (64 KiB)", len(a.Body), MaxAnswerBody)}
	}
	if len(a.Body) > 0 && (a.Status == 204 || a.Status == 304) {
		return &InvalidInputError{Field: "answer.body", Reason: fmt.Sprintf("status %d carries no body", a.Status)}
	}
	if len(a.Headers) > MaxAnswerHeaders {
		return &InvalidInputError{Field: "answer.headers", Reason: fmt.Sprintf("%d headers is over the limit of %d", len(a.Headers), MaxAnswerHeaders)}
	}
	size := 0
	for i, h := range a.Headers {
		field := fmt.Sprintf("answer.headers[%d]", i)
		if !IsToken(h.Name) {
			return &InvalidInputError{Field: field + ".name", Reason: fmt.Sprintf("%q is not a valid header name", h.Name)}
		}
		if !IsFieldValue(h.Value) {
			return &InvalidInputError{Field: field + ".value", Reason: fmt.Sprintf("the value of %s holds a control character or surrounding space", h.Name)}
		}
		if k := textproto.CanonicalMIMEHeaderKey(h.Name); hopByHop[k] || k == "Content-Length" {
			return &InvalidInputError{Field: field + ".name", Reason: fmt.Sprintf("%s is set by the relay itself", k)}
		}
		if RefusedAnswerHeader(h.Name) {
			return &InvalidInputError{Field: field + ".name", Reason: fmt.Sprintf("%s is refused: an address's answer goes to whoever sends to its public URL, and a cookie set there could reach the relay's console or other addresses under the same domain", h.Name)}
		}
		size += len(h.Name) + len(h.Value)
	}
	if size > MaxAnswerHeaderBytes {
		return &InvalidInputError{Field: "answer.headers", Reason: fmt.Sprintf("%d bytes of names and values is over the limit of %d", size, MaxAnswerHeaderBytes)}
	}
	return nil
}

// RefusedAnswerHeader tells whether a header may never be in a configured
// answer: Set-Cookie (and the obsolete Set-Cookie2). An address's host is
// a stranger's to send to, and a cookie it sets could be scoped to the
// parent domain the console and every other address share.
func RefusedAnswerHeader(name string) bool {
	return strings.EqualFold(name, "Set-Cookie") || strings.EqualFold(name, "Set-Cookie2")
}

// IsFieldValue reports whether v is an HTTP field value (RFC 9110 §5.5):
// visible characters, spaces and tabs inside, obs-text allowed.
func IsFieldValue(v string) bool {
	if v != strings.Trim(v, " \t") {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// Handshake names a provider's verification request the relay can answer.
type Handshake string

// The handshakes the relay knows, each from its provider's documentation
// (docs/answers.md).
const (
	HandshakeSlack   Handshake = "slack"
	HandshakeMeta    Handshake = "meta"
	HandshakeGraph   Handshake = "msgraph"
	HandshakeDropbox Handshake = "dropbox"
	HandshakeZoom    Handshake = "zoom"
)

// KnownHandshakes lists every handshake, in the order the relay tries them.
var KnownHandshakes = []Handshake{HandshakeSlack, HandshakeMeta, HandshakeGraph, HandshakeDropbox, HandshakeZoom}

// WithUnansweredHandshake is reason with the note that the request looked
// like h's verification request, which the address does not answer
// (ReasonUnansweredHandshake).
func WithUnansweredHandshake(reason string, h Handshake) string {
	if reason == "" {
		return ReasonUnansweredHandshake + string(h)
	}
	return reason + "; " + ReasonUnansweredHandshake + string(h)
}

// UnansweredHandshake splits a recorded reason into the reason of the
// answer given and the handshake the request looked like, "" when the
// reason notes none (WithUnansweredHandshake).
func UnansweredHandshake(reason string) (base string, h Handshake) {
	if name, ok := strings.CutPrefix(reason, ReasonUnansweredHandshake); ok {
		return "", Handshake(name)
	}
	i := strings.LastIndex(reason, "; "+ReasonUnansweredHandshake)
	if i < 0 {
		return reason, ""
	}
	return reason[:i], Handshake(reason[i+len("; "+ReasonUnansweredHandshake):])
}

// HandshakeSide says who answers handshakes to a PROXY Endpoint.
type HandshakeSide string

const (
	// HandshakesLocal: the local process answers them, as any request.
	HandshakesLocal HandshakeSide = "LOCAL"
	// HandshakesRelay: the relay answers them and does not forward them.
	HandshakesRelay HandshakeSide = "RELAY"
)

// Handshakes are the verification requests an address answers itself.
type Handshakes struct {
	Enabled []Handshake `json:"enabled,omitempty"`
	// MetaVerifyToken is compared with hub.verify_token; ZoomSecret is the
	// key of the Zoom app's HMAC. Plain, they are only input: the commands
	// replace them with MetaVerifyTokenMAC (an HMAC under the relay's
	// secrets key) and ZoomSecretSealed (AES-256-GCM under it) before any
	// event is raised, so events carry neither in plain text. Events written
	// before those forms existed hold the plain values, which still answer.
	// None is shown back by the API.
	MetaVerifyToken    string        `json:"meta_verify_token,omitempty"`
	ZoomSecret         string        `json:"zoom_secret,omitempty"`
	MetaVerifyTokenMAC string        `json:"meta_verify_token_mac,omitempty"`
	ZoomSecretSealed   string        `json:"zoom_secret_sealed,omitempty"`
	InProxy            HandshakeSide `json:"in_proxy,omitempty"` // "" is LOCAL
}

// MaxStoredSecret bounds a secret's stored form (MAC or sealed) as read
// back: a 256-byte secret sealed is under 450 bytes.
const MaxStoredSecret = 1024

// MetaTokenSet tells whether a Meta verify token is set, in either form.
func (h *Handshakes) MetaTokenSet() bool {
	return h != nil && (h.MetaVerifyToken != "" || h.MetaVerifyTokenMAC != "")
}

// ZoomSecretSet tells whether a Zoom secret token is set, in either form.
func (h *Handshakes) ZoomSecretSet() bool {
	return h != nil && (h.ZoomSecret != "" || h.ZoomSecretSealed != "")
}

// HasPlainSecret tells whether h holds a secret in plain text (input not
// yet sealed, or an event written before secrets were sealed).
func (h *Handshakes) HasPlainSecret() bool {
	return h != nil && (h.MetaVerifyToken != "" || h.ZoomSecret != "")
}

// Has tells whether the handshake is enabled.
func (h *Handshakes) Has(name Handshake) bool { return h != nil && slices.Contains(h.Enabled, name) }

// RelayInProxy tells whether the relay answers handshakes to a PROXY Endpoint.
func (h *Handshakes) RelayInProxy() bool { return h != nil && h.InProxy == HandshakesRelay }

// Validate checks the handshakes' invariants; the error names the field.
func (h Handshakes) Validate() error {
	seen := map[Handshake]bool{}
	for i, name := range h.Enabled {
		if !slices.Contains(KnownHandshakes, name) {
			return &InvalidInputError{Field: fmt.Sprintf("handshakes.enabled[%d]", i), Reason: fmt.Sprintf("%q is not one of slack, meta, msgraph, dropbox, zoom", string(name))}
		}
		if seen[name] {
			return &InvalidInputError{Field: fmt.Sprintf("handshakes.enabled[%d]", i), Reason: fmt.Sprintf("%s is listed twice", name)}
		}
		seen[name] = true
	}
	for _, s := range []struct{ field, v string }{{"handshakes.metaVerifyToken", h.MetaVerifyToken}, {"handshakes.zoomSecret", h.ZoomSecret}} {
		if len(s.v) > MaxHandshakeSecret {
			return &InvalidInputError{Field: s.field, Reason: fmt.Sprintf("at most %d bytes", MaxHandshakeSecret)}
		}
		if s.v != "" && !IsFieldValue(s.v) {
			return &InvalidInputError{Field: s.field, Reason: "holds a control character or surrounding space"}
		}
	}
	for _, s := range []struct{ field, v string }{{"handshakes.metaVerifyToken", h.MetaVerifyTokenMAC}, {"handshakes.zoomSecret", h.ZoomSecretSealed}} {
		if len(s.v) > MaxStoredSecret {
			return &InvalidInputError{Field: s.field, Reason: fmt.Sprintf("stored form longer than %d bytes", MaxStoredSecret)}
		}
	}
	if seen[HandshakeMeta] && !h.MetaTokenSet() {
		return &InvalidInputError{Field: "handshakes.metaVerifyToken", Reason: "the meta handshake needs the verify token given to Meta"}
	}
	if seen[HandshakeZoom] && !h.ZoomSecretSet() {
		return &InvalidInputError{Field: "handshakes.zoomSecret", Reason: "the zoom handshake needs the Zoom app's secret token"}
	}
	if h.InProxy != "" && h.InProxy != HandshakesLocal && h.InProxy != HandshakesRelay {
		return &InvalidInputError{Field: "handshakes.inProxy", Reason: "must be LOCAL or RELAY"}
	}
	return nil
}

// validateAnswers checks both groups and returns them as stored: a default
// answer and empty handshakes are none (invariant 6).
func validateAnswers(a *Answer, h *Handshakes) (*Answer, *Handshakes, error) {
	if a != nil {
		if err := a.Validate(); err != nil {
			return nil, nil, err
		}
		if a.Status == DefaultAnswer.Status && len(a.Headers) == 0 && len(a.Body) == 0 {
			a = nil
		} else {
			c := *a
			c.Headers = slices.Clone(a.Headers)
			if len(c.Headers) == 0 {
				c.Headers = nil
			}
			c.Body = slices.Clone(a.Body)
			if len(c.Body) == 0 {
				c.Body = nil
			}
			a = &c
		}
	}
	if h != nil {
		if err := h.Validate(); err != nil {
			return nil, nil, err
		}
		c := *h
		c.Enabled = slices.Clone(h.Enabled)
		if len(c.Enabled) == 0 {
			c.Enabled = nil
		}
		if c.InProxy == HandshakesLocal {
			c.InProxy = ""
		}
		if c.Enabled == nil && !c.MetaTokenSet() && !c.ZoomSecretSet() && c.InProxy == "" {
			h = nil
		} else {
			h = &c
		}
	}
	return a, h, nil
}

// SecretMask is what the API shows of a secret that is set: nothing of it.
const SecretMask = "••••"
