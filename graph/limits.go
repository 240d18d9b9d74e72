package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"

	"github.com/99designs/gqlgen/complexity"
	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/dustin/go-humanize"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/generated"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/graph/wsgql"
	"github.com/relayhq/relay/internal/connguard"
	"github.com/relayhq/relay/readmodel"
)

// Limits bound what one request may make the API cost. Every value is
// explicit; zero takes the default.
type Limits struct {
	// MaxBody is the largest request body (POST) or query string (GET);
	// larger ones are answered 413 before anything parses them.
	MaxBody int64
	// MaxCost is the budget of one operation in cost points (see costs):
	// a document over it is refused before it runs.
	MaxCost int
	// MaxFields bounds the fields of one operation, counted after every
	// fragment is expanded (so aliases and repeated spreads count).
	MaxFields int
	// MaxTokens bounds the tokens of one document, so parsing and
	// validation (quadratic in the worst case) stay small.
	MaxTokens int
	// MaxAnswer bounds the bytes of one answer (an HTTP response, or one
	// message of a WebSocket operation): the payloads it loads and every
	// field as encoded. AnswerBudget bounds all answers at once.
	MaxAnswer, AnswerBudget int64
	// CaptureCap is the relay's --capture-cap: how many bytes a stored
	// body may hold, which is what a payload field weighs.
	CaptureCap int64
	// AnswerLogBytes bounds the bytes of the log the reads of stored
	// requests and answers (attempts' responses, a delivery's request and
	// latest answer) read for one answer, as MaxAnswer bounds what it
	// holds (see DefaultAnswerLogBytes).
	AnswerLogBytes int64
	// Endpoints is the relay's --account-endpoints: the most Endpoints
	// one account holds, so the most rows `endpoints` returns without
	// first, which is what it is priced at. Zero (a relay without that
	// cap, too): DefaultAccountEndpoints, and the list reads no more than
	// that: an account that holds more pages it with first and after
	// (endpointRows).
	Endpoints int
}

// Defaults of Limits.
const (
	DefaultMaxBody    = 1 << 20
	DefaultMaxCost    = 10_000
	DefaultMaxFields  = 500
	DefaultMaxTokens  = 1000
	DefaultCaptureCap = 256 << 10
	// DefaultAccountEndpoints is --account-endpoints' default.
	DefaultAccountEndpoints = 1000
)

// Page sizes of the connections (deliveries and events): first 0 or
// absent means DefaultPageSize, a larger first than MaxPageSize is clamped.
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// Typical lengths of the lists held in a row the operation has already
// read (a delivery's headers and attempts): they multiply what each
// element selects, but the row's read is the work, made once whatever
// they hold. They price work, not bytes: the bytes an answer holds are
// bounded as it is built (answersize, --max-api-answer).
const (
	headersPerList  = 8
	attemptsPerList = 2 // a forward and a retry: most deliveries have one attempt
)

// The most rows of the lists without first that read their rows, under
// the relay's caps: each is priced at that many rows (the Endpoints of an
// account at Limits.Endpoints).
const (
	// tokensPerList: an owner's list holds every token of the account, its
	// API tokens and its members' browser sessions.
	tokensPerList = domain.MaxTokens + domain.MaxMembers*domain.MaxSessions
	// membersPerList: members and open invites share the seats.
	membersPerList = domain.MaxMembers
	// listenersPerList: an Endpoint's sessions open at once, at most
	// (--max-endpoint-sessions is at most this).
	listenersPerList = domain.MaxEndpointSessions
	// usagePerList: accountsUsage's first, at most.
	usagePerList = maxUsageFirst
)

