package graph

import (
	"context"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// endpointsPage reads the account's Endpoints for the endpoints list:
// endpointRows of them at most, what the list is priced at, after the
// Endpoint after names. Without first, the list is the whole of the
// account's Endpoints or a refusal: one row more is read to tell, so an
// account holding more than the list is priced at (a relay without
// --account-endpoints, or with it lowered since) is told to page rather
// than given a list cut short or read whole.
func (r *Resolver) endpointsPage(ctx context.Context, accountID string, first *int, after *string) ([]readmodel.Endpoint, error) {
	if first != nil && *first < 0 {
		return nil, &domain.InvalidInputError{Field: "first", Reason: "must not be negative"}
	}
	limit := endpointRows(r.endpointsListed, first)
	whole := first == nil || *first == 0
	read := limit
	if whole {
		read++
	}
	eps, err := r.Views.Endpoints(ctx, accountID, deref(after), read)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, &domain.InvalidInputError{Field: "after", Reason: "names no Endpoint of this account"}
	}
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	if whole && len(eps) > limit {
		return nil, &domain.InvalidInputError{Field: "first", Reason: fmt.Sprintf(
			"this account holds more than %d Endpoints, the most a list without first returns: page with first (at most %d) and after", limit, limit)}
	}
	return eps, nil
}
