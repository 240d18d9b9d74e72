package readmodel

import "context"

type searcherKey struct{}

// WithSearcher names who a search counts against (the signed-in account,
// else the anonymous client's address): the views share their search pool
// by it, so that no one searcher holds every connection of it.
func WithSearcher(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, searcherKey{}, key)
}

// SearcherOf is the searcher WithSearcher named, "" for none.
func SearcherOf(ctx context.Context) string {
	key, _ := ctx.Value(searcherKey{}).(string)
	return key
}