const (
	// payloadCost is what a payload field (a body, a response body, an
	// event's data) weighs: reading it from the log, not its size. Twenty
	// points let a default page with every field of Delivery pass the
	// default budget (about 9 000) and refuse a dozen aliased pages of
	// bodies, a page of 100 with every field, or a few hundred aliases.
	payloadCost = 20
	// compareCost is what a comparison (Delivery.compare) weighs: two
	// payload reads, and decoding and walking two JSON bodies of up to
	// 256 KiB (about 70 ms of a core and 23 MiB allocated at worst, where a
	// payload read is well under a millisecond). With the default budget,
	// at most nine per operation.
	compareCost = 1000
	// mutationCost is what each mutation field weighs on top of what it
	// selects: every one is a write to the log (or waits for an agent).
	mutationCost = 1000
	// passwordCost is what a mutation that hashes a password weighs (an
	// argon2id hash: 19 MiB and tens of milliseconds of a core): with the
	// default budget, one such mutation per request, so aliases cannot
	// multiply the work behind one rate-limited request.
	passwordCost = 5000
	// eventsScanCost is what a page of the log weighs on top of its rows:
	// an account's page may read up to 10 000 events to find its own.
	eventsScanCost = 1000
	// searchScanCost is what a filtered page of history weighs on top of
	// its rows: it may examine 100 000 deliveries, or read 500 from the
	// log, to fill itself.
	searchScanCost = 1000
	// explanationCost is what an explanation (explanation, why) weighs on
	// top of what it selects: one read of the agent sessions its attempts
	// name and, for a 503 "no agent connected", one of the Endpoint's last
	// session; views only, nothing from the log, so a small share of a
	// payload field.
	explanationCost = 3
	// queueReadCost is what an Endpoint's queue weighs, whatever it
	// selects (its fields are columns): two reads of the views, its policy
	// from the Endpoint's row and its counts.
	queueReadCost = 2
)

// MaxValues bounds the JSON values (objects, arrays, strings, numbers,
// literals, at any depth) of one request's variables and extensions: a POST
// body, a GET's variables and extensions together, a WebSocket subscribe's
// payload. They are counted before anything decodes them, since a generic
// decode takes about twenty times their JSON (a map for every empty
// object): 14 MiB of empty objects in a completeForward took 299 MiB. The
// largest legitimate variables are an agent's completeForward, 3 or 4
// values per header: 10 000 values pass an answer of 2 400 headers, where
// real ones have tens (the binary data path, agentwire, has its own bound).
const MaxValues = wsgql.DefaultMaxValues

// tooManyValues is the refusal of a request over MaxValues: 413,
// REQUEST_TOO_LARGE, as a body over --max-api-body.
func tooManyValues(w http.ResponseWriter) {
	err := fmt.Errorf("%w: the variables and extensions of a request may hold at most %d JSON values", ErrRequestTooLarge, MaxValues)
	writeErrors(w, http.StatusRequestEntityTooLarge, &gqlerror.Error{Message: err.Error(), Extensions: map[string]any{"code": "REQUEST_TOO_LARGE"}})
}

// Sentinels of the refusals the limits make; the error presenter gives
// them their extensions.code.
var (
	ErrQueryTooComplex = errors.New("query too complex")
	ErrRequestTooLarge = errors.New("request too large")
)

func (l Limits) withDefaults() Limits {
	if l.MaxBody <= 0 {
		l.MaxBody = DefaultMaxBody
	}
	if l.MaxCost <= 0 {
		l.MaxCost = DefaultMaxCost
	}
	if l.MaxFields <= 0 {
		l.MaxFields = DefaultMaxFields
	}
	if l.MaxTokens <= 0 {
		l.MaxTokens = DefaultMaxTokens
	}
	if l.MaxAnswer <= 0 {
		l.MaxAnswer = DefaultMaxAnswer
	}
	if l.AnswerBudget <= 0 {
		l.AnswerBudget = DefaultAnswerBudget
	}
	if l.CaptureCap <= 0 {
		l.CaptureCap = DefaultCaptureCap
	}
	if l.AnswerLogBytes <= 0 {
		l.AnswerLogBytes = DefaultAnswerLogBytes
	}
	if l.Endpoints <= 0 {
		l.Endpoints = DefaultAccountEndpoints
	}
	return l
}

// endpointRows is the most rows the endpoints list reads, and what it is
// priced at: first when given (at least 1), never more than the rows
// Limits.Endpoints prices (max, after withDefaults). The rows an account
// holds are bounded by --account-endpoints only when it is set and was
// never lowered, so the list reads at most this many whatever it holds.
func endpointRows(max int, first *int) int {
	if first != nil && *first > 0 {
		return min(*first, max)
	}
	return max
}

// pageSize is the number of rows a page of first holds at most.
func pageSize(first *int) int {
	switch {
	case first == nil || *first <= 0:
		return DefaultPageSize
	case *first > MaxPageSize:
		return MaxPageSize
	default:
		return *first
	}
}

// clampFirst applies MaxPageSize to a first argument; 0 and negative
// values go on to the reader, which answers the default or INVALID_INPUT.
func clampFirst(first *int) int { return min(deref(first), MaxPageSize) }

// mul multiplies costs, saturating instead of overflowing.
func mul(a, b int) int {
	if a <= 0 || b <= 0 {
		return max(a, b, 0)
	}
	if a > math.MaxInt32/b {
		return math.MaxInt32
	}
	return a * b
}

