package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/relayhq/relay/domain"
)

// Inline is a projection the writer applies inside its own transaction, so
// a batch of appends and the rows it projects commit together: one commit
// and one fsync per batch instead of one for the log and another for the
// views. The projection keeps its own checkpoint in its rows; the writer
// only offers it each committed batch.
//
// A failing projection never fails an append: its writes are rolled back
// to a savepoint and the log commits without them (the projection then
// catches up on its own, from the log).
type Inline interface {
	// Attach is called once, with the writer's only connection, outside
	// any transaction: the projection attaches its file and prepares its
	// statements there.
	Attach(ctx context.Context, db *sql.DB) error
	// Apply projects a batch inside the writer's transaction tx, before
	// it commits. It returns nil, nil when it does not take the batch
	// (it is behind the log, or busy); otherwise done is called once the
	// transaction has committed (true) or failed (false).
	Apply(ctx context.Context, tx *sql.Tx, b InlineBatch) (done func(committed bool), err error)
}

// InlineBatch is what a batch offers an inline projection.
type InlineBatch struct {
	// After is the log's last position before the batch.
	After uint64
	// Events are the batch's events, in position order.
	Events []domain.RecordedEvent
	// Read returns up to max events after a position and up to After, read
	// inside the transaction: a projection a little behind the log reads
	// what it missed there and catches up in the same commit.
	Read func(after uint64, max int) ([]domain.RecordedEvent, error)
}

// SetInline attaches p to the writer: every later batch is offered to it.
// It waits for the writer's transaction in progress, if any (the writer has
// one connection).
func (s *Store) SetInline(ctx context.Context, p Inline) error {
	if s.isClosed() {
		return ErrClosed
	}
	if err := p.Attach(ctx, s.writeDB); err != nil {
		return fmt.Errorf("attach inline projection: %w", err)
	}
	s.inline.Store(&p)
	return nil
}

// applyInline offers the batch's events to the inline projection, under a
// savepoint so that a failure takes back only the projection's writes.
func (s *Store) applyInline(ctx context.Context, tx *sql.Tx, p Inline, events []domain.RecordedEvent) (func(bool), error) {
	if _, err := tx.StmtContext(ctx, s.stmts.inlineSavepoint).ExecContext(ctx); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	before := s.last.Load()
	read := func(after uint64, max int) ([]domain.RecordedEvent, error) {
		// Committed events only: the transaction also sees the batch's own.
		rows, err := tx.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE position > ? AND position <= ? ORDER BY position LIMIT ?`,
			clamp(after), clamp(before), max)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var evs []domain.RecordedEvent
		for rows.Next() {
			e, err := scanEvent(rows)
			if err != nil {
				return nil, err
			}
			evs = append(evs, e)
		}
		return evs, rows.Err()
	}
	done, err := p.Apply(ctx, tx, InlineBatch{After: before, Events: events, Read: read})
	if err != nil {
		s.log.Warn("inline projection failed: the log commits without it", slog.Any("error", err))
		if _, rbErr := tx.StmtContext(ctx, s.stmts.inlineRollbackTo).ExecContext(ctx); rbErr != nil {
			return nil, fmt.Errorf("roll back inline projection: %w (after %v)", rbErr, err)
		}
		done = nil
	}
	if _, err := tx.StmtContext(ctx, s.stmts.inlineRelease).ExecContext(ctx); err != nil {
		if done != nil {
			done(false)
		}
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return done, nil
}
