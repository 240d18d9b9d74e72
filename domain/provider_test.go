package domain_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
)

// TestDetectProvider: each provider is recognised by what it sends, with
// its event type and its own delivery or event id.
func TestDetectProvider(t *testing.T) {
	hs := func(kv ...string) []domain.Header {
		var out []domain.Header
		for i := 0; i < len(kv); i += 2 {
			out = append(out, domain.Header{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tt := range []struct {
		name     string
		headers  []domain.Header
		body     string
		complete bool
		want     *domain.Provider
	}{
		{"github", hs("X-GitHub-Event", "push", "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), `{}`, true,
			&domain.Provider{Name: "github", EventType: "push", DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958"}},
		{"github, any case", hs("x-github-event", "ping", "x-github-delivery", "1"), ``, true, &domain.Provider{Name: "github", EventType: "ping", DeliveryID: "1"}},
		{"shopify", hs("X-Shopify-Topic", "orders/create", "X-Shopify-Webhook-Id", "b54557e4"), `{}`, true,
			&domain.Provider{Name: "shopify", EventType: "orders/create", DeliveryID: "b54557e4"}},
		{"stripe, ids from the body", hs("Stripe-Signature", "t=1,v1=x"), `{"id":"evt_1","object":"event","type":"charge.succeeded"}`, true,
			&domain.Provider{Name: "stripe", EventType: "charge.succeeded", DeliveryID: "evt_1"}},
		{"stripe, a body stored in part", hs("Stripe-Signature", "t=1"), `{"id":"evt_1"`, false, &domain.Provider{Name: "stripe"}},
		{"stripe, a body that is not JSON", hs("Stripe-Signature", "t=1"), `id=evt_1`, true, &domain.Provider{Name: "stripe"}},
		{"slack event", hs("X-Slack-Signature", "v0=a"), `{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}`, true,
			&domain.Provider{Name: "slack", EventType: "app_mention", DeliveryID: "Ev1"}},
		{"slack url check", hs("X-Slack-Signature", "v0=a"), `{"type":"url_verification"}`, true, &domain.Provider{Name: "slack", EventType: "url_verification"}},
		{"svix", hs("svix-id", "msg_1", "svix-signature", "v1,x"), `{"type":"user.created"}`, true, &domain.Provider{Name: "svix", EventType: "user.created", DeliveryID: "msg_1"}},
		{"standard webhooks", hs("webhook-id", "msg_2", "webhook-signature", "v1,x"), `{"type":"invoice.paid"}`, true,
			&domain.Provider{Name: "standard-webhooks", EventType: "invoice.paid", DeliveryID: "msg_2"}},
		{"an id too long to be one", hs("X-GitHub-Event", "push", "X-GitHub-Delivery", strings.Repeat("x", 300)), ``, true, &domain.Provider{Name: "github", EventType: "push"}},
		{"stripe, a body over the scan limit", hs("Stripe-Signature", "t=1"), `{"id":"evt_1","type":"charge.succeeded","pad":"` + strings.Repeat("x", 256<<10) + `"}`, true,
			&domain.Provider{Name: "stripe"}},
		{"stripe, nested too deep", hs("Stripe-Signature", "t=1"), `{"id":"evt_1","type":"charge.succeeded","n":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, true,
			&domain.Provider{Name: "stripe"}},
		{"none", hs("Content-Type", "application/json"), `{"id":"evt_1","type":"x"}`, true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := domain.DetectProvider(tt.headers, []byte(tt.body), tt.complete); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzDetectProvider: any headers and body give a provider or none,
// without panicking, and its fields stay bounded.
func FuzzDetectProvider(f *testing.F) {
	f.Add("Stripe-Signature", "t=1", `{"id":"evt_1","type":"a"}`)
	f.Add("X-Slack-Signature", "v0", `{"event":{"type":1}}`)
	f.Add("webhook-id", "\x00", `{`)
	f.Fuzz(func(t *testing.T, name, value, body string) {
		p := domain.DetectProvider([]domain.Header{{Name: name, Value: value}}, []byte(body), true)
		if p != nil && (len(p.EventType) > 256 || len(p.DeliveryID) > 256) {
			t.Fatalf("unbounded provider fields: %+v", p)
		}
	})
}
