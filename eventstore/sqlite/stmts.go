package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// stmtSpec names a statement to prepare and where to keep it.
type stmtSpec struct {
	dst   **sql.Stmt
	query string
}

// preparer is a *sql.DB or a *sql.Conn.
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// prepareAll prepares every statement on db. On error it closes the ones
// already prepared, so the caller has nothing to clean up.
func prepareAll(ctx context.Context, db preparer, specs []stmtSpec) error {
	for i, sp := range specs {
		stmt, err := db.PrepareContext(ctx, sp.query)
		if err != nil {
			for _, done := range specs[:i] {
				_ = closeStmts(*done.dst)
				*done.dst = nil
			}
			return fmt.Errorf("prepare %q: %w", sp.query, err)
		}
		*sp.dst = stmt
	}
	return nil
}

// closeStmts closes the statements that were prepared (nil ones are skipped,
// so a half-opened store closes cleanly).
func closeStmts(stmts ...*sql.Stmt) error {
	var errs []error
	for _, s := range stmts {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}
