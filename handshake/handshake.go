// Package handshake answers the verification requests webhook providers
// send to a URL before they deliver to it (Slack's url_verification, Meta's
// hub.challenge, Microsoft Graph's validationToken, Dropbox's challenge,
// Zoom's endpoint.url_validation), for the addresses that enable them
// (domain.Handshakes). Each answer follows the provider's documentation;
// docs/answers.md names the pages.
package handshake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/relayhq/relay/domain"
)

// Request is what a handshake is recognised from: the request as recorded.
type Request struct {
	Method string
	Target string // the raw request target: path and query as sent
	Body   []byte
}

// Response is the relay's answer to a handshake.
type Response struct {
	Status  int
	Headers []domain.Header
	Body    []byte
	// Reason is recorded with the delivery: domain.ReasonHandshake and the
	// handshake's name.
	Reason string
	// Redact names the query parameters whose values are a secret of the
	// address (Meta's hub.verify_token): they are recorded as Redacted.
	Redact []string
}

// Redacted replaces a secret's value in a recorded request target.
const Redacted = "REDACTED"

// Secrets reads the stored forms of an address's secrets (*secrets.Key):
// Verify compares a candidate with a stored HMAC, Open unseals a secret.
type Secrets interface {
	Verify(mac, candidate string) (bool, error)
	Open(sealed string) (string, error)
}

// Answer returns the answer to req when it is the verification request of
// a handshake h enables, and false otherwise (the request is then answered
// as any other). keys reads h's stored secrets; nil reads only the plain
// ones of older events. A stored secret keys cannot read (another key)
// gets a 500 that says so, never an answer computed with a wrong secret.
func Answer(keys Secrets, h *domain.Handshakes, req Request) (Response, bool) {
	if h == nil || len(h.Enabled) == 0 {
		return Response{}, false
	}
	query := parseQuery(req.Target)
	for _, name := range domain.KnownHandshakes {
		if !h.Has(name) {
			continue
		}
		var (
			r  Response
			ok bool
		)
		switch name {
		case domain.HandshakeSlack:
			r, ok = slack(req)
		case domain.HandshakeMeta:
			r, ok = meta(req, query, keys, h)
		case domain.HandshakeGraph:
			r, ok = graph(req, query)
		case domain.HandshakeDropbox:
			r, ok = dropbox(req, query)
		case domain.HandshakeZoom:
			r, ok = zoom(req, keys, h)
		}
		if ok {
			return r, true
		}
	}
	return Response{}, false
}

// Detect names the handshake whose verification request req is, whether
// or not an address enables it, so that a request an address does not
// answer as a handshake can be told of. It runs the matchers Answer runs,
// with no secret: nothing is answered, and its cost is Answer's with
// every handshake enabled.
func Detect(req Request) (domain.Handshake, bool) {
	query := parseQuery(req.Target)
	none := &domain.Handshakes{}
	for _, name := range domain.KnownHandshakes {
		var ok bool
		switch name {
		case domain.HandshakeSlack:
			_, ok = slack(req)
		case domain.HandshakeMeta:
			_, ok = meta(req, query, nil, none)
		case domain.HandshakeGraph:
			_, ok = graph(req, query)
		case domain.HandshakeDropbox:
			_, ok = dropbox(req, query)
		case domain.HandshakeZoom:
			_, ok = zoom(req, nil, none)
		}
		if ok {
			return name, true
		}
	}
	return "", false
}

// parseQuery reads the query of a raw target; a malformed pair is skipped
// (url.ParseQuery keeps the others). A target without a query (most
// deliveries) has nil Values, which read as empty without an allocation.
func parseQuery(target string) url.Values {
	_, raw, ok := strings.Cut(target, "?")
	if !ok {
		return nil
	}
	q, _ := url.ParseQuery(raw) // the pairs that parse are kept
	return q
}

// Every answer that echoes what the request carried (a challenge) is
// text/plain with X-Content-Type-Options: nosniff, so no browser reads it
// as a page, and echoes only a challenge's characters, bounded.
var nosniff = domain.Header{Name: "X-Content-Type-Options", Value: "nosniff"}

func text(status int, name, body string) Response {
	h := []domain.Header{{Name: "Content-Type", Value: "text/plain; charset=utf-8"}, nosniff}
	return Response{Status: status, Headers: h, Body: []byte(body), Reason: domain.ReasonHandshake + name}
}

