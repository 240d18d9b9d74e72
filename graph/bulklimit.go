package graph

import (
	"fmt"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/ratelimit"
)

// A bulk mutation appends many events in one call: a redrive (redriveDead,
// redriveDeadPage) puts back up to commands.MaxRedrive dead deliveries, one
// append each, one after another on the log's shared writer. Without a
// bound one account looping on them kept the writer busy with its appends
// for as long as it went on (--account-api-cost, off by default, is the
// only other limit). So the calls are admitted per account, per node, at
// DefaultBulkRate: beyond it RATE_LIMITED with retryAfterSeconds, nothing
// appended; relay retry --all --dead waits that long and goes on.

// DefaultBulkRate is how many bulk mutations one account calls (see
// Resolver.BulkRate): a burst of 10 calls (10 000 deliveries put back),
// then one every 10 s, 100 appends a second at most.
var DefaultBulkRate = ratelimit.Rate{N: 6, Per: time.Minute, Burst: 10}

// limitBulk takes one bulk mutation from the account's bucket, or refuses
// with a RateLimitedError.
func (r *Resolver) limitBulk(accountID string) error {
	if ok, retry := r.bulk.allow(r.BulkRate, DefaultBulkRate, 1, accountID, r.now()); !ok {
		return &RateLimitedError{RetryAfter: retry,
			Reason: fmt.Sprintf("this account made bulk changes (each up to %d appends) as fast as it may (%s)", commands.MaxRedrive, r.bulk.rate)}
	}
	return nil
}
