package graph

import (
	"context"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/relayhq/relay/graph/answersize"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/readmodel"
)

// withReader names every operation's caller to the views before it runs
// (readmodel.WithReader), over HTTP and on a socket alike: each of its
// reads then counts against the caller's share of the views' connections
// (projections.readerShare), so that one account or network asking for
// many reads at once queues them behind its own, not ahead of everyone's.
// Its answer counts against the caller's share of the answer budget the
// same way (answersize.Meter.SetCaller).
func (r *Resolver) withReader(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	caller := r.callerKey(ctx)
	answersize.SetCaller(ctx, caller)
	ctx = context.WithValue(ctx, callerCtxKey{}, caller) // its resolvers ask again
	return next(readmodel.WithReader(ctx, readmodel.ReaderKey(caller)))
}

// callerCtxKey holds an operation's callerKey, worked out once by
// withReader.
type callerCtxKey struct{}

// callerKey is who an operation counts against: the signed-in account
// ("account:" + its id), else the client's address as clientkey.Of makes
// it. A refused token counts as no token; a socket is authenticated once,
// at connection_init. Inside an operation it is the key withReader worked
// out, so a token is not looked up again.
func (r *Resolver) callerKey(ctx context.Context) string {
	if caller, ok := ctx.Value(callerCtxKey{}).(string); ok {
		return caller
	}
	if acc, ok := ctx.Value(accountKey).(readmodel.Account); ok {
		return "account:" + acc.ID
	}
	if _, isHTTP := ctx.Value(authMemoKey).(*authMemo); isHTTP {
		if tok, _ := ctx.Value(tokenKey).(string); tok != "" {
			// Not r.credential: a refused token is counted (FailedAuthRate)
			// when a resolver reads it, not here too.
			if acc, _, err := r.authenticate(ctx, tok); err == nil {
				return "account:" + acc.ID
			}
		}
	}
	client, _ := ctx.Value(clientKey).(string)
	return client
}

// admitReplay takes one of the caller's replays of a deliveries
// subscription with since (Resolver.ReplayRate, by default smee's
// ingress.DefaultReplayRate), or refuses it with a RateLimitedError. A
// replay reads up to projections.ReplayWindow rows: a client that
// subscribes again and again in a loop gets a burst of replays, then one a
// second. The console and relay tail subscribe again after a RATE_LIMITED
// with backoff, from the same cursor, so nothing is missed.
func (r *Resolver) admitReplay(ctx context.Context) error {
	if ok, retry := r.replays.allow(r.ReplayRate, ingress.DefaultReplayRate, 1, r.callerKey(ctx), time.Now()); !ok {
		return &RateLimitedError{RetryAfter: retry, Reason: "this client subscribed with since too often; subscribe again later from the same cursor"}
	}
	return nil
}
