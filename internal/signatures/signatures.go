// Package signatures checks the signatures webhook providers put on their
// requests, on the developer's machine: the secret stays there (relay
// listen --verify), and only the verdict is shown. Each scheme follows its
// provider's documentation; the tests check them against the providers'
// own libraries where one exists.
package signatures

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Verdict is what a check found.
type Verdict string

// The verdicts.
const (
	Valid   Verdict = "valid"
	Invalid Verdict = "invalid"
	Expired Verdict = "expired timestamp"
	Missing Verdict = "no signature"
)

// Tolerance is how far a signed timestamp may be from now, as the
// providers' libraries allow by default (five minutes).
const Tolerance = 5 * time.Minute

// Result is a verdict and, when it is not valid, why.
type Result struct {
	Verdict Verdict
	Reason  string
}

func (r Result) String() string {
	if r.Reason == "" {
		return string(r.Verdict)
	}
	return string(r.Verdict) + " (" + r.Reason + ")"
}

// Header reads a request header by name, any case.
type Header func(name string) string

type scheme func(secret string, get Header, body []byte, now time.Time) Result

var schemes = map[string]scheme{
	"stripe":            stripe,
	"github":            github,
	"shopify":           shopify,
	"slack":             slack,
	"standard-webhooks": standardWebhooks("webhook-"),
	"svix":              standardWebhooks("svix-"),
}

// Schemes lists the schemes Check knows.
func Schemes() []string {
	out := make([]string, 0, len(schemes))
	for name := range schemes {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Known reports whether name is a scheme Check knows.
func Known(name string) bool { _, ok := schemes[name]; return ok }

// Check verifies a request's signature by a scheme with the secret.
func Check(name, secret string, get Header, body []byte, now time.Time) Result {
	s, ok := schemes[name]
	if !ok {
		return Result{Verdict: Invalid, Reason: "unknown scheme " + name}
	}
	return s(secret, get, body, now)
}

func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// timely checks a Unix-seconds timestamp against now.
func timely(ts string, now time.Time) (bool, Result) {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false, Result{Verdict: Invalid, Reason: "the timestamp is not a number"}
	}
	if d := now.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return false, Result{Verdict: Expired, Reason: fmt.Sprintf("signed %s from now", d.Round(time.Second))}
	}
	return true, Result{}
}

// stripe: Stripe-Signature "t=TS,v1=HEX[,v1=HEX]", HMAC-SHA256 of
// "TS.body" with the endpoint's signing secret.
func stripe(secret string, get Header, body []byte, now time.Time) Result {
	h := get("Stripe-Signature")
	if h == "" {
		return Result{Verdict: Missing, Reason: "no Stripe-Signature header"}
	}
	var ts string
	var sigs []string
	for _, part := range strings.Split(h, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return Result{Verdict: Invalid, Reason: "Stripe-Signature has no t= or v1="}
	}
	want := mac([]byte(secret), []byte(ts), []byte("."), body)
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
			if ok, r := timely(ts, now); !ok {
				return r
			}
			return Result{Verdict: Valid}
		}
	}
	return Result{Verdict: Invalid, Reason: "no v1 signature matches"}
}

// github: X-Hub-Signature-256 "sha256=HEX", HMAC-SHA256 of the body.
func github(secret string, get Header, body []byte, _ time.Time) Result {
	h := get("X-Hub-Signature-256")
	if h == "" {
		return Result{Verdict: Missing, Reason: "no X-Hub-Signature-256 header"}
	}
	hexSig, ok := strings.CutPrefix(h, "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil {
		return Result{Verdict: Invalid, Reason: "X-Hub-Signature-256 is not sha256=HEX"}
	}
	if !hmac.Equal(got, mac([]byte(secret), body)) {
		return Result{Verdict: Invalid, Reason: "the signature does not match"}
	}
	return Result{Verdict: Valid}
}

// shopify: X-Shopify-Hmac-Sha256, base64 HMAC-SHA256 of the body.
func shopify(secret string, get Header, body []byte, _ time.Time) Result {
	h := get("X-Shopify-Hmac-Sha256")
	if h == "" {
		return Result{Verdict: Missing, Reason: "no X-Shopify-Hmac-Sha256 header"}
	}
	got, err := base64.StdEncoding.DecodeString(h)
	if err != nil || !hmac.Equal(got, mac([]byte(secret), body)) {
		return Result{Verdict: Invalid, Reason: "the signature does not match"}
	}
	return Result{Verdict: Valid}
}

// slack: X-Slack-Signature "v0=HEX", HMAC-SHA256 of "v0:TS:body" with the
// signing secret, TS from X-Slack-Request-Timestamp.
func slack(secret string, get Header, body []byte, now time.Time) Result {
	h, ts := get("X-Slack-Signature"), get("X-Slack-Request-Timestamp")
	if h == "" || ts == "" {
		return Result{Verdict: Missing, Reason: "no X-Slack-Signature or X-Slack-Request-Timestamp header"}
	}
	hexSig, ok := strings.CutPrefix(h, "v0=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil || !hmac.Equal(got, mac([]byte(secret), []byte("v0:"+ts+":"), body)) {
		return Result{Verdict: Invalid, Reason: "the signature does not match"}
	}
	if ok, r := timely(ts, now); !ok {
		return r
	}
	return Result{Verdict: Valid}
}

// standardWebhooks: PREFIX-id, PREFIX-timestamp and PREFIX-signature
// ("v1,BASE64" entries separated by spaces), HMAC-SHA256 of
// "id.timestamp.body" with the secret's bytes (base64 after "whsec_").
func standardWebhooks(prefix string) scheme {
	return func(secret string, get Header, body []byte, now time.Time) Result {
		id, ts, sigs := get(prefix+"id"), get(prefix+"timestamp"), get(prefix+"signature")
		if id == "" || ts == "" || sigs == "" {
			return Result{Verdict: Missing, Reason: "no " + prefix + "id, " + prefix + "timestamp or " + prefix + "signature header"}
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			return Result{Verdict: Invalid, Reason: "the secret is not whsec_ and base64"}
		}
		want := mac(key, []byte(id+"."+ts+"."), body)
		for _, s := range strings.Fields(sigs) {
			v, b64, ok := strings.Cut(s, ",")
			got, err := base64.StdEncoding.DecodeString(b64)
			if ok && v == "v1" && err == nil && hmac.Equal(got, want) {
				if ok, r := timely(ts, now); !ok {
					return r
				}
				return Result{Verdict: Valid}
			}
		}
		return Result{Verdict: Invalid, Reason: "no v1 signature matches"}
	}
}
