package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// MaxQueueBatch bounds the entries one read of the queue returns.
const MaxQueueBatch = 1000

// DueQueue returns up to limit queued deliveries due at now, and those in
// flight since before orphanBefore (an attempt whose outcome, or the
// decision after it, never came), oldest receipt first.
func (v *Runner) DueQueue(ctx context.Context, now, orphanBefore time.Time, limit int) ([]readmodel.QueueEntry, error) {
	limit = min(max(limit, 1), MaxQueueBatch)
	return v.queueRows(ctx, `SELECT `+queueColumns+` FROM queue
		WHERE (state = 'queued' AND next_at <= ?) OR (state = 'inflight' AND inflight_at < ?)
		ORDER BY seq LIMIT ?`, now.UnixNano(), orphanBefore.UnixNano(), limit)
}

// QueueHead is an Endpoint's oldest delivery still to deliver (queued or
// in flight), for strict ordering; false when there is none.
func (v *Runner) QueueHead(ctx context.Context, endpointID string) (readmodel.QueueEntry, bool, error) {
	rows, err := v.queueRows(ctx, `SELECT `+queueColumns+` FROM queue
		WHERE endpoint_id = ? AND state IN ('queued', 'inflight') ORDER BY seq LIMIT 1`, endpointID)
	if err != nil || len(rows) == 0 {
		return readmodel.QueueEntry{}, false, err
	}
	return rows[0], true, nil
}

// QueueEntry is a delivery's place in its queue (also once delivered);
// domain.ErrNotFound when it was never queued.
func (v *Runner) QueueEntry(ctx context.Context, deliveryID string) (readmodel.QueueEntry, error) {
	e, err := scanQueue(v.r.QueryRowContext(ctx, `SELECT `+queueColumns+` FROM queue WHERE delivery_id = ?`, deliveryID))
	if errors.Is(err, sql.ErrNoRows) {
		return e, domain.ErrNotFound
	}
	if err != nil {
		return e, fmt.Errorf("read queue entry %s: %w", deliveryID, err)
	}
	return e, nil
}

// QueueList returns an account's queued deliveries in state (queued, in
// flight or dead when ""), of one Endpoint when endpointID is set, oldest
// first from the first one after the cursor after ("": from the oldest),
// at most limit, and the cursor of the page's end (after itself when the
// page is empty). The cursor is the one the delivery pages use (a receipt's
// log position, which is the queue's seq); another is INVALID_INPUT on
// after. The query names only the filters that are set, so it seeks on
// queue_endpoint or queue_account instead of scanning the account's rows.
func (v *Runner) QueueList(ctx context.Context, accountID, endpointID, state, after string, limit int) ([]readmodel.QueueEntry, string, error) {
	limit = min(max(limit, 1), MaxQueueBatch)
	var from uint64
	if after != "" {
		pos, err := decodeCursor("after", after)
		if err != nil {
			return nil, "", err
		}
		from = pos
	}
	query, args := `SELECT `+queueColumns+` FROM queue WHERE account_id = ?`, []any{accountID}
	if endpointID != "" {
		query, args = query+` AND endpoint_id = ?`, append(args, endpointID)
	}
	if state != "" {
		query, args = query+` AND state = ?`, append(args, state)
	} else {
		query += ` AND state != 'delivered'`
	}
	entries, err := v.queueRows(ctx, query+` AND seq > ? ORDER BY seq LIMIT ?`, append(args, int64(from), limit)...)
	if err != nil || len(entries) == 0 {
		return entries, after, err
	}
	return entries, encodeCursor(uint64(entries[len(entries)-1].Seq)), nil
}

// QueueCounts counts an Endpoint's queue by state.
func (v *Runner) QueueCounts(ctx context.Context, endpointID string) (readmodel.QueueCounts, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT state, count(*) FROM queue WHERE endpoint_id = ? GROUP BY state`, endpointID)
	if err != nil {
		return readmodel.QueueCounts{}, fmt.Errorf("count queue of %s: %w", endpointID, err)
	}
	defer rows.Close()
	var c readmodel.QueueCounts
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return c, fmt.Errorf("count queue of %s: %w", endpointID, err)
		}
		switch state {
		case readmodel.QueueQueued:
			c.Queued = n
		case readmodel.QueueInFlight:
			c.InFlight = n
		case readmodel.QueueDead:
			c.Dead = n
		}
	}
	return c, rows.Err()
}

func (v *Runner) queueRows(ctx context.Context, query string, args ...any) ([]readmodel.QueueEntry, error) {
	rows, err := v.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read queue: %w", err)
	}
	defer rows.Close()
	var out []readmodel.QueueEntry
	for rows.Next() {
		e, err := scanQueue(rows)
		if err != nil {
			return nil, fmt.Errorf("read queue: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// QueueDepth counts an Endpoint's deliveries still to deliver (queued or
// in flight), for the backlog bound.
func (v *Runner) QueueDepth(ctx context.Context, endpointID string) (int, error) {
	var n int
	err := v.r.QueryRowContext(ctx, `SELECT count(*) FROM queue WHERE endpoint_id = ? AND state IN ('queued', 'inflight')`, endpointID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count queue of %s: %w", endpointID, err)
	}
	return n, nil
}
