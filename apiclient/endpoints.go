package apiclient

import (
	"context"
	"fmt"
)

const (
	// EndpointsPage is the first each page of the endpoints list asks
	// for: the most a page holds on a relay without --account-endpoints
	// (the relay holds a larger first to its own bound).
	EndpointsPage = 1000
	// EndpointsMaxPages bounds the pages one listing reads, so a client
	// never loops on a relay that keeps answering: 100 000 Endpoints at
	// EndpointsPage a page.
	EndpointsMaxPages = 100
)

// endpointsQuery pages through the account's Endpoints, oldest first.
const endpointsQuery = `query($first: Int, $after: ID){ endpoints(first: $first, after: $after){ %s } }`

// Endpoints lists all of the account's Endpoints, fields of each (which
// must hold id; id reads it back), page by page with first and after: the
// relay refuses a list without first to an account holding more than it
// prices a list at. It reads pages until one comes back empty, since the
// relay may answer fewer than first (its bound, or a cap lowered since)
// with more to come; after a short page it asks for as many as that page
// held, so the empty page that ends the list costs no more than the page
// before. It stops with an error after EndpointsMaxPages pages.
func Endpoints[T any](ctx context.Context, c *Client, fields string, id func(T) string) ([]T, error) {
	q := fmt.Sprintf(endpointsQuery, fields)
	all := []T{}
	vars := map[string]any{"first": EndpointsPage}
	for range EndpointsMaxPages {
		var out struct{ Endpoints []T }
		if err := c.Do(ctx, q, vars, &out); err != nil {
			return nil, err
		}
		if len(out.Endpoints) == 0 {
			return all, nil
		}
		all = append(all, out.Endpoints...)
		vars = map[string]any{"first": len(out.Endpoints), "after": id(out.Endpoints[len(out.Endpoints)-1])}
	}
	return nil, fmt.Errorf("the account holds more Endpoints than %d pages list (%d read): stopped", EndpointsMaxPages, len(all))
}
