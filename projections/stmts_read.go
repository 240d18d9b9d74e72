package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// readStmts are the hot reads, prepared once at Open on the reader pool:
// database/sql prepares each lazily on every pooled connection it runs on
// and keeps it there, so a lookup per request binds and steps a compiled
// statement instead of parsing SQL. Reads in a transaction bind them with
// tx.StmtContext, which reuses the connection's compiled copy.
type readStmts struct {
	inspector, address, endpoint, token *sql.Stmt
	accountQuota                        *sql.Stmt
	delivery, deliveryAttempts          *sql.Stmt
	page, pageAttempts                  *sql.Stmt
}

// qAddress finds an inspector or an Endpoint in one statement. Both tables
// are probed by primary key; an inspector wins should an id be both, as
// ingress always looked inspectors up first.
const qAddress = `SELECT 0, id, '', '', '', 0, 0, expired, last_activity_at, ttl_ms, stored_bytes, answers, '', smee, '', network
		FROM inspectors WHERE id = ?1
	UNION ALL
	SELECT 1, id, account_id, mode, target, response_capture, deleted, 0, last_activity_at, 0, 0, answers, filters, 0, smee_key_hash, ''
		FROM endpoints WHERE id = ?1
	ORDER BY 1 LIMIT 1`

const (
	qInspector = `SELECT id, created_at, last_activity_at, ttl_ms, expired, purged, stored_bytes, refused, answers, smee
		FROM inspectors WHERE id = ?`
	qEndpoint = "SELECT " + endpointColumns + " FROM endpoints WHERE id = ? AND deleted = 0"
	qToken    = `SELECT a.id, a.name, a.created_at, ` + tokenColumns + ` FROM tokens t JOIN accounts a ON a.id = t.account_id
		WHERE t.hash = ? AND t.revoked = 0`
	qDelivery         = deliveryFrom + "WHERE d.id = ?"
	qDeliveryAttempts = "SELECT " + attemptColumns + " FROM attempts WHERE delivery_position = ? ORDER BY position"
	qPage             = deliveryFrom + `WHERE d.address = ?1 AND d.position < ?2 ORDER BY d.position DESC LIMIT ?3`
	// One query for every attempt of a page: the page's positions, found
	// again through deliveries_by_address, probe the attempts index.
	qPageAttempts = "SELECT " + attemptColumns + ` FROM attempts
		WHERE delivery_position IN (
			SELECT position FROM deliveries WHERE address = ?1 AND position BETWEEN ?2 AND ?3)
		ORDER BY position`
)

func (s *readStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&s.accountQuota, "SELECT " + usageColumns + " FROM accounts WHERE id = ?"},
		{&s.inspector, qInspector}, {&s.address, qAddress}, {&s.endpoint, qEndpoint}, {&s.token, qToken},
		{&s.delivery, qDelivery}, {&s.deliveryAttempts, qDeliveryAttempts},
		{&s.page, qPage}, {&s.pageAttempts, qPageAttempts},
	} {
		st, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			s.close()
			return fmt.Errorf("prepare %q: %w", p.query, err)
		}
		*p.stmt = st
	}
	return nil
}

func (s *readStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.inspector, s.address, s.endpoint, s.token, s.accountQuota,
		s.delivery, s.deliveryAttempts, s.page, s.pageAttempts} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	*s = readStmts{}
	return errors.Join(errs...)
}
