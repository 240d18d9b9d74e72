package graph

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/graph/answersize"
	"github.com/relayhq/relay/graph/generated"
	"github.com/relayhq/relay/graph/wsgql"
	"github.com/relayhq/relay/internal/agentwire"
	"github.com/relayhq/relay/readmodel"
)

// doneDelay is how long a Done frame may wait to go out with the next
// frame to its agent (wsgql.BinaryConfig.ReplyDelay). Nothing on a sender's
// path waits for it: on the subprotocols that acknowledge every Complete the
// agent's worker does, to log the answer as taken; on the newest only a
// refusal is sent, and the agent waits for none.
const doneDelay = 2 * time.Millisecond

// ServerOptions tune the GraphQL endpoint.
type ServerOptions struct {
	// KeepAlive is how often the server pings WebSocket clients; a client
	// that misses pongs is dropped after twice this long, which is how a
	// dead agent is noticed within seconds.
	KeepAlive time.Duration
	// MaxWSMessage bounds each WebSocket message a client sends;
	// MaxAgentAnswer is the largest response body an authenticated socket
	// (an agent's) must still be able to return in completeForward.
	MaxWSMessage, MaxAgentAnswer int64
	// MaxWSSubscriptions bounds the operations of one socket, MaxWSPerIP the
	// sockets of one client address, MaxWSPerNetwork those of one client
	// network (zero: clientkey.NetworkShare × MaxWSPerIP).
	MaxWSSubscriptions, MaxWSPerIP, MaxWSPerNetwork int
	// Playground serves GraphiQL to browsers that GET the endpoint; nil
	// disables it.
	Playground http.Handler
	// Limits bound what one request may cost; zero values take defaults.
	Limits Limits
	// GoAway, once stopped, closes every WebSocket with 1001 (the relay is
	// shutting down: wsgql.GoAway).
	GoAway *wsgql.GoAway
	// MessageBudget, when set, holds the bytes of every WebSocket message
	// past MaxWSMessage (agents' answers) of every socket, each under its
	// client address and its caller's account, within their shares
	// (wsgql.Config.Budget).
	MessageBudget wsgql.MessageBudget
}

// Bounds of the document caches, in bytes of query text: a legitimate
// document is a few KiB, and a parsed one holds about a hundred times its
// text, so the query cache stays within tens of MiB whatever is sent.
const (
	maxCachedDoc    = 16 << 10
	queryCacheBytes = 256 << 10
	apqCacheBytes   = 1 << 20
)

// NewHandler returns the /graphql endpoint: POST and GET queries, and
// subscriptions over WebSocket (graphql-transport-ws).
func NewHandler(r *Resolver, opts ServerOptions) http.Handler {
	if opts.KeepAlive == 0 {
		opts.KeepAlive = 5 * time.Second
	}
	limits := opts.Limits.withDefaults()
	r.endpointsListed = limits.Endpoints
	r.captureCap = limits.CaptureCap
	r.answerLogBytes = limits.AnswerLogBytes
	registerCodes.Do(func() { errcode.RegisterErrorType(codeQueryTooComplex, errcode.KindProtocol) })
	srv := handler.New(generated.NewExecutableSchema(generated.Config{Resolvers: r, Complexity: costs(limits)}))
	answers := answersize.New(limits.MaxAnswer, limits.AnswerBudget)
	srv.AddTransport(wsgql.New(wsgql.Config{
		Answers:              answers,
		KeepAlive:            opts.KeepAlive,
		MaxMessage:           opts.MaxWSMessage,
		MessageLimit:         func(ctx context.Context) int64 { return agentMessageLimit(ctx, opts) },
		MaxValues:            MaxValues,
		MaxSubscriptions:     opts.MaxWSSubscriptions,
		MaxSocketsPerClient:  opts.MaxWSPerIP,
		MaxSocketsPerNetwork: opts.MaxWSPerNetwork,
		Budget:               opts.MessageBudget,
		BudgetKey:            r.callerKey,
		// Tokens travel in connection_init; a session cookie counts only
		// on a same-origin socket (cookieCredential), so a foreign origin
		// gains nothing by opening one.
		CheckOrigin: func(*http.Request) bool { return true },
		Logger:      r.Logger,
		GoAway:      opts.GoAway,
		// Agents that offer it get their forwards and send their answers
		// as binary frames; everything else on the socket stays GraphQL.
		Binary: wsgql.BinaryConfig{Subprotocol: agentwire.Subprotocol, Older: agentwire.Subprotocols[1:], Handle: r.completeFrame,
			// A Done frame answers a Complete (on relay-agent.v3 only one
			// refused); no sender waits for it.
			ReplyDelay: doneDelay},
		InitFunc: func(ctx context.Context, p map[string]any) (context.Context, error) {
			if err := initPosition(ctx, r.Service, p); err != nil {
				return ctx, err
			}
			tok, _ := bearer(initString(p, "Authorization", "authorization"))
			if tok == "" { // a console's socket: its session cookie, same-origin only (cookieCredential)
				tok, _ = ctx.Value(tokenKey).(string)
			}
			ctx = withAgentTarget(ctx, initString(p, "agentTarget"))
			return r.withConnection(ctx, tok, commands.NewEventID()), nil
		},
	}))
	srv.AddTransport(transport.Options{})
	srv.AddTransport(jsonGET{})
	srv.AddTransport(jsonPOST{})
	// No multipart transport: the schema takes no uploads.
	maxDoc := min(maxCachedDoc, int(limits.MaxBody))
	srv.SetQueryCache(newSizedCache(1000, maxDoc, queryCacheBytes, func(q string, _ *ast.QueryDocument) int { return len(q) }))
	srv.SetParserTokenLimit(limits.MaxTokens)
	srv.Use(extension.Introspection{})
	srv.Use(extension.AutomaticPersistedQuery{Cache: newSizedCache(100, maxDoc, apqCacheBytes, func(_ string, q string) int { return len(q) })})
	srv.Use(&costLimit{limits: limits, charge: r.chargeAPICost})
	srv.AroundOperations(r.withReader)
	srv.AroundResponses(r.withLogBudget)
	srv.AroundFields(countAnswer)
	present := errorPresenter(r.Logger)
	srv.SetErrorPresenter(present)
	srv.SetRecoverFunc(func(ctx context.Context, v any) error {
		r.Logger.ErrorContext(ctx, "graphql panic", "panic", fmt.Sprint(v))
		return errors.New("internal error")
	})
	h := meterAnswers(answers, limitBody(limits.MaxBody, present, readYourWrites(r.Service, present, WithToken(srv))))
	if opts.Playground == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && req.URL.RawQuery == "" && !websocket.IsWebSocketUpgrade(req) &&
			strings.Contains(req.Header.Get("Accept"), "text/html") {
			opts.Playground.ServeHTTP(w, req)
			return
		}
		h.ServeHTTP(w, req)
	})
}

// agentMessageLimit is the message limit of a socket once connection_init
// is done: an account's socket (an agent's) must be able to send
// completeForward with a whole local response, base64 in JSON. The agent
// reads a local response up to 10 MiB; a relay whose --max-body is larger
// lets that much through too.
func agentMessageLimit(ctx context.Context, opts ServerOptions) int64 {
	if _, ok := ctx.Value(accountKey).(readmodel.Account); !ok {
		return 0
	}
	body := max(opts.MaxAgentAnswer, 10<<20)
	return (body+2)/3*4 + max(opts.MaxWSMessage, 1<<20)
}

// initString reads the first string value among keys of a connection_init
// payload.
func initString(p map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := p[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}