// maxBody bounds the JSON handshakes' bodies: Slack's and Zoom's are a
// few hundred bytes. Every POST to the address is looked at, so a larger
// body is not searched, nor scanned unless it names the handshake.
const maxBody = 4 << 10

// Bounds of what a handshake echoes: the providers' challenges are short
// tokens (Slack's 52 characters, Meta's digits, Dropbox's 11, Zoom's 22);
// Graph's validationToken is a sentence of about 150.
const (
	maxChallenge      = 256
	maxGraphChallenge = 1024
	maxZoomToken      = 128
)

// tokenChallenge tells whether s is a challenge as Slack, Meta and Dropbox
// send them: 1 to maxChallenge of A-Z a-z 0-9 and - _ . ~ + / =.
func tokenChallenge(s string) bool {
	return len(s) >= 1 && len(s) <= maxChallenge && allBytes(s, func(c byte) bool {
		return isAlnum(c) || strings.IndexByte("-_.~+/=", c) >= 0
	})
}

// graphChallenge tells whether s is a Graph validationToken: 1 to
// maxGraphChallenge printable ASCII characters, none that means anything
// in HTML.
func graphChallenge(s string) bool {
	return len(s) >= 1 && len(s) <= maxGraphChallenge && allBytes(s, func(c byte) bool {
		return c >= ' ' && c <= '~' && strings.IndexByte("<>&\"'`", c) < 0
	})
}

