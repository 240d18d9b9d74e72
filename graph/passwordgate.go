package graph

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relayhq/relay/internal/clientkey"
)

// PasswordsPerNetwork is how many requests that hash a password (sign-in,
// sign-up with a login, joining, setting up sign-in, changing a password)
// one client network (clientkey.Network: an IPv4 /24, an IPv6 /48) may
// have running or waiting for one of the relay's argon2id turns at once
// (commands' maxHashing, 4). The per-address budgets bound how many a
// client makes a minute, not how many wait at once: a /24's 256 addresses
// at 40 each queued 10 240 hashes, minutes of every turn, ahead of any
// member's sign-in. With this bound the queue holds at most this many per
// network, so a member waits behind the networks hashing, not behind
// their requests.
const PasswordsPerNetwork = 2

// passwordBusyRetry is the retryAfterSeconds of a hash refused for its
// network's turns: one hash takes tens of milliseconds.
const passwordBusyRetry = time.Second

// passwordGate counts each network's requests that hash, running or
// waiting; a network's entry goes when its last one ends, so the map
// holds at most the requests in flight.
type passwordGate struct {
	mu   sync.Mutex
	held map[string]int
}

// admitPassword admits a request that hashes a password for the client's
// network, or refuses it with a RateLimitedError; release ends it.
func (r *Resolver) admitPassword(ctx context.Context) (release func(), err error) {
	client, _ := ctx.Value(clientKey).(string)
	key := clientkey.Network(client)
	if key == "" {
		key = client
	}
	g := &r.passwords
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[key] >= PasswordsPerNetwork {
		return nil, &RateLimitedError{RetryAfter: passwordBusyRetry,
			Reason: fmt.Sprintf("your network (%s) is already signing in %d times at once", key, PasswordsPerNetwork)}
	}
	if g.held == nil {
		g.held = map[string]int{}
	}
	g.held[key]++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.held[key]--; g.held[key] <= 0 {
			delete(g.held, key)
		}
	}, nil
}
