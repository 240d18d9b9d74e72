package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/answersize"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/tunnel"
)

// codes maps domain sentinels to the machine-readable extensions.code.
var codes = []struct {
	err  error
	code string
}{
	// Before ErrUnauthenticated, which it also is.
	{ErrAdminNoAccount, "FORBIDDEN"},
	{domain.ErrUnauthenticated, "UNAUTHENTICATED"},
	{domain.ErrNotFound, "NOT_FOUND"},
	{domain.ErrForbidden, "FORBIDDEN"},
	{domain.ErrInvalidInput, "INVALID_INPUT"},
	{domain.ErrRetryNotProxy, "RETRY_NOT_PROXY"},
	{domain.ErrAgentNotConnected, "AGENT_NOT_CONNECTED"},
	{domain.ErrPayloadIncomplete, "PAYLOAD_INCOMPLETE"},
	// The account's storage quota is used up (ingress answers 507): a
	// retry or a redrive would store more.
	{domain.ErrStorageQuota, "QUOTA_EXCEEDED"},
	// The relay's free disk is below its reserve (--min-free-disk): new
	// work, retries and redrives wait until space is freed.
	{domain.ErrDiskReserve, "INSUFFICIENT_STORAGE"},
	// The polling outcomes of device login (RFC 8628 §3.5).
	{domain.ErrAuthorizationPending, "AUTHORIZATION_PENDING"},
	{domain.ErrSlowDown, "SLOW_DOWN"},
	{domain.ErrExpiredToken, "EXPIRED_TOKEN"},
	{domain.ErrAccessDenied, "ACCESS_DENIED"},
	// A change that kept colliding with concurrent ones (commands decide
	// again several times first): the caller may simply try again.
	{domain.ErrWrongExpectedRevision, "CONFLICT"},
	// The change is in the log but the views did not reach it in time
	// (see commands.Config.ViewsWait): reading it again later shows it.
	{domain.ErrUnavailable, "UNAVAILABLE"},
	// The API's own limits (limits.go).
	{ErrQueryTooComplex, codeQueryTooComplex},
	// A live subscription the relay dropped (deliveries.go): subscribing
	// again with since catches up.
	{ErrFellBehind, "FELL_BEHIND"},
	{ErrRequestTooLarge, "REQUEST_TOO_LARGE"},
	{answersize.ErrTooLarge, "ANSWER_TOO_LARGE"},
	// A delivery's latest answer past the answer's log budget
	// (withLogBudget).
	{readmodel.ErrLogBudget, "ANSWER_TOO_LARGE"},
	// Answers in progress hold the process's answer budget: like the
	// views being behind, a moment later the same request may pass.
	{answersize.ErrBusy, "UNAVAILABLE"},
}

// ErrAdminNoAccount refuses the operator's admin token (relay serve
// --admin-token) a field that acts for an account: the token is valid, so
// the refusal is FORBIDDEN, not UNAUTHENTICATED, and it is never counted
// as a refused token (FailedAuthRate). It is also domain.ErrUnauthenticated,
// so that where no account reads as nothing (me is null, an Endpoint's
// delivery not found) the admin token reads as no token does.
var ErrAdminNoAccount error = adminNoAccountError{}

type adminNoAccountError struct{}

func (adminNoAccountError) Error() string {
	return "the admin token acts for no account: it reads the whole log and makes accounts, invites and quotas; this needs an account's token (relay login)"
}

// Is makes errors.Is(err, domain.ErrUnauthenticated) true: the admin
// token is signed in as no account.
func (adminNoAccountError) Is(target error) bool { return target == domain.ErrUnauthenticated }

// RateLimitedError refuses an anonymous mutation from a client address that
// used up its rate (--anonymous-rate), or anything else over its limit;
// RetryAfter says when one more is let through, Reason what was exceeded
// ("": the client address's rate).
type RateLimitedError struct {
	RetryAfter time.Duration
	Reason     string
}

func (e *RateLimitedError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = "too many requests from this address"
	}
	return fmt.Sprintf("%s; retry in %d s", reason, retryAfterSeconds(e.RetryAfter))
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// Code returns the extensions.code for err, or "" when it is not a refusal.
func Code(err error) string {
	var limited *RateLimitedError
	if errors.As(err, &limited) {
		return "RATE_LIMITED"
	}
	// An agent session past the open sessions' caps (tunnel/sessioncaps.go).
	var sessions *tunnel.TooManySessionsError
	if errors.As(err, &sessions) {
		return "TOO_MANY_SESSIONS"
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// presentError is err as the API presents it, for an error sent outside
// gqlgen's own path (wsgql.EndWith).
func (r *Resolver) presentError(ctx context.Context, err error) *gqlerror.Error {
	return errorPresenter(r.Logger)(ctx, err)
}

// errorPresenter translates errors once, at the edge: refusals get their
// code and message; anything else is logged and hidden behind INTERNAL.
func errorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) && gqlErr.Err == nil {
			// Parse, validation and decoding errors already speak GraphQL,
			// but may quote the request: never send it back.
			gqlErr.Message = quoteless(gqlErr.Message)
			return gqlErr
		}
		ge := graphql.DefaultErrorPresenter(ctx, err)
		if ge.Extensions == nil {
			ge.Extensions = map[string]any{}
		}
		code := Code(err)
		switch {
		case code == "" && errors.Is(err, context.Canceled):
			// The client went away mid-operation (an agent that closes
			// after a refusal, a closed browser tab): nothing failed here.
			log.DebugContext(ctx, "graphql operation cancelled by the client", "path", ge.Path.String(), "error", err)
			ge.Message = "cancelled"
			code = "INTERNAL"
		case code == "":
			log.ErrorContext(ctx, "graphql resolver failed", "path", ge.Path.String(), "error", err)
			ge.Message = "internal error"
			code = "INTERNAL"
		}
		ge.Extensions["code"] = code
		switch code {
		case "NOT_FOUND":
			// One message for every absent thing: an unknown id and another
			// account's id must read the same.
			ge.Message = "not found"
		case "CONFLICT":
			ge.Message = "changed concurrently by another request; try again" // no stream names
		case "ANSWER_TOO_LARGE":
			if errors.Is(err, readmodel.ErrLogBudget) {
				ge.Message = readmodel.ErrLogBudget.Error() // not where in the log
			}
		case "UNAVAILABLE":
			if errors.Is(err, answersize.ErrBusy) || errors.Is(err, commands.ErrRetryBodyBudget) {
				break // its message says what to do and names no internals
			}
			// No file names or causes: those are in the relay's log and /readyz.
			ge.Message = "temporarily unavailable: the relay's views are behind its log; a change was recorded and shows once they catch up"
		}
		var inv *domain.InvalidInputError
		if errors.As(err, &inv) {
			ge.Extensions["field"] = inv.Field
		}
		var limited *RateLimitedError
		if errors.As(err, &limited) {
			ge.Extensions["retryAfterSeconds"] = retryAfterSeconds(limited.RetryAfter)
		}
		return ge
	}
}

// maxMessage bounds an error message: gqlparser quotes the offending token
// and gqlgen the whole body of a request it cannot decode, and a request
// is up to --max-api-body long.
const maxMessage = 200

// quoteless cuts what a transport or parser error message quotes of the
// request: the body gqlgen appends to a JSON decoding error, and anything
// past maxMessage bytes.
func quoteless(msg string) string {
	if strings.HasPrefix(msg, "json request body could not be decoded") {
		msg, _, _ = strings.Cut(msg, " body:")
	}
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}
