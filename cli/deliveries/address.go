package deliveries

import (
	"context"
	"errors"
	"fmt"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/endpoints"
)

// noDelivery is the refusal for an id that names no delivery the token may
// read.
func noDelivery(id string) error {
	return &apiclient.Error{Message: fmt.Sprintf("no delivery %q (for this token)", id), Code: "NOT_FOUND"}
}

// NotFound is the refusal for an ADDRESS that names no Endpoint or
// inspector the token may read.
func NotFound(ref string) error {
	return &apiclient.Error{Message: fmt.Sprintf("no endpoint or inspector %q (for this token)", ref), Code: "NOT_FOUND"}
}

// ResolveAddress finds what ADDRESS names: one of the account's Endpoints
// (by id or name, when logged in), else an inspector. kind is the query
// field: "endpoint" or "inspector".
func ResolveAddress(ctx context.Context, client *apiclient.Client, ref string) (kind, id string, err error) {
	var eps []endpoints.Endpoint
	if client.Token != "" {
		if eps, err = endpoints.List(ctx, client); err != nil {
			return "", "", err
		}
		ep, err := endpoints.Pick(eps, ref)
		if err == nil {
			return "endpoint", ep.ID, nil
		}
		var ae *apiclient.Error
		if !errors.As(err, &ae) || ae.Code != "NOT_FOUND" {
			return "", "", err
		}
	}
	var res struct{ Inspector *struct{ ID string } }
	if err := client.Do(ctx, `query($a: ID!){ inspector(id: $a){ id } }`, map[string]any{"a": ref}, &res); err != nil {
		return "", "", err
	}
	if res.Inspector == nil {
		// A name mistyped: the Endpoints it is close to.
		return "", "", &apiclient.Error{Message: fmt.Sprintf("no endpoint or inspector %q (for this token)%s", ref, endpoints.DidYouMean(eps, ref)), Code: "NOT_FOUND"}
	}
	return "inspector", res.Inspector.ID, nil
}

// addressURL is the public URL of an inspector or Endpoint id.
func addressURL(ctx context.Context, client *apiclient.Client, id string) (string, error) {
	var res struct{ Inspector *struct{ URL string } }
	if err := client.Do(ctx, `query($a: ID!){ inspector(id: $a){ url } }`, map[string]any{"a": id}, &res); err != nil {
		return "", err
	}
	if res.Inspector != nil {
		return res.Inspector.URL, nil
	}
	var ep struct{ Endpoint *struct{ URL string } }
	if err := client.Do(ctx, `query($a: ID!){ endpoint(id: $a){ url } }`, map[string]any{"a": id}, &ep); err != nil {
		return "", err
	}
	if ep.Endpoint == nil {
		return "", NotFound(id)
	}
	return ep.Endpoint.URL, nil
}