// zoomToken tells whether s is a Zoom plainToken: 1 to maxZoomToken of
// A-Z a-z 0-9 - _. The relay signs it with the secret that also signs
// Zoom's events (over "v0:TIMESTAMP:BODY"), so signing anything else
// would forge events: nothing with a ':' or longer is signed.
func zoomToken(s string) bool {
	return len(s) >= 1 && len(s) <= maxZoomToken && allBytes(s, func(c byte) bool {
		return isAlnum(c) || c == '-' || c == '_'
	})
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func allBytes(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func small(req Request) bool { return req.Method == http.MethodPost && len(req.Body) <= maxBody }

// jsonStrings looks up string fields of a small body; ok is false when the
// body is not JSON.
func jsonStrings(body []byte, paths ...[]string) ([]string, bool) {
	vs, err := domain.LookupJSON(body, paths...)
	if err != nil {
		return nil, false
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		if v.String {
			out[i] = v.Text
		}
	}
	return out, true
}

// slack: POST {"type":"url_verification","challenge":…} is answered 200
// with the challenge as plain text (api.slack.com/events/url_verification).
func slack(req Request) (Response, bool) {
	if !small(req) || !bytes.Contains(req.Body, []byte("url_verification")) {
		return Response{}, false
	}
	f, ok := jsonStrings(req.Body, []string{"type"}, []string{"challenge"})
	if !ok || f[0] != "url_verification" || !tokenChallenge(f[1]) {
		return Response{}, false
	}
	return text(http.StatusOK, domain.HandshakeSlackName, f[1]), true
}

// meta: GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=… is
// answered 200 with exactly the challenge when the verify token is the one
// configured, else 403 (developers.facebook.com/docs/graph-api/webhooks/getting-started).
// The token sent is recorded as Redacted, whether it was right or not.
func meta(req Request, q url.Values, keys Secrets, h *domain.Handshakes) (Response, bool) {
	if req.Method != http.MethodGet || q.Get("hub.mode") != "subscribe" || !q.Has("hub.challenge") {
		return Response{}, false
	}
	right, err := metaToken(keys, h, q.Get("hub.verify_token"))
	var r Response
	switch {
	case !tokenChallenge(q.Get("hub.challenge")):
		// Meta's challenge is digits: this one is not Meta's, and is not
		// echoed. Still a handshake, so the verify token is redacted.
		r = text(http.StatusBadRequest, domain.HandshakeMetaName, "Bad Request: hub.challenge is not a challenge\n")
		r.Reason += " refused (hub.challenge is not a challenge)"
	case err != nil:
		r = unreadable(domain.HandshakeMetaName, "verify token", err)
	case !right:
		r = text(http.StatusForbidden, domain.HandshakeMetaWrongName, "Forbidden: wrong hub.verify_token\n")
	default:
		r = text(http.StatusOK, domain.HandshakeMetaName, q.Get("hub.challenge"))
	}
	r.Redact = []string{"hub.verify_token"}
	return r, true
}

// metaToken compares got with the configured verify token in constant
// time: with its HMAC, or with the plain token of an older event.
func metaToken(keys Secrets, h *domain.Handshakes, got string) (bool, error) {
	switch {
	case h.MetaVerifyTokenMAC != "":
		if keys == nil {
			return false, errNoKey
		}
		return keys.Verify(h.MetaVerifyTokenMAC, got)
	case h.MetaVerifyToken != "":
		return subtle.ConstantTimeCompare([]byte(got), []byte(h.MetaVerifyToken)) == 1, nil
	}
	return false, nil
}

// zoomSecret is the Zoom secret token: unsealed, or the plain one of an
// older event.
func zoomSecret(keys Secrets, h *domain.Handshakes) (string, error) {
	switch {
	case h.ZoomSecretSealed != "":
		if keys == nil {
			return "", errNoKey
		}
		return keys.Open(h.ZoomSecretSealed)
	case h.ZoomSecret != "":
		return h.ZoomSecret, nil
	}
	return "", errors.New("no secret token set")
}

var errNoKey = errors.New("the relay has no secrets key")

// unreadable is the answer when the address's secret cannot be read (the
// relay was given another secrets key): a 500 naming why, recorded with
// the reason, rather than a refusal or an HMAC the provider would reject
// without saying why.
func unreadable(name, what string, err error) Response {
	why := fmt.Sprintf("cannot read the address's %s: %v", what, err)
	r := text(http.StatusInternalServerError, name, "Internal Server Error: the relay "+why+"\n")
	r.Reason += " failed: the relay " + why
	return r
}

// graph: POST ?validationToken=… is answered 200 text/plain with the
// URL-decoded token, within 10 s (learn.microsoft.com/graph/change-notifications-delivery-webhooks).
func graph(req Request, q url.Values) (Response, bool) {
	if req.Method != http.MethodPost || !graphChallenge(q.Get("validationToken")) {
		return Response{}, false
	}
	return text(http.StatusOK, domain.HandshakeGraphName, q.Get("validationToken")), true
}

// dropbox: GET ?challenge=… is answered 200 with the challenge, as
// text/plain with X-Content-Type-Options: nosniff (www.dropbox.com/developers/reference/webhooks).
func dropbox(req Request, q url.Values) (Response, bool) {
	if req.Method != http.MethodGet || !tokenChallenge(q.Get("challenge")) {
		return Response{}, false
	}
	return text(http.StatusOK, domain.HandshakeDropboxName, q.Get("challenge")), true
}

// zoom: POST {"event":"endpoint.url_validation","payload":{"plainToken":…}}
// is answered 200 JSON {"plainToken":…,"encryptedToken":hex(HMAC-SHA256(secret, plainToken))}
// (developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint).
// Only a plainToken as Zoom makes them is signed (zoomToken); any other
// request is an ordinary delivery.
func zoom(req Request, keys Secrets, h *domain.Handshakes) (Response, bool) {
	if !small(req) || !bytes.Contains(req.Body, []byte("endpoint.url_validation")) {
		return Response{}, false
	}
	f, ok := jsonStrings(req.Body, []string{"event"}, []string{"payload", "plainToken"})
	if !ok || f[0] != "endpoint.url_validation" || !zoomToken(f[1]) {
		return Response{}, false
	}
	plainToken := f[1]
	secret, err := zoomSecret(keys, h)
	if err != nil {
		return unreadable(domain.HandshakeZoomName, "Zoom secret token", err), true
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(plainToken))
	body, err := json.Marshal(struct {
		PlainToken     string `json:"plainToken"`
		EncryptedToken string `json:"encryptedToken"`
	}{plainToken, hex.EncodeToString(mac.Sum(nil))})
	if err != nil {
		return Response{}, false // a string always marshals
	}
	return Response{Status: http.StatusOK, Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}, nosniff},
		Body: body, Reason: domain.ReasonHandshake + domain.HandshakeZoomName}, true
}

// RedactQuery returns target with the value of every query parameter
// named in names (compared once unescaped, as url.ParseQuery reads them)
// replaced by Redacted, and everything else byte for byte as sent.
func RedactQuery(target string, names []string) string {
	path, raw, ok := strings.Cut(target, "?")
	if !ok || len(names) == 0 {
		return target
	}
	pairs := strings.Split(raw, "&")
	for i, p := range pairs {
		k, _, _ := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		for _, n := range names {
			if name == n {
				pairs[i] = k + "=" + Redacted
			}
		}
	}
	return path + "?" + strings.Join(pairs, "&")
}
