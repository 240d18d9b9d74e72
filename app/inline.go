package app

import (
	"context"
	"database/sql"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/projections"
)

// inlineViews lets the embedded log's writer apply the views in its own
// transactions (see projections.Inline): one commit per batch of
// deliveries instead of two. Other logs feed the views by subscription.
type inlineViews struct{ *projections.Inline }

func (i inlineViews) Apply(ctx context.Context, tx *sql.Tx, b sqlite.InlineBatch) (func(bool), error) {
	return i.Inline.Apply(ctx, tx, b.After, b.Events, b.Read)
}

// attachInline attaches the views to the log's writer when the log is the
// embedded one.
func attachInline(ctx context.Context, store domain.EventStore, views *projections.Runner) error {
	s, ok := store.(*sqlite.Store)
	if !ok {
		return nil
	}
	return s.SetInline(ctx, inlineViews{views.Inline(inlineMinEvents)})
}

// inlineMinEvents: batches smaller than this are left to the views' own
// runner (see projections.Runner.Inline; measured in docs/projections.md).
const inlineMinEvents = 8
