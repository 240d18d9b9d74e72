package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// Accounts is the read model of accounts, their API tokens and the index
// of the events of the streams each account owns (account_events).
type Accounts struct {
	r  *sql.DB    // the runner's reader pool
	rs *readStmts // the runner's hot reads
}

// Account returns an account.
func (v *Accounts) Account(ctx context.Context, id string) (readmodel.Account, error) {
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
func (v *Accounts) AccountByTokenHash(ctx context.Context, hash string) (readmodel.Account, error) {
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
func (v *Accounts) AccountEvents(ctx context.Context, accountID string, after uint64, limit int) ([]readmodel.EventRef, error) {
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