// add adds costs, saturating instead of overflowing.
func add(a, b int) int { return min(a+b, math.MaxInt32) }

// costs weighs every field: 1 point for a field (gqlgen's default), a
// payload field payloadCost, and a list as its length times what each
// element selects.
func costs(l Limits) generated.ComplexityRoot {
	l = l.withDefaults()
	fixed := func(w int) func(int) int { return func(int) int { return w } }
	list := func(n int) func(int) int { return func(child int) int { return add(1, mul(n, child)) } }
	// rows prices a list whose rows are built whole from one read of the
	// views, whatever they select: each of its n rows weighs 1, and its
	// columns (see columns) nothing more; what reads beyond the row
	// weighs its reads. So the console's list of 1 000 Endpoints with all
	// their settings costs 1 001, where a point a column made it 28 001.
	rows := func(n int) func(int) int { return func(child int) int { return add(1, mul(n, add(1, child))) } }
	page := func(child int, first *int) int { return add(1, mul(pageSize(first), child)) }
	write := func(child int) int { return add(mutationCost, child) }

	var c generated.ComplexityRoot
	c.Delivery.Body = fixed(payloadCost)
	c.Delivery.BodyBase64 = fixed(payloadCost)
	// A response body is text, or base64 when it is not UTF-8.
	// The response body is one read, most often the same read of the
	// delivery's stream as its request: its two forms share a payload's
	// weight.
	c.Delivery.ResponseBody = fixed(payloadCost / 2)
	c.Delivery.ResponseBodyBase64 = fixed(payloadCost / 2)
	c.Delivery.Headers = list(headersPerList)
	c.Delivery.ResponseHeaders = list(headersPerList)
	c.Delivery.Attempts = list(attemptsPerList)
	// One attempt, its response read alone: the same read as a list's.
	c.Delivery.Attempt = func(child int, _ string) int { return add(1, child) }
	// The responses of a delivery's attempts come from one read of its
	// stream, shared by its attempts: a payload's weight over a typical
	// list of them, whatever each selects (its fields are that read's).
	c.Attempt.Response = fixed(payloadCost / attemptsPerList)
	// An edit is a column of the attempt's row: what it selects costs
	// nothing more.
	c.Attempt.Edit = fixed(1)
	// So is a delivery's provider.
	c.Delivery.Provider = fixed(1)
	// A delivery's place in its queue is one indexed row of the queue
	// view, whatever it selects.
	c.Delivery.Queue = fixed(1)
	c.Query.QueuedDeliveries = func(child int, _ string, _ *string, first *int) int {
		n := 50
		if first != nil && *first > 0 {
			n = min(*first, 1000)
		}
		return add(1, mul(n, child))
	}
	c.Mutation.RedriveDead = func(child int, _ string) int { return write(child) }
	c.Mutation.RedriveDeadPage = func(child int, _ string, _ *string) int { return write(child) }
	c.Delivery.Explanation = fixed(explanationCost)
	// A comparison reads the delivery's payload and its attempts'
	// responses, then decodes and walks two bodies of up to
	// compare.MaxStructured: up to tens of milliseconds of a core, whatever
	// its changes select.
	c.Delivery.Compare = func(int, string, string) int { return compareCost }
	stats := func(child int, _ *model.StatsRange) int { return add(statsCost, child) }
	c.Endpoint.Stats = stats
	c.Inspector.Stats = stats
	c.Stats.Buckets = list(readmodel.StatsBuckets)
	// why is the same computation in parts: its facts are already made,
	// whatever it selects.
	c.Delivery.Why = fixed(explanationCost)
	c.ForwardRequest.BodyBase64 = fixed(payloadCost)
	c.ForwardRequest.Headers = list(headersPerList)
	// An event's payload is JSON with the body in base64.
	c.Event.Data = fixed(payloadCost)

	history := func(child int, first *int, _ *string, filter *model.DeliveryFilter) int {
		if filter != nil {
			return add(searchScanCost, page(child, first))
		}
		return page(child, first)
	}
	c.Inspector.Deliveries = history
	c.Endpoint.Deliveries = history
	c.Query.Events = func(child int, _ *string, first *int) int { return add(eventsScanCost, page(child, first)) }
	// An Endpoint's row holds its settings, answer, handshakes, filters,
	// retention and agent count: its listeners, queue, history and stats
	// read more, and weigh it.
	c.Query.Endpoints = func(child int, first *int, _ *string) int { return rows(endpointRows(l.Endpoints, first))(child) }
	c.Endpoint.Listeners = list(listenersPerList)
	c.Endpoint.Queue = fixed(queueReadCost)
	// A token's row, and the logins of the account's members, are read
	// once for the list.
	c.Query.Tokens = rows(tokensPerList)
	c.Query.AccountsUsage = func(child int, account *string, first *int) int {
		n := defaultUsageFirst
		switch {
		case account != nil:
			n = 1
		case first != nil && *first > 0:
			n = min(*first, usagePerList)
		}
		return add(1, mul(n, child))
	}

	c.Mutation.CreateInspector = func(child int, _ *bool) int { return write(child) }
	c.Mutation.SignUp = func(child int, _ string, _ *string) int { return write(child) }
	c.Mutation.CreateInvite = func(child int, _ *string) int { return write(child) }
	c.Mutation.CreateToken = func(child int, _ string, _ *string) int { return write(child) }
	c.Mutation.RevokeToken = func(child int, _ string) int { return write(child) }
	c.Mutation.RequestDeviceCode = func(child int, _ string) int { return write(child) }
	c.Mutation.PollDeviceCode = func(child int, _ string) int { return write(child) }
	c.Mutation.ApproveDevice = func(child int, _ string) int { return write(child) }
	c.Mutation.DenyDevice = func(child int, _ string) int { return write(child) }
	c.Mutation.CreateAccount = func(child int, _ string) int { return write(child) }
	c.Mutation.CreateEndpoint = func(child int, _ model.CreateEndpointInput) int { return write(child) }
	c.Mutation.UpdateEndpoint = func(child int, _ string, _ model.UpdateEndpointInput) int { return write(child) }
	c.Mutation.DeleteEndpoint = func(child int, _ string) int { return write(child) }
	c.Mutation.IssueSmeeKey = func(child int, _ string) int { return write(child) }
	c.Mutation.RevokeSmeeKey = func(child int, _ string) int { return write(child) }
	c.Mutation.RetryDelivery = func(child int, _ string, _ *model.RequestEditInput) int { return write(child) }
	c.Mutation.CompleteForward = func(child int, _ model.CompleteForwardInput) int { return write(child) }
	hashes := func(child int) int { return add(passwordCost, write(child)) }
	c.Mutation.SignUpWithPassword = func(child int, _, _, _ string, _ *string) int { return hashes(child) }
	c.Mutation.SignIn = func(child int, _, _ string) int { return hashes(child) }
	c.Mutation.SetUpSignIn = func(child int, _, _ string) int { return hashes(child) }
	c.Mutation.ChangePassword = func(child int, _, _ string) int { return hashes(child) }
	c.Mutation.JoinAccount = func(child int, _, _, _ string) int { return hashes(child) }
	c.Mutation.SignOut = write
	c.Mutation.CreateMemberInvite = func(child int, _ *model.MemberRole, _ *string) int { return write(child) }
	c.Mutation.RemoveMember = func(child int, _ string) int { return write(child) }
	c.Mutation.ChangeMemberRole = func(child int, _ string, _ model.MemberRole) int { return write(child) }
	c.Account.Members = list(membersPerList)
	c.Account.Activity = func(child int, first *int) int {
		n := 50
		if first != nil && *first > 0 {
			n = min(*first, maxActivity)
		}
		return add(1, mul(n, child))
	}
	return c
}

