package graph

import (
	"context"
	"log/slog"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/tunnel"
)

// EventLog is the read side of the store that auditors page through: the
// whole log for the operator, an account's own streams (located by the
// views' index) for an account.
type EventLog interface {
	ReadAll(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error)
	ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error)
}

// Resolver holds the API's dependencies; resolvers only adapt between
// GraphQL and these.
type Resolver struct {
	Service *commands.Service
	Views   Views
	Log     EventLog
	Hub     tunnel.Sessions
	// PublicURL turns an address id into its public URL.
	PublicURL func(id string) string
	Logger    *slog.Logger
	// AdminToken, when set, lets the operator read the whole event log.
	AdminToken string
	// Anonymous limits the mutations anyone may call without a token
	// (createInspector, signUp) per client address; nil: no limit.
	Anonymous *ratelimit.Keyed
	// Now is the clock that decides whether an idle inspector has expired;
	// time.Now when nil.
	Now func() time.Time
}

func (r *Resolver) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}
