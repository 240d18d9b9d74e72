package graph

import (
	"context"
	"crypto/subtle"
	"errors"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// ownedEndpoint returns an Endpoint of the signed-in account; another
// account's Endpoint is ErrNotFound, exactly like an unknown id.
func (r *Resolver) ownedEndpoint(ctx context.Context, id string) (readmodel.Endpoint, error) {
	acc, err := r.account(ctx)
	if err != nil {
		return readmodel.Endpoint{}, err
	}
	ep, err := r.Views.Endpoint(ctx, id)
	if err != nil {
		return readmodel.Endpoint{}, err
	}
	if ep.AccountID != acc.ID {
		return readmodel.Endpoint{}, domain.ErrNotFound
	}
	return ep, nil
}

// visibleDelivery returns a delivery the caller may read: any inspector's
// (the unguessable address is the secret) or one of the account's Endpoints'.
func (r *Resolver) visibleDelivery(ctx context.Context, id string) (readmodel.Delivery, error) {
	d, err := r.deliveryReader(ctx)(ctx, id)
	if err != nil {
		return readmodel.Delivery{}, err
	}
	if d.Kind == domain.AddressInspector {
		return d, nil
	}
	acc, err := r.account(ctx)
	if errors.Is(err, domain.ErrUnauthenticated) || (err == nil && acc.ID != d.AccountID) {
		return readmodel.Delivery{}, domain.ErrNotFound
	}
	return d, err
}

// canWatch checks that the caller may follow an address's history: any
// inspector's, or an Endpoint of the signed-in account that is not deleted
// (another account's reads as not found, as in ownedEndpoint). The Address
// row already carries the owner, so no second read is needed. Without a
// signed-in account an Endpoint's address is not found too, as an unknown
// one is (visibleDelivery does the same): the API confirms no Endpoint id
// to a stranger, although its public URL answers senders. It returns the
// address as the views hold it.
func (r *Resolver) canWatch(ctx context.Context, address string) (readmodel.Address, error) {
	a, err := r.Views.Address(ctx, address)
	if err != nil {
		return readmodel.Address{}, err
	}
	if a.Kind == domain.AddressInspector {
		return a, nil
	}
	acc, err := r.account(ctx)
	if errors.Is(err, domain.ErrUnauthenticated) || (err == nil && (a.Deleted || a.AccountID != acc.ID)) {
		return readmodel.Address{}, domain.ErrNotFound
	}
	return a, err
}

// isAdmin reports whether the request carries the operator's admin token
// (never true when the relay runs without one).
func (r *Resolver) isAdmin(ctx context.Context) bool {
	tok, _ := ctx.Value(tokenKey).(string)
	return r.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(r.AdminToken)) == 1
}
