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
