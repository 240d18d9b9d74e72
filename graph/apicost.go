package graph

import (
	"context"
	"fmt"
	"sync"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/readmodel"
)

// An account's API cost budget (relay serve --account-api-cost, per
// account relay accounts set-quota --api-cost) bounds the cost points its
// operations spend over time, where --max-query-cost bounds one
// operation. Each operation is charged the cost costLimit computes, before
// it runs, to a token bucket per node:
//   - an account's token or session: the account's bucket, at its override
//     or the relay's default;
//   - no token, or one refused: the client address's bucket (as the
//     anonymous rate limit counts it), at the relay's default;
//   - the operator's admin token: never charged;
//   - an agent's completeForward alone: never charged, since each answers
//     a delivery the account's --account-rate already admitted, and
//     refusing it would fail that delivery.
//
// A subscription is charged once, when it starts.
//
// An operation that costs more than the whole burst is charged a full
// bucket: it passes when the bucket is full, so a burst below
// --max-query-cost slows such operations down rather than refusing them
// for ever.
const maxAPICostKeys = 100_000

// apiCostGate holds the buckets of the API cost budgets, made on first use.
type apiCostGate struct {
	once    sync.Once
	buckets *ratelimit.Keyed
}

// chargeAPICost takes an operation's cost from its caller's budget, or
// refuses it with a RateLimitedError saying when it may run.
func (r *Resolver) chargeAPICost(ctx context.Context, op *ast.OperationDefinition, cost int) error {
	if r.isAdmin(ctx) || onlyAgentAnswers(op) {
		return nil
	}
	key, budget := r.apiCostBudget(ctx)
	if budget.Off() {
		return nil
	}
	r.apiCost.once.Do(func() {
		// Keys beyond maxAPICostKeys share one bucket at the default
		// (with the default off, that bucket lets everything through).
		r.apiCost.buckets = ratelimit.NewKeyed(r.APICost, maxAPICostKeys)
	})
	if ok, retry := r.apiCost.buckets.AllowN(key, budget, min(cost, budget.Burst), r.now()); !ok {
		return &RateLimitedError{RetryAfter: retry, Reason: fmt.Sprintf(
			"this account's API budget (%s cost points, --account-api-cost) is spent; this operation costs %d", budget, cost)}
	}
	return nil
}

// apiCostBudget is the bucket key and budget of the request's caller: its
// account's, else its client address's (see maxAPICostKeys).
func (r *Resolver) apiCostBudget(ctx context.Context) (string, ratelimit.Rate) {
	var acc string
	if a, ok := ctx.Value(accountKey).(readmodel.Account); ok { // a socket's, authenticated once
		acc = a.ID
	} else if tok, _ := ctx.Value(tokenKey).(string); tok != "" {
		// Not r.credential: a refused token is counted (FailedAuthRate)
		// when a resolver reads it, not here too.
		if a, _, err := r.authenticate(ctx, tok); err == nil {
			acc = a.ID
		}
	}
	if acc == "" {
		// The address as clientkey.Of makes it, so the buckets group it by
		// network (ratelimit.Keyed); an account's key is no address.
		client, _ := ctx.Value(clientKey).(string)
		return client, r.APICost
	}
	if r.Quotas == nil {
		return "account:" + acc, r.APICost
	}
	u, err := r.Quotas.AccountQuota(ctx, acc)
	if err != nil {
		// The operation is not refused for its budget's read: it meets
		// the views' trouble itself if it reads them.
		r.Logger.DebugContext(ctx, "read the API cost budget of an account; charging the default", "account", acc, "error", err)
		return "account:" + acc, r.APICost
	}
	return "account:" + acc, commands.EffectiveAPICost(commands.QuotaDefaults{APICost: r.APICost}, u.APICostQuota)
}

// onlyAgentAnswers reports whether op is a mutation of completeForward
// fields alone (an agent's answers; __typename aside).
func onlyAgentAnswers(op *ast.OperationDefinition) bool {
	if op.Operation != ast.Mutation || len(op.SelectionSet) == 0 {
		return false
	}
	for _, s := range op.SelectionSet {
		f, ok := s.(*ast.Field)
		if !ok || (f.Name != "completeForward" && f.Name != "__typename") {
			return false
		}
	}
	return true
}
