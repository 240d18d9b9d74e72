package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

const endpointColumns = `id, account_id, name, mode, target, response_capture, created_at, deleted, refused,
	(SELECT COUNT(*) FROM agent_sessions s WHERE s.endpoint_id = endpoints.id AND s.open = 1)`

func scanEndpoint(row interface{ Scan(...any) error }) (readmodel.Endpoint, error) {
	var (
		e       readmodel.Endpoint
		mode    string
		created int64
	)
	if err := row.Scan(&e.ID, &e.AccountID, &e.Name, &mode, &e.Target, &e.ResponseCapture,
		&created, &e.Deleted, &e.Refused, &e.AgentCount); err != nil {
		return readmodel.Endpoint{}, err
	}
	e.Mode, e.CreatedAt = domain.EndpointMode(mode), fromNanos(created)
	return e, nil
}

// Endpoints lists an account's Endpoints that are not deleted, oldest first.
func (v *Views) Endpoints(ctx context.Context, accountID string) ([]readmodel.Endpoint, error) {
	rows, err := v.r.QueryContext(ctx, "SELECT "+endpointColumns+
		" FROM endpoints WHERE account_id = ? AND deleted = 0 ORDER BY position", accountID)
	if err != nil {
		return nil, fmt.Errorf("list endpoints of account %q: %w", accountID, err)
	}
	defer rows.Close()
	out := []readmodel.Endpoint{}
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("list endpoints of account %q: %w", accountID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list endpoints of account %q: %w", accountID, err)
	}
	return out, nil
}

// Endpoint returns an Endpoint; a deleted one is not found. Callers check
// ownership (another account's Endpoint must read as not found too).
func (v *Views) Endpoint(ctx context.Context, id string) (readmodel.Endpoint, error) {
	qctx, err := pointRead(ctx)
	if err != nil {
		return readmodel.Endpoint{}, fmt.Errorf("read endpoint %q: %w", id, err)
	}
	e, err := scanEndpoint(v.rs.endpoint.QueryRowContext(qctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Endpoint{}, notFound("endpoint", id)
	}
	if err != nil {
		return readmodel.Endpoint{}, fmt.Errorf("read endpoint %q: %w", id, err)
	}
	return e, nil
}

// OpenAgentSessions lists sessions that connected and never disconnected, in
// connection order. After a restart none of them is really connected; the
// service records their disconnection at startup.
func (v *Views) OpenAgentSessions(ctx context.Context) ([]readmodel.AgentSession, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT agent_id, endpoint_id, target, connected_at
		FROM agent_sessions WHERE open = 1 ORDER BY position`)
	if err != nil {
		return nil, fmt.Errorf("list open agent sessions: %w", err)
	}
	defer rows.Close()
	out := []readmodel.AgentSession{}
	for rows.Next() {
		var (
			s  readmodel.AgentSession
			at int64
		)
		if err := rows.Scan(&s.AgentID, &s.EndpointID, &s.Target, &at); err != nil {
			return nil, fmt.Errorf("list open agent sessions: %w", err)
		}
		s.ConnectedAt = fromNanos(at)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list open agent sessions: %w", err)
	}
	return out, nil
}

// Account returns an account.
func (v *Views) Account(ctx context.Context, id string) (readmodel.Account, error) {
	a, err := scanAccount(v.r.QueryRowContext(ctx, "SELECT id, name, created_at FROM accounts WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Account{}, notFound("account", id)
	}
	if err != nil {
		return readmodel.Account{}, fmt.Errorf("read account %q: %w", id, err)
	}
	return a, nil
}

// AccountByTokenHash returns the account a token acts for, given the hex
// SHA-256 of the token; revoked and unknown tokens are not found.
func (v *Views) AccountByTokenHash(ctx context.Context, hash string) (readmodel.Account, error) {
	qctx, err := pointRead(ctx)
	if err != nil {
		return readmodel.Account{}, fmt.Errorf("read token: %w", err)
	}
	a, err := scanAccount(v.rs.token.QueryRowContext(qctx, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Account{}, fmt.Errorf("token: %w", domain.ErrNotFound) // never echo a credential
	}
	if err != nil {
		return readmodel.Account{}, fmt.Errorf("read token: %w", err)
	}
	return a, nil
}

func scanAccount(row *sql.Row) (readmodel.Account, error) {
	var (
		a       readmodel.Account
		created int64
	)
	if err := row.Scan(&a.ID, &a.Name, &created); err != nil {
		return readmodel.Account{}, err
	}
	a.CreatedAt = fromNanos(created)
	return a, nil
}

// AccountEvents lists, in log order, up to limit events after position
// after of the streams the account owns (its account, its Endpoints and
// their agents, their deliveries): an index read whose cost is the page's,
// however long the log.
func (v *Views) AccountEvents(ctx context.Context, accountID string, after uint64, limit int) ([]readmodel.EventRef, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT position, stream, revision FROM account_events
		WHERE account_id = ? AND position > ? ORDER BY position LIMIT ?`, accountID, int64(after), limit)
	if err != nil {
		return nil, fmt.Errorf("list events of account %q: %w", accountID, err)
	}
	defer rows.Close()
	out := []readmodel.EventRef{}
	for rows.Next() {
		var (
			r             readmodel.EventRef
			pos, revision int64
		)
		if err := rows.Scan(&pos, &r.Stream, &revision); err != nil {
			return nil, fmt.Errorf("list events of account %q: %w", accountID, err)
		}
		r.Position, r.Revision = uint64(pos), uint64(revision)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events of account %q: %w", accountID, err)
	}
	return out, nil
}

// OpenAttempts lists attempts without an outcome, oldest first. After a
// restart none of them will get one: the sender's connection and the
// agent's session ended with the process; the service records them as
// failed at startup.
func (v *Views) OpenAttempts(ctx context.Context) ([]readmodel.OpenAttempt, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT d.id, a.attempt_id FROM attempts a
		JOIN deliveries d ON d.position = a.delivery_position
		WHERE a.outcome_position IS NULL ORDER BY a.position`)
	if err != nil {
		return nil, fmt.Errorf("list open attempts: %w", err)
	}
	defer rows.Close()
	out := []readmodel.OpenAttempt{}
	for rows.Next() {
		var a readmodel.OpenAttempt
		if err := rows.Scan(&a.DeliveryID, &a.AttemptID); err != nil {
			return nil, fmt.Errorf("list open attempts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list open attempts: %w", err)
	}
	return out, nil
}
