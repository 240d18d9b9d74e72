package graph

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/clientkey"
	"github.com/relayhq/relay/readmodel"
)

type ctxKey int

const (
	tokenKey ctxKey = iota
	connKey
	accountKey
	agentTargetKey
	clientKey
	tokenInfoKey
	jarKey
	noCookiesKey
	authMemoKey
)

// authMemo keeps one HTTP request's token look-up, so that the cost
// budget (chargeAPICost) and the resolvers read the views once for it. Not
// for WebSockets: a socket authenticates at connection_init and lives on,
// and a memo would outlive a revocation.
type authMemo struct {
	once sync.Once
	acc  readmodel.Account
	tok  readmodel.Token
	err  error
}

// WithToken puts the bearer token of an HTTP request (or, without one,
// its session cookie: see cookieCredential) in its context, and
// the client's address (see clientAddress) for the anonymous rate limit;
// a WebSocket connection's operations inherit both.
func WithToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), clientKey, clientkey.Of(r.RemoteAddr))
		_, noCookies := ctx.Value(noCookiesKey).(string)
		if !websocket.IsWebSocketUpgrade(r) {
			ctx = context.WithValue(ctx, authMemoKey, &authMemo{})
			if !noCookies { // a socket's answers cannot set cookies
				ctx = context.WithValue(ctx, jarKey, &cookieJar{w: w, secure: fromHTTPS(r)})
			}
		}
		if tok, ok := bearer(r.Header.Get("Authorization")); ok {
			ctx = context.WithValue(ctx, tokenKey, tok)
		} else if !noCookies {
			var pass bool
			if ctx, pass = cookieCredential(w, r, ctx); !pass {
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// AnonymousNetworkShare is how many times the rate of anonymous
// mutations one client address has (--anonymous-rate) its network has in
// all (Resolver.AnonymousNetworks): room for a team or a classroom behind
// one /24, and a bound on a /48's 65 536 addresses.
const AnonymousNetworkShare = 10

// limitAnonymous takes one of the client address's anonymous mutations
// (--anonymous-rate), then one of its network's, or refuses with a
// RateLimitedError. The address's bucket is asked first, so that the
// refusals of one address take nothing from its neighbours.
func (r *Resolver) limitAnonymous(ctx context.Context) error {
	if r.Anonymous == nil {
		return nil
	}
	client, _ := ctx.Value(clientKey).(string)
	now := time.Now()
	if ok, retry := r.Anonymous.Allow(client, now); !ok {
		return &RateLimitedError{RetryAfter: retry}
	}
	if network := clientkey.Network(client); r.AnonymousNetworks != nil && network != "" {
		if ok, retry := r.AnonymousNetworks.Allow(network, now); !ok {
			return &RateLimitedError{RetryAfter: retry,
				Reason: fmt.Sprintf("anonymous use from your network (%s) is at its limit, %d times an address's", network, AnonymousNetworkShare)}
		}
	}
	return nil
}

// clientNetwork is the network (IPv4 /24, IPv6 /48) of the client asking,
// "" when unknown: the inspectors it creates share that network's part of
// the relay's storage for guests (domain.GuestStorage), the accounts it
// signs up its part of the storage for sign-ups (domain.SignupStorage).
func clientNetwork(ctx context.Context) string {
	client, _ := ctx.Value(clientKey).(string)
	return clientkey.Network(client)
}

// bearer extracts the token of an "Authorization: Bearer <token>" value.
func bearer(v string) (string, bool) {
	const prefix = "bearer "
	if len(v) <= len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(v[len(prefix):]), true
}

// withConnection marks a WebSocket connection: its token and an id that
// names the agent session it may carry.
func (r *Resolver) withConnection(ctx context.Context, token, connID string) context.Context {
	if token != "" {
		ctx = context.WithValue(ctx, tokenKey, token)
		if acc, tok, err := r.Service.AuthenticateToken(ctx, token); err == nil {
			ctx = context.WithValue(ctx, accountKey, acc)
			ctx = context.WithValue(ctx, tokenInfoKey, tok)
			ctx = r.closeWhenTokenEnds(ctx, token, tok)
		}
	}
	return context.WithValue(ctx, connKey, connID)
}

// withAgentTarget keeps the local target an agent named in its
// connection_init, when it is a valid one: where that agent forwards.
func withAgentTarget(ctx context.Context, target string) context.Context {
	if target == "" || domain.ValidateTarget(target) != nil {
		return ctx
	}
	return context.WithValue(ctx, agentTargetKey, target)
}

// agentTarget is the target kept by withAgentTarget, or "".
func agentTarget(ctx context.Context) string {
	t, _ := ctx.Value(agentTargetKey).(string)
	return t
}

func connectionID(ctx context.Context) string {
	id, _ := ctx.Value(connKey).(string)
	return id
}

// account returns the signed-in account or ErrUnauthenticated. A WebSocket
// connection is authenticated once, at connection_init, so an agent's
// answers do not pay for a token lookup each; the socket is closed when
// that token is revoked (closeWhenTokenEnds).
func (r *Resolver) account(ctx context.Context) (readmodel.Account, error) {
	acc, _, err := r.credential(ctx)
	return acc, err
}
