package graph

import (
	"context"
	"fmt"
	"time"

	"github.com/relayhq/relay/ratelimit"
)

// Every agent session (a forwardRequests subscription: relay agent, relay
// listen, the desktop) is written to the log twice, its start with its
// filters' text (up to 8 KiB) and its end, often with a change of primary
// beside each, and kept in the views' sessions: for as long as the log,
// whatever the retention and outside any storage quota. A socket that
// started and ended sessions in a loop wrote about 5.7 MB of log a second.
// So the sessions started are rated, per node:
//   - per account, DefaultSessionRate: its burst lets a listener start a
//     session on each of the account's Endpoints (--account-endpoints,
//     1 000) at once, and reconnects are backed off by the agent;
//   - per client address, four times that (as sign-ins are), since
//     accounts cost a sign-up each: several developers behind one address
//     each have their own account's rate, a loop over fresh accounts meets
//     the address's.
//
// Beyond either the subscription is refused RATE_LIMITED with
// retryAfterSeconds, nothing is recorded, and the agent tries again after
// its backoff. How many stay open is capped by the tunnel
// (tunnel/sessioncaps.go: TOO_MANY_SESSIONS).

// DefaultSessionRate is how many agent sessions one account starts (see
// Resolver.SessionRate); a client address starts four times as many.
var DefaultSessionRate = ratelimit.Rate{N: 60, Per: time.Minute, Burst: 1000}

// limitSessions takes one session start from the account's bucket, then
// from the client address's, or refuses with a RateLimitedError saying
// which. An account's refusal takes nothing from its address, so a
// looping agent leaves its neighbours' sessions alone.
func (r *Resolver) limitSessions(ctx context.Context, accountID string) error {
	now := time.Now()
	if ok, retry := r.sessionsByAccount.allow(r.SessionRate, DefaultSessionRate, 1, accountID, now); !ok {
		return &RateLimitedError{RetryAfter: retry,
			Reason: fmt.Sprintf("this account started agent sessions as fast as it may (%s)", r.sessionsByAccount.rate)}
	}
	client, _ := ctx.Value(clientKey).(string)
	if ok, retry := r.sessionsByClient.allow(r.SessionRate, DefaultSessionRate, 4, client, now); !ok {
		return &RateLimitedError{RetryAfter: retry,
			Reason: fmt.Sprintf("agent sessions were started from your address as fast as they may (4 × %s)", r.sessionsByAccount.rate)}
	}
	return nil
}
