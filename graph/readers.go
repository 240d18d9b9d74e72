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

// DefaultAnswerLogBytes is Limits.AnswerLogBytes' default: one answer's
// reads of stored requests and answers read at most 128 MiB of the log, twice what one
// read of a delivery's attempts' responses may read (64 MiB, projections).
// That read stops once past its bound, so it reads up to 64 MiB and the
// answer that crossed it (up to the agent's 10 MiB of body, about 14 MB
// in base64): twice its bound lets it finish whole in one answer beside
// the delivery's latest answer and an attempt read alone (Delivery.attempt,
// which the responses past that read name), as one client's query of a
// delivery does, while an operation of hundreds of aliases reads 128 MiB
// where each alias read up to 64 MiB. Less would cut short a read that its
// own bounds allow; more would only let such an operation read more.
const DefaultAnswerLogBytes = 128 << 20

// withLogBudget gives every answer (an HTTP response, or each message of
// a subscription: gqlgen runs the response middleware once for each, and
// the answer's fields resolve in the context it passes on) a budget of
// Limits.AnswerLogBytes for its reads of stored requests and answers from
// the log (readmodel.LogBudget): the reads of attempts' responses, of a
// comparison's two sides and of a delivery's request and latest answer are
// charged to it, and refused once it is spent.
func (r *Resolver) withLogBudget(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	return next(readmodel.WithLogBudget(ctx, readmodel.NewLogBudget(r.answerLogBytes)))
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
