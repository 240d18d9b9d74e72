package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
)

const eventColumns = `position, id, stream, revision, type, data, enc, metadata`

// ReadStream returns up to max events of stream from revision from on, in
// revision order. A stream without events is domain.ErrStreamNotFound; a
// from past the end of an existing stream returns no events.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	if err := s.checkRead(max); err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	evs, err := query(ctx, s.reads.stream, max, 0, stream, clamp(from), max)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	if len(evs) > 0 {
		if evs[0].Type == domain.TypeStreamDeleted {
			return nil, fmt.Errorf("read stream %s: %w", stream, domain.ErrStreamDeleted)
		}
		return evs, nil
	}
	var exists bool
	if err := s.reads.exists.QueryRowContext(context.WithoutCancel(ctx), stream).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	if !exists {
		return nil, fmt.Errorf("read stream %s: %w", stream, domain.ErrStreamNotFound)
	}
	return evs, nil
}

// LastEvent returns the newest event of stream: one step down the
// (stream, revision) index, whatever the stream's length. A stream without
// events is domain.ErrStreamNotFound, a deleted one domain.ErrStreamDeleted.
func (s *Store) LastEvent(ctx context.Context, stream string) (domain.RecordedEvent, error) {
	if err := s.checkRead(1); err != nil {
		return domain.RecordedEvent{}, fmt.Errorf("read the last event of %s: %w", stream, err)
	}
	evs, err := query(ctx, s.reads.last, 1, 0, stream)
	switch {
	case err != nil:
	case len(evs) == 0:
		err = domain.ErrStreamNotFound
	case evs[0].Type == domain.TypeStreamDeleted:
		err = domain.ErrStreamDeleted
	}
	if err != nil {
		return domain.RecordedEvent{}, fmt.Errorf("read the last event of %s: %w", stream, err)
	}
	return evs[0], nil
}

// ReadAll returns up to max events with positions greater than after, in
// position order.
func (s *Store) ReadAll(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error) {
	if err := s.checkRead(max); err != nil {
		return nil, fmt.Errorf("read all after %d: %w", after, err)
	}
	evs, err := s.readAll(ctx, after, max)
	if err != nil {
		return nil, fmt.Errorf("read all after %d: %w", after, err)
	}
	return evs, nil
}

func (s *Store) readAll(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error) {
	return query(ctx, s.reads.all, max, 0, clamp(after), max)
}

// subscriptionBatchBytes bounds the data of the events one Recv reads back
// from the database (at least one event): a subscription behind the tail
// read SubscriptionBatch events whatever their size, and 512 deliveries of
// 256 KiB of body are 175 MiB, a few captured answers of 10 MiB as much.
const subscriptionBatchBytes = 8 << 20

// readAllForSubscription is readAll bounded by subscriptionBatchBytes too.
func (s *Store) readAllForSubscription(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error) {
	return query(ctx, s.reads.all, max, subscriptionBatchBytes, clamp(after), max)
}

func (s *Store) checkRead(max int) error {
	if max <= 0 {
		return &domain.InvalidInputError{Field: "max", Reason: fmt.Sprintf("%d is not positive", max)}
	}
	if s.isClosed() {
		return ErrClosed
	}
	return nil
}

// clamp keeps a revision or position inside SQLite's signed integers; no
// stored value comes close to the limit.
func clamp(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// query reads at most max events. Bounded reads run without ctx's
// cancellation: with a cancellable context the driver arms a watcher
// goroutine for every statement, which on the hot paths costs more than the
// read. ctx is checked before and between rows instead.
// maxBytes, when not 0, ends the read early once the events read hold that
// many bytes of data (at least one event is read).
func query(ctx context.Context, stmt *sql.Stmt, max, maxBytes int, args ...any) ([]domain.RecordedEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := stmt.QueryContext(context.WithoutCancel(ctx), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	evs := make([]domain.RecordedEvent, 0, min(max, 256))
	held := 0
	for rows.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		evs = append(evs, e)
		if held += len(e.Data); maxBytes > 0 && held >= maxBytes {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return evs, nil
}

func scanEvent(rows *sql.Rows) (domain.RecordedEvent, error) {
	var (
		e             domain.RecordedEvent
		position, rev int64
		stored        []byte
		enc           int64
		metadata      []byte
	)
	if err := rows.Scan(&position, &e.ID, &e.Stream, &rev, &e.Type, &stored, &enc, &metadata); err != nil {
		return domain.RecordedEvent{}, fmt.Errorf("scan event: %w", err)
	}
	data, err := decodeData(stored, enc)
	if err != nil {
		return domain.RecordedEvent{}, fmt.Errorf("event %s at position %d: %w", e.ID, position, err)
	}
	e.Data = data
	md, err := envelope.DecodeMetadata(metadata)
	if err != nil {
		return domain.RecordedEvent{}, fmt.Errorf("event %s at position %d: %w", e.ID, position, err)
	}
	e.Metadata, e.Position, e.Revision = md, uint64(position), uint64(rev)
	return e, nil
}

// readStmts are prepared on the read pool; database/sql prepares each one
// once per connection and reuses it, so reads skip SQL parsing.
type readStmts struct {
	stream, last, exists, all *sql.Stmt
}

func prepareReadStmts(ctx context.Context, db *sql.DB) (readStmts, error) {
	var st readStmts
	err := prepareAll(ctx, db, []stmtSpec{
		{&st.stream, `SELECT ` + eventColumns + ` FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?`},
		{&st.last, `SELECT ` + eventColumns + ` FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1`},
		{&st.exists, `SELECT EXISTS (SELECT 1 FROM events WHERE stream = ?)`},
		{&st.all, `SELECT ` + eventColumns + ` FROM events WHERE position > ? ORDER BY position LIMIT ?`},
	})
	return st, err
}

func (st readStmts) close() error {
	return closeStmts(st.stream, st.last, st.exists, st.all)
}
