package projections

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/relayhq/relay/internal/clientkey"
	"github.com/relayhq/relay/readmodel"
)

// readerConns is the size of the views' reader pool, which serves every
// read but searches: history pages, deliveries, Endpoints, accounts, stats,
// the rows of live subscriptions. A reader (readmodel.WithReader: an
// account, or an anonymous client's network) holds at most readerShare of
// its connections at once, its other reads waiting for one of its own to
// end rather than in the pool's queue: however many reads one reader asks
// for at once, another reader's read finds a connection it does not hold.
// The relay's own reads (the ingress's address look-ups, the queue driver,
// retention, the live rows every subscription of an address shares) name
// no reader and take no share.
const (
	readerConns = 4
	readerShare = readerConns - 1
)

// readPool is the reader pool with each reader's share of it. Its methods
// are database/sql's: each holds the reader's share for as long as its
// connection is held (until the rows are read to the end or closed, the
// row scanned, the transaction ended).
type readPool struct {
	db     *sql.DB
	shares clientkey.Shares
}

// take waits for a turn of ctx's reader's share; nil without a reader.
func (p *readPool) take(ctx context.Context) (release func(), err error) {
	key := readmodel.ReaderOf(ctx)
	if key == "" {
		return nil, nil
	}
	release, err = p.shares.Take(ctx, key, readerShare)
	if err != nil {
		return nil, fmt.Errorf("wait for the reader's share of the views' readers: %w", err)
	}
	return release, nil
}

// readRows are rows that give their share back once read or closed.
type readRows struct {
	*sql.Rows
	release func()
}

// Next is sql.Rows.Next; at the end the connection and the share go back.
func (r *readRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.done()
	return false
}

// Close is sql.Rows.Close, giving the share back too.
func (r *readRows) Close() error {
	err := r.Rows.Close()
	r.done()
	return err
}

func (r *readRows) done() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

// QueryContext is sql.DB.QueryContext within the reader's share. The rows
// are a pointer: the scan helpers take them as an interface, which a value
// would be copied into once per row.
func (p *readPool) QueryContext(ctx context.Context, query string, args ...any) (*readRows, error) {
	release, err := p.take(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := p.db.QueryContext(ctx, query, args...)
	if err != nil {
		if release != nil {
			release()
		}
		return nil, err
	}
	return &readRows{Rows: rows, release: release}, nil
}

// readRow is a row that gives its share back once scanned.
type readRow struct {
	row     *sql.Row
	err     error
	release func()
}

func (r readRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	err := r.row.Scan(dest...)
	if r.release != nil {
		r.release()
	}
	return err
}

func (p *readPool) QueryRowContext(ctx context.Context, query string, args ...any) readRow {
	release, err := p.take(ctx)
	if err != nil {
		return readRow{err: err}
	}
	return readRow{row: p.db.QueryRowContext(ctx, query, args...), release: release}
}

// pointRow runs a prepared point read (readStmts) within ctx's reader's
// share, the statement under qctx (pointRead).
func (p *readPool) pointRow(ctx, qctx context.Context, st *sql.Stmt, args ...any) readRow {
	release, err := p.take(ctx)
	if err != nil {
		return readRow{err: err}
	}
	return readRow{row: st.QueryRowContext(qctx, args...), release: release}
}

// readTx is a read transaction that gives its share back when it ends.
type readTx struct {
	*sql.Tx
	release func()
}

// Rollback is sql.Tx.Rollback, giving the share back too; it may be called
// again (a deferred one after an early end).
func (t *readTx) Rollback() error {
	err := t.Tx.Rollback()
	if t.release != nil {
		t.release()
		t.release = nil
	}
	return err
}

func (p *readPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (readTx, error) {
	release, err := p.take(ctx)
	if err != nil {
		return readTx{}, err
	}
	tx, err := p.db.BeginTx(ctx, opts)
	if err != nil {
		if release != nil {
			release()
		}
		return readTx{}, err
	}
	return readTx{Tx: tx, release: release}, nil
}

// ReaderStats are the reader pool's figures (database/sql's): WaitCount
// counts the reads that queued for a connection, which no reader's share
// should make another reader do.
func (v *Runner) ReaderStats() sql.DBStats { return v.r.db.Stats() }
