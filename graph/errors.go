package graph

import (
	"context"
	"errors"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/relayhq/relay/domain"
)

// codes maps domain sentinels to the machine-readable extensions.code.
var codes = []struct {
	err  error
	code string
}{
	{domain.ErrUnauthenticated, "UNAUTHENTICATED"},
	{domain.ErrNotFound, "NOT_FOUND"},
	{domain.ErrInvalidInput, "INVALID_INPUT"},
	{domain.ErrRetryNotProxy, "RETRY_NOT_PROXY"},
	{domain.ErrAgentNotConnected, "AGENT_NOT_CONNECTED"},
	{domain.ErrPayloadIncomplete, "PAYLOAD_INCOMPLETE"},
	// A change that kept colliding with concurrent ones (commands decide
	// again several times first): the caller may simply try again.
	{domain.ErrWrongExpectedRevision, "CONFLICT"},
}

// Code returns the extensions.code for err, or "" when it is not a refusal.
func Code(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// errorPresenter translates errors once, at the edge: refusals get their
// code and message; anything else is logged and hidden behind INTERNAL.
func errorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) && gqlErr.Err == nil {
			return gqlErr // parse and validation errors already speak GraphQL
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
			log.DebugContext(ctx, "graphql operation cancelled by the client", "path", ge.Path.String(), "err", err)
			ge.Message = "cancelled"
			code = "INTERNAL"
		case code == "":
			log.ErrorContext(ctx, "graphql resolver failed", "path", ge.Path.String(), "err", err)
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
		}
		var inv *domain.InvalidInputError
		if errors.As(err, &inv) {
			ge.Extensions["field"] = inv.Field
		}
		return ge
	}
}