// columns are the fields of rows built whole from one read of the views,
// whatever they select: an Endpoint's settings, answer, handshakes,
// filters, retention and agent count; a token's columns and its member's
// login; an Endpoint's queue, counts and policy, made by its two reads.
// They weigh nothing beyond their row, which the list that returns it
// prices (rows in costs); the bytes they add are bounded as the answer is
// built. An Endpoint's listeners, queue, history and stats read more, and
// are priced as such.
var columns = map[string]struct{}{
	"Endpoint.id": {}, "Endpoint.name": {}, "Endpoint.url": {}, "Endpoint.smeeKey": {}, "Endpoint.mode": {},
	"Endpoint.target": {}, "Endpoint.responseCapture": {}, "Endpoint.agentConnected": {}, "Endpoint.agentCount": {},
	"Endpoint.filters": {}, "Endpoint.createdAt": {}, "Endpoint.refusedRequests": {}, "Endpoint.answer": {},
	"Endpoint.handshakes": {}, "Endpoint.retention": {},
	"Token.id": {}, "Token.name": {}, "Token.createdAt": {}, "Token.lastUsedAt": {}, "Token.expiresAt": {},
	"Token.current": {}, "Token.member": {}, "Token.session": {},
	"EndpointQueue.policy": {}, "EndpointQueue.queued": {}, "EndpointQueue.inFlight": {}, "EndpointQueue.dead": {},
}

