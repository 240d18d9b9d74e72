package projections

import (
	"context"
	"database/sql"

	"github.com/relayhq/relay/domain"
)

// modelWriter is the writing half of one read model. The runner gives it
// every event of a batch, in log order, inside the batch's one
// transaction; the model decides which events it applies and writes only
// its own tables (it may read others', see txn.moved). Writers are made
// anew for each batch, so what they defer lives for one batch.
type modelWriter interface {
	// apply applies the current event, decoded as payload (nil for an event
	// no view can decode). handled tells that the event is one the model
	// applies; n is the rows it changed then (0: it names something the
	// model does not know).
	apply(t *txn, payload any) (n int64, handled bool, err error)
	// flush writes what the model deferred, before the batch commits.
	flush(t *txn) error
	// committed tells the model's readers (caches, watchers) what the
	// committed batch changed.
	committed()
}

// txn is a batch's transaction as the writers see it: the current event,
// statements bound to the transaction, and what the history told the other
// models of the current event.
type txn struct {
	ctx     context.Context
	tx      *sql.Tx
	stmts   *stmtCache
	txStmts map[string]*sql.Stmt // stmts bound to tx, bound once per batch
	event   domain.RecordedEvent

	// moved is set by the history writer, which runs first, when the
	// current event added a delivery to an address or dropped one: only the
	// history knows deliveries, and the addresses (activity, stored bytes)
	// and accounts (who owns a stream) follow from it. Reset per event.
	moved *deliveryMove
	// owned is set by the history writer when it read the account owning
	// the delivery the current event changed (an update by id returns it),
	// so the accounts writer need not look the owner up again. Reset per
	// event.
	owned *deliveryOwner
}

// deliveryOwner is the account owning a delivery ("" for none).
type deliveryOwner struct {
	deliveryID string
	accountID  string
}

// deliveryMove is a delivery added to or dropped from an address.
type deliveryMove struct {
	deliveryID string
	address    string
	kind       domain.AddressKind
	accountID  string
	bytes      int64 // the bytes it stores in the log
	at         int64 // when it was received, Unix nanoseconds
	added      bool  // false: dropped (unless grew)
	// grew: bytes an attempt stored were added to a delivery the address
	// has already (its answer); no delivery added or dropped.
	grew bool
	// For a dropped delivery: its account_events rows from position from
	// to position to were deleted (qAccountEventsDropped).
	from, to int64
}

func (t *txn) stmt(query string) (*sql.Stmt, error) {
	if s, ok := t.txStmts[query]; ok {
		return s, nil
	}
	s, err := t.stmts.get(t.ctx, t.tx, query)
	if err != nil {
		return nil, err
	}
	t.txStmts[query] = s
	return s, nil
}

func (t *txn) exec(query string, args ...any) (int64, error) {
	s, err := t.stmt(query)
	if err != nil {
		return 0, err
	}
	res, err := s.ExecContext(t.ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t *txn) queryRow(query string, args ...any) (*sql.Row, error) {
	s, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return s.QueryRowContext(t.ctx, args...), nil
}

// at is the current event's occurred-at time as stored (Unix nanoseconds).
func (t *txn) at() int64 { return t.event.Metadata.OccurredAt.UnixNano() }

// pos is the current event's position as stored.
func (t *txn) pos() int64 { return int64(t.event.Position) }
