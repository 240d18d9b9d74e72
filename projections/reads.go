package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
)

// Reads run on the reader pool. Each returns an error wrapping
// domain.ErrNotFound when the thing is absent. Reads that touch several
// tables run in one transaction so they see one committed batch.

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func notFound(what, id string) error { return fmt.Errorf("%s %q: %w", what, id, domain.ErrNotFound) }

// pointRead returns the context a one-row read by key runs under. Such a read
// takes microseconds, while a cancellable context makes the SQLite driver arm
// a watcher goroutine for the statement, which on the per-request paths
// (address, token) cost more than the read itself. A context that has
// already ended still fails the read.
func pointRead(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}
