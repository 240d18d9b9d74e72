package apiclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// EndpointsIn reads fields of the Endpoints ids names (each must hold id;
// id reads it back), which are a run of the account's Endpoints in the
// order the endpoints list gives them, listed right after the Endpoint
// after (empty: the run begins the list): page rows a request, one
// request at a time, with first and after, so len(ids) rows take
// ceil(len(ids)/page) requests rather than one each. For fields the relay
// prices per row (stats), page is the most its budget holds: a page it
// refuses QUERY_TOO_COMPLEX is asked again, and every page after it, with
// half as many rows. A relay that answers fewer rows than asked is asked
// again after the last it gave. It stops, with the rows read, when the
// list no longer holds what ids names (an empty page, or a row after
// ids' last), and returns them with the error of a page that fails.
func EndpointsIn[T any](ctx context.Context, c *Client, fields, after string, ids []string, page int, id func(T) string) ([]T, error) {
	q := fmt.Sprintf(endpointsQuery, fields)
	all := []T{}
	page = max(page, 1)
	// ids[next:] are still to read; each request moves next on, halves
	// page or ends the loop.
	for next := 0; next < len(ids); {
		n := min(page, len(ids)-next)
		vars := map[string]any{"first": n}
		if next > 0 {
			vars["after"] = ids[next-1]
		} else if after != "" {
			vars["after"] = after
		}
		var out struct{ Endpoints []T }
		if err := c.Do(ctx, q, vars, &out); err != nil {
			var e *Error
			if errors.As(err, &e) && e.Code == "QUERY_TOO_COMPLEX" && n > 1 {
				page = (n + 1) / 2
				continue
			}
			return all, fmt.Errorf("Endpoints %d to %d of %d: %w", next+1, next+n, len(ids), err)
		}
		if len(out.Endpoints) == 0 {
			return all, nil
		}
		all = append(all, out.Endpoints...)
		k := slices.Index(ids[next:], id(out.Endpoints[len(out.Endpoints)-1]))
		if k < 0 {
			return all, nil
		}
		next += k + 1
	}
	return all, nil
}
