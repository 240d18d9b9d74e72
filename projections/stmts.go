package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// stmtCache holds the writer's statements, prepared once on its single
// connection outside any transaction: tx.StmtContext then reuses them in
// every batch instead of compiling SQL for every event. (Preparing lazily
// inside a batch would need a second connection the writer does not have.)
type stmtCache struct {
	stmts map[string]*sql.Stmt
}

func (c *stmtCache) prepare(ctx context.Context, db *sql.DB, queries []string) error {
	c.stmts = make(map[string]*sql.Stmt, len(queries))
	for _, q := range queries {
		s, err := db.PrepareContext(ctx, q)
		if err != nil {
			c.close()
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		c.stmts[q] = s
	}
	return nil
}

func (c *stmtCache) get(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	s, ok := c.stmts[query]
	if !ok {
		return nil, errors.New("statement not prepared: " + query)
	}
	return tx.StmtContext(ctx, s), nil
}

func (c *stmtCache) close() {
	for q, s := range c.stmts {
		_ = s.Close()
		delete(c.stmts, q)
	}
}
