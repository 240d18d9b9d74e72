package readmodel

import (
	"context"

	"github.com/relayhq/relay/internal/clientkey"
)

type readerKey struct{}

// WithReader names who the views' reads under ctx count against: the
// signed-in account, else the anonymous client's network. The views share
// their connections by it (the readers of ordinary reads, and the search
// pool), so that no one reader holds every connection of either; the
// relay's own reads name no one and take no share.
func WithReader(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, readerKey{}, key)
}

// ReaderOf is the reader WithReader named, "" for none.
func ReaderOf(ctx context.Context) string {
	key, _ := ctx.Value(readerKey{}).(string)
	return key
}

// ReaderKey is the reader a caller's key counts as: an anonymous client's
// (a key as clientkey.Of makes it) its network (clientkey.Network), since
// one IPv6 /48 is 65 536 client keys and each would otherwise have a share
// of its own; any other key (an account's) is its own reader.
func ReaderKey(client string) string {
	if network := clientkey.Network(client); network != "" {
		return network
	}
	return client
}

type withoutResponseKey struct{}

// WithoutResponse marks reads of deliveries' payloads under ctx as wanting
// the recorded request only: the latest local answer (its headers and
// body, in an event of its own that may hold 10 MiB) is not read from the
// log, and the rows' ResponseHeaders and ResponseBody are left empty. A
// query that selects a delivery's request, or compares its attempts, read
// and decoded the latest answer too.
func WithoutResponse(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutResponseKey{}, true)
}

// WantsResponse reports whether reads under ctx read the latest answer
// (see WithoutResponse).
func WantsResponse(ctx context.Context) bool {
	skip, _ := ctx.Value(withoutResponseKey{}).(bool)
	return !skip
}

type withoutRequestKey struct{}

// WithoutRequest marks reads of deliveries' payloads under ctx as wanting
// the latest local answer only: the recorded request (its headers and
// body, up to --max-body, in the receipt) is not read from the log unless
// the receipt holds that answer too, and the rows' Headers, Body,
// Trailers and RedactedQuery are left nil. Nor is it reserved of the
// answer's LogBudget: a query of a delivery's answer alone waited behind,
// or was refused for, a request it does not show.
func WithoutRequest(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutRequestKey{}, true)
}

// WantsRequest reports whether reads under ctx read the recorded request
// (see WithoutRequest).
func WantsRequest(ctx context.Context) bool {
	skip, _ := ctx.Value(withoutRequestKey{}).(bool)
	return !skip
}