// operationCost is what an operation weighs: its fields by costs, the
// columns of rows by their row.
func operationCost(ctx context.Context, es graphql.ExecutableSchema, op *ast.OperationDefinition, vars map[string]any) int {
	return complexity.Calculate(ctx, es, op, vars, complexity.WithIgnoreFields(columns))
}

// costLimit refuses an operation with more fields than MaxFields or a
// cost above MaxCost before it runs. Fields are counted first, with an
// early stop, so the cost walk (which expands every fragment spread
// again) never meets a document that repeats fragments to blow it up.
type costLimit struct {
	limits Limits
	es     graphql.ExecutableSchema
	// charge takes an operation's cost from its caller's API budget
	// (apicost.go), or refuses it.
	charge func(ctx context.Context, op *ast.OperationDefinition, cost int) error
}

var _ interface {
	graphql.OperationContextMutator
	graphql.HandlerExtension
} = &costLimit{}

func (c *costLimit) ExtensionName() string { return "CostLimit" }

func (c *costLimit) Validate(es graphql.ExecutableSchema) error {
	c.es = es
	return nil
}

func (c *costLimit) MutateOperationContext(ctx context.Context, op *graphql.OperationContext) *gqlerror.Error {
	if n := countFields(op.Operation.SelectionSet, c.limits.MaxFields); n > c.limits.MaxFields {
		return tooComplex(fmt.Errorf("%w: more than %d fields (aliases and fragments included)", ErrQueryTooComplex, c.limits.MaxFields))
	}
	cost := operationCost(ctx, c.es, op.Operation, op.Variables)
	if cost > c.limits.MaxCost {
		return tooComplex(fmt.Errorf("%w: cost %d, budget %d (ask for fewer rows, aliases or payload fields)", ErrQueryTooComplex, cost, c.limits.MaxCost))
	}
	if c.charge != nil {
		if err := c.charge(ctx, op.Operation, cost); err != nil {
			// The error presenter codes it (RATE_LIMITED, retryAfterSeconds).
			return &gqlerror.Error{Message: err.Error(), Err: err}
		}
	}
	return nil
}

// tooComplex is a refusal that the transports answer as a client error
// (422) and the error presenter codes QUERY_TOO_COMPLEX.
func tooComplex(err error) *gqlerror.Error {
	ge := &gqlerror.Error{Message: err.Error(), Err: err}
	errcode.Set(ge, codeQueryTooComplex)
	return ge
}

const codeQueryTooComplex = "QUERY_TOO_COMPLEX"

// registerCodes tells gqlgen's transports that QUERY_TOO_COMPLEX refuses
// the request as a whole (422 over HTTP, an error message on a socket),
// once: errcode's registry is a plain map.
var registerCodes sync.Once

// countFields counts the fields of a selection set with every fragment
// expanded, stopping as soon as the count passes limit.
func countFields(set ast.SelectionSet, limit int) int {
	n := 0
	var walk func(ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, s := range set {
			if n > limit {
				return
			}
			switch s := s.(type) {
			case *ast.Field:
				n++
				walk(s.SelectionSet)
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			case *ast.FragmentSpread:
				if s.Definition != nil {
					walk(s.Definition.SelectionSet)
				}
			}
		}
	}
	walk(set)
	return n
}

// limitBody answers 413 to a request body or query string larger than
// max, before any transport reads it; a smaller body is read here, through
// http.MaxBytesReader, so nothing downstream reads more than max.
func limitBody(max int64, present graphql.ErrorPresenterFunc, next http.Handler) http.Handler {
	tooLarge := func(w http.ResponseWriter, r *http.Request, body io.Reader) {
		err := fmt.Errorf("%w: the API takes at most %s per request", ErrRequestTooLarge, humanize.IBytes(uint64(max)))
		writeErrors(w, http.StatusRequestEntityTooLarge, present(r.Context(), err))
		connguard.Linger(w, body)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if int64(len(r.URL.RawQuery)) > max || r.ContentLength > max {
			tooLarge(w, r, r.Body)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				tooLarge(w, r, r.Body)
				return
			case err != nil:
				writeErrors(w, http.StatusBadRequest, &gqlerror.Error{Message: "could not read the request body"})
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// writeErrors answers a GraphQL error response with status.
func writeErrors(w http.ResponseWriter, status int, errs ...*gqlerror.Error) {
	b, err := json.Marshal(graphql.Response{Errors: errs})
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
