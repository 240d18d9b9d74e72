package domain

import "strings"

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
	// One pass over the headers: this runs for every delivery received.
	var h providerHeaders
	for _, x := range headers {
		if p := h.slot(x.Name); p != nil && *p == "" {
			*p = x.Value
		}
	}
	var p *Provider
	switch {
	case h.githubDelivery != "" || h.githubEvent != "":
		p = &Provider{Name: "github", EventType: h.githubEvent, DeliveryID: h.githubDelivery}
	case h.shopifyID != "" || h.shopifyTopic != "":
		p = &Provider{Name: "shopify", EventType: h.shopifyTopic, DeliveryID: h.shopifyID}
	case h.stripeSig != "":
		p = &Provider{Name: "stripe"}
		if b, ok := bodyFields(body, complete); ok {
			p.EventType, p.DeliveryID = b.Type, b.ID
		}
	case h.slackSig != "":
		p = &Provider{Name: "slack"}
		if b, ok := bodyFields(body, complete); ok {
			p.DeliveryID, p.EventType = b.EventID, b.EventType
			if p.EventType == "" {
				p.EventType = b.Type
			}
		}
	case h.svixID != "":
		p = &Provider{Name: "svix", DeliveryID: h.svixID}
		if b, ok := bodyFields(body, complete); ok {
			p.EventType = b.Type
		}
	case h.webhookID != "":
		p = &Provider{Name: "standard-webhooks", DeliveryID: h.webhookID}
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

// providerHeaders are the headers that name a provider: the first value
// of each.
type providerHeaders struct {
	githubEvent, githubDelivery, shopifyTopic, shopifyID string
	stripeSig, slackSig, svixID, webhookID               string
}

// slot is where a header of this name goes, nil for one that names no
// provider.
func (h *providerHeaders) slot(name string) *string {
	switch {
	case strings.EqualFold(name, "X-GitHub-Event"):
		return &h.githubEvent
	case strings.EqualFold(name, "X-GitHub-Delivery"):
		return &h.githubDelivery
	case strings.EqualFold(name, "X-Shopify-Topic"):
		return &h.shopifyTopic
	case strings.EqualFold(name, "X-Shopify-Webhook-Id"):
		return &h.shopifyID
	case strings.EqualFold(name, "Stripe-Signature"):
		return &h.stripeSig
	case strings.EqualFold(name, "X-Slack-Signature"):
		return &h.slackSig
	case strings.EqualFold(name, "svix-id"):
		return &h.svixID
	case strings.EqualFold(name, "webhook-id"):
		return &h.webhookID
	}
	return nil
}

// providerBody is what the providers that keep ids in the body put there:
// top-level "id", "type", "event_id" and "event"."type", each only when a
// string.
type providerBody struct {
	ID, Type, EventID, EventType string
}

// providerPaths are providerBody's fields' paths, in its order.
var providerPaths = [][]string{{"id"}, {"type"}, {"event_id"}, {"event", "type"}}

// bodyFields looks up the provider's fields with LookupJSON: a body over
// MaxJSONScanBody or nested deeper than MaxJSONScanDepth names none.
func bodyFields(body []byte, complete bool) (providerBody, bool) {
	if !complete || len(body) == 0 || body[0] != '{' {
		return providerBody{}, false
	}
	vs, err := LookupJSON(body, providerPaths...)
	if err != nil {
		return providerBody{}, false
	}
	str := func(v JSONValue) string {
		if v.String {
			return v.Text
		}
		return ""
	}
	return providerBody{ID: str(vs[0]), Type: str(vs[1]), EventID: str(vs[2]), EventType: str(vs[3])}, true
}

// bound keeps a provider field only when it is short and printable.
func bound(s string) string {
	if len(s) > maxProviderField || strings.ContainsAny(s, "\x00\r\n") {
		return ""
	}
	return s
}
