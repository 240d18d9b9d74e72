package signatures

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func headers(m map[string]string) Header {
	return func(name string) string {
		for k, v := range m {
			if strings.EqualFold(k, name) {
				return v
			}
		}
		return ""
	}
}

// TestSlackDocumentedExample: the request and signature Slack's "Verifying
// requests from Slack" page works through.
func TestSlackDocumentedExample(t *testing.T) {
	body := "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	h := headers(map[string]string{"X-Slack-Request-Timestamp": "1531420618", "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"})
	at := time.Unix(1531420618, 0).Add(time.Minute)
	if r := Check("slack", "8f742231b10e8888abcd99yyyzzz85a5", h, []byte(body), at); r.Verdict != Valid {
		t.Fatalf("Slack's example: %s", r)
	}
	if r := Check("slack", "8f742231b10e8888abcd99yyyzzz85a5", h, []byte(body), at.Add(time.Hour)); r.Verdict != Expired {
		t.Fatalf("Slack's example an hour later: %s, want expired", r)
	}
	if r := Check("slack", "8f742231b10e8888abcd99yyyzzz85a5", h, []byte(body+"x"), at); r.Verdict != Invalid {
		t.Fatalf("Slack's example with a changed body: %s, want invalid", r)
	}
}

// TestProvidersOwnLibraries: signatures made by Stripe's, GitHub's
// (@octokit/webhooks-methods) and Standard Webhooks' own npm libraries,
// and by Shopify's documented recipe, verify; a changed body, another
// secret, an old timestamp and a missing header do not.
func TestProvidersOwnLibraries(t *testing.T) {
	node, err := exec.LookPath("node")
	dir, _ := filepath.Abs("../../systemtest/testdata/webhooks")
	if _, serr := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks")); err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node and the webhook libraries must be installed in CI (.ci/run runs npm ci in systemtest/testdata/webhooks)")
		}
		t.Skip("node or the webhook libraries are missing: (cd systemtest/testdata/webhooks && npm ci)")
	}
	const payload, secret, whsec = `{"id":"evt_1","type":"charge.succeeded"}`, "s3cret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	signedAt := time.Now().Add(-time.Minute).Truncate(time.Second)
	out, err := exec.Command(node, filepath.Join(dir, "sign.mjs"), payload, secret, whsec, strconv.FormatInt(signedAt.Unix(), 10)).Output()
	if err != nil {
		t.Fatalf("sign.mjs: %v", err)
	}
	var signed struct {
		Stripe, Github, Shopify map[string]string
		StandardWebhooks        string `json:"standard-webhooks"`
	}
	if err := json.Unmarshal(out, &signed); err != nil {
		t.Fatalf("sign.mjs printed %s: %v", out, err)
	}
	std := map[string]string{"webhook-id": "msg_1", "webhook-timestamp": strconv.FormatInt(signedAt.Unix(), 10), "webhook-signature": signed.StandardWebhooks}
	svix := map[string]string{"svix-id": "msg_1", "svix-timestamp": std["webhook-timestamp"], "svix-signature": signed.StandardWebhooks}
	for _, tt := range []struct {
		scheme, secret string
		headers        map[string]string
	}{
		{"stripe", secret, signed.Stripe},
		{"github", secret, signed.Github},
		{"shopify", secret, signed.Shopify},
		{"standard-webhooks", whsec, std},
		{"svix", whsec, svix},
	} {
		t.Run(tt.scheme, func(t *testing.T) {
			h := headers(tt.headers)
			now := time.Now()
			if r := Check(tt.scheme, tt.secret, h, []byte(payload), now); r.Verdict != Valid {
				t.Fatalf("the library's signature: %s", r)
			}
			if r := Check(tt.scheme, tt.secret, h, []byte(payload+" "), now); r.Verdict != Invalid {
				t.Errorf("a changed body: %s, want invalid", r)
			}
			other := "other"
			if strings.HasPrefix(tt.secret, "whsec_") {
				other = "whsec_b3RoZXJzZWNyZXQ="
			}
			if r := Check(tt.scheme, other, h, []byte(payload), now); r.Verdict != Invalid {
				t.Errorf("another secret: %s, want invalid", r)
			}
			if r := Check(tt.scheme, tt.secret, headers(nil), []byte(payload), now); r.Verdict != Missing {
				t.Errorf("no headers: %s, want no signature", r)
			}
			timed := tt.scheme == "stripe" || tt.scheme == "standard-webhooks" || tt.scheme == "svix"
			if r := Check(tt.scheme, tt.secret, h, []byte(payload), now.Add(time.Hour)); timed && r.Verdict != Expired {
				t.Errorf("an hour later: %s, want expired", r)
			}
		})
	}
}

// FuzzCheck: any headers and body give a verdict, never a panic.
func FuzzCheck(f *testing.F) {
	f.Add("stripe", "t=1,v1=00", "{}")
	f.Add("standard-webhooks", "v1,AAAA v2,x", "{}")
	f.Add("slack", "v0=zz", "")
	f.Fuzz(func(t *testing.T, scheme, value, body string) {
		h := func(string) string { return value }
		r := Check(scheme, "whsec_c2VjcmV0", h, []byte(body), time.Unix(1, 0))
		if r.Verdict == "" {
			t.Fatal("no verdict")
		}
	})
}
