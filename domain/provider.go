package domain

import (
	"encoding/json"
	"strings"
)

// Provider is the webhook provider a delivery came from, as its headers
// (and for some, its JSON body) tell: the provider's name, its event type,
// and its own id of the delivery or event, which stays the same when the
// provider sends it again.
type Provider struct {
	Name       string `json:"name"`
	EventType  string `json:"event_type,omitempty"`
	DeliveryID string `json:"delivery_id,omitempty"`
}

// maxProviderField bounds what is kept of a provider's id or event type:
// they are short; a longer one is not theirs.
const maxProviderField = 256

// DetectProvider recognises the common providers by the headers they sign
// with or name themselves in, nil when none matches. The body is parsed
// only for providers that keep the ids there (Stripe, Slack, Standard
// Webhooks' type), and only when it is whole.
func DetectProvider(headers []Header, body []byte, complete bool) *Provider {
	get := func(name string) string {
		for _, h := range headers {
			if strings.EqualFold(h.Name, name) {
				return h.Value
			}
		}
		return ""
	}
	var p *Provider
	switch {
	case get("X-GitHub-Delivery") != "" || get("X-GitHub-Event") != "":
		p = &Provider{Name: "github", EventType: get("X-GitHub-Event"), DeliveryID: get("X-GitHub-Delivery")}
	case get("X-Shopify-Webhook-Id") != "" || get("X-Shopify-Topic") != "":
		p = &Provider{Name: "shopify", EventType: get("X-Shopify-Topic"), DeliveryID: get("X-Shopify-Webhook-Id")}
	case get("Stripe-Signature") != "":
		p = &Provider{Name: "stripe"}
		if b, ok := bodyFields(body, complete); ok {
			p.EventType, p.DeliveryID = b.Type, b.ID
		}
	case get("X-Slack-Signature") != "":
		p = &Provider{Name: "slack"}
		if b, ok := bodyFields(body, complete); ok {
			p.DeliveryID, p.EventType = b.EventID, b.Event.Type
			if p.EventType == "" {
				p.EventType = b.Type
			}
		}
	case get("svix-id") != "":
		p = &Provider{Name: "svix", DeliveryID: get("svix-id")}
		if b, ok := bodyFields(body, complete); ok {
			p.EventType = b.Type
		}
	case get("webhook-id") != "":
		p = &Provider{Name: "standard-webhooks", DeliveryID: get("webhook-id")}
		if b, ok := bodyFields(body, complete); ok {
			p.EventType = b.Type
		}
	default:
		return nil
	}
	p.EventType = bound(p.EventType)
	p.DeliveryID = bound(p.DeliveryID)
	return p
}

// providerBody is what the providers that keep ids in the body put there.
type providerBody struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	EventID string `json:"event_id"`
	Event   struct {
		Type string `json:"type"`
	} `json:"event"`
}

func bodyFields(body []byte, complete bool) (providerBody, bool) {
	var b providerBody
	if !complete || len(body) == 0 || body[0] != '{' {
		return b, false
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return providerBody{}, false
	}
	return b, true
}

// bound keeps a provider field only when it is short and printable.
func bound(s string) string {
	if len(s) > maxProviderField || strings.ContainsAny(s, "\x00\r\n") {
		return ""
	}
	return s
}
