package projections

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// MaxQueueBatch bounds the entries one read of the queue returns.
const MaxQueueBatch = 1000

// MaxDueEndpoints bounds the Endpoints one walk of the queue visits.
const MaxDueEndpoints = 1000

// DueEndpoints walks the Endpoints with queued deliveries in ID order, from
// the first after after ("": from the first), at most limit of them, and
// returns those with a delivery due at now, and apart those with an attempt
// in flight since before orphanBefore (one whose outcome, or the decision
// after it, never came; at most limit of them). last is the last Endpoint
// walked, "" when the walk reached the end: the next walk goes on from
// there, so every Endpoint with due deliveries has its turn however many
// deliveries the others have due. Each step of the walk is one seek on
// queue_due: the walk reads no delivery, only Endpoints.
func (v *Runner) DueEndpoints(ctx context.Context, now, orphanBefore time.Time, after string, limit int) (due, orphaned []string, last string, err error) {
	limit = min(max(limit, 1), MaxDueEndpoints)
	rows, err := v.r.QueryContext(ctx, `WITH RECURSIVE walk(id) AS (
			SELECT (SELECT endpoint_id FROM queue WHERE state = 'queued' AND endpoint_id > ?1 ORDER BY endpoint_id LIMIT 1)
			UNION ALL
			SELECT (SELECT endpoint_id FROM queue WHERE state = 'queued' AND endpoint_id > walk.id ORDER BY endpoint_id LIMIT 1)
			FROM walk WHERE walk.id IS NOT NULL
			LIMIT ?2)
		SELECT id, EXISTS (SELECT 1 FROM queue WHERE state = 'queued' AND endpoint_id = walk.id AND next_at <= ?3)
		FROM walk WHERE id IS NOT NULL`, after, limit, now.UnixNano())
	if err != nil {
		return nil, nil, "", fmt.Errorf("walk queue: %w", err)
	}
	defer rows.Close()
	walked := 0
	for rows.Next() {
		var id string
		var isDue bool
		if err := rows.Scan(&id, &isDue); err != nil {
			return nil, nil, "", fmt.Errorf("walk queue: %w", err)
		}
		walked, last = walked+1, id
		if isDue {
			due = append(due, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, "", fmt.Errorf("walk queue: %w", err)
	}
	if walked < limit {
		last = ""
	}
	// Attempts left open are few (at most each Endpoint's maxInFlight):
	// their Endpoints come every walk.
	orphans, err := v.r.QueryContext(ctx, `SELECT DISTINCT endpoint_id FROM queue WHERE state = 'inflight' AND inflight_at < ? LIMIT ?`,
		orphanBefore.UnixNano(), limit)
	if err != nil {
		return nil, nil, "", fmt.Errorf("read queue orphans: %w", err)
	}
	defer orphans.Close()
	for orphans.Next() {
		var id string
		if err := orphans.Scan(&id); err != nil {
			return nil, nil, "", fmt.Errorf("read queue orphans: %w", err)
		}
		if !slices.Contains(due, id) {
			orphaned = append(orphaned, id)
		}
	}
	return due, orphaned, last, orphans.Err()
}

// DueOf returns up to limit of an Endpoint's deliveries due at now (queued,
// next_at passed) or left in flight since before orphanBefore, oldest
// receipt first from the first after the receipt position afterSeq, each
// with the size of its request as stored (what an attempt holds while it
// is out).
func (v *Runner) DueOf(ctx context.Context, endpointID string, now, orphanBefore time.Time, afterSeq int64, limit int) ([]readmodel.QueueEntry, error) {
	limit = min(max(limit, 1), MaxQueueBatch)
	// Both halves read queue_endpoint in receipt order and stop at limit.
	rows, err := v.r.QueryContext(ctx, `SELECT * FROM (
			SELECT `+queueColumnsOf("q")+`, COALESCE(d.stored_bytes, 0) FROM queue q INDEXED BY queue_endpoint
				LEFT JOIN deliveries d ON d.position = q.seq
			WHERE q.endpoint_id = ?1 AND q.state = 'queued' AND q.seq > ?4 AND q.next_at <= ?2 ORDER BY q.seq LIMIT ?5)
		UNION ALL SELECT * FROM (
			SELECT `+queueColumnsOf("q")+`, COALESCE(d.stored_bytes, 0) FROM queue q INDEXED BY queue_endpoint
				LEFT JOIN deliveries d ON d.position = q.seq
			WHERE q.endpoint_id = ?1 AND q.state = 'inflight' AND q.seq > ?4 AND q.inflight_at < ?3 ORDER BY q.seq LIMIT ?5)`,
		endpointID, now.UnixNano(), orphanBefore.UnixNano(), afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("read due queue of %s: %w", endpointID, err)
	}
	defer rows.Close()
	var out []readmodel.QueueEntry
	for rows.Next() {
		var size int64
		e, err := scanQueue(rows, &size)
		if err != nil {
			return nil, fmt.Errorf("read due queue of %s: %w", endpointID, err)
		}
		e.Bytes = size
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read due queue of %s: %w", endpointID, err)
	}
	slices.SortFunc(out, func(a, b readmodel.QueueEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out[:min(len(out), limit)], nil
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
// queue_endpoint or queue_account instead of scanning the account's rows;
// without a state it reads each of queueStates so (at most limit rows
// each) and keeps the oldest limit, never walking the delivered rows,
// which stay as long as their deliveries and would grow every page with
// the queue's history.
func (v *Runner) QueueList(ctx context.Context, accountID, endpointID, state, after string, limit int) ([]readmodel.QueueEntry, string, error) {
	limit = min(max(limit, 1), MaxQueueBatch)
	var from uint64
	if after != "" {
		pos, err := readmodel.DecodeCursor("after", after)
		if err != nil {
			return nil, "", err
		}
		from = pos
	}
	states := queueStates
	if state != "" {
		states = []string{state}
	}
	var entries []readmodel.QueueEntry
	for _, st := range states {
		query, args := `SELECT `+queueColumns+` FROM queue WHERE account_id = ?`, []any{accountID}
		if endpointID != "" {
			query, args = query+` AND endpoint_id = ?`, append(args, endpointID)
		}
		got, err := v.queueRows(ctx, query+` AND state = ? AND seq > ? ORDER BY seq LIMIT ?`, append(args, st, int64(from), limit)...)
		if err != nil {
			return nil, after, err
		}
		entries = append(entries, got...)
	}
	if len(entries) == 0 {
		return entries, after, nil
	}
	slices.SortFunc(entries, func(a, b readmodel.QueueEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	entries = entries[:min(len(entries), limit)]
	return entries, readmodel.EncodeCursor(uint64(entries[len(entries)-1].Seq)), nil
}

// queueStates are the states of a delivery still in its queue: a list or
// count without a state reads these, one index range each, and never the
// delivered rows (QueueDone), which stay until their deliveries go.
var queueStates = []string{readmodel.QueueQueued, readmodel.QueueInFlight, readmodel.QueueDead}

// QueueCounts counts an Endpoint's queue by state: the deliveries still
// in it (queueStates), through queue_endpoint, not its delivered history.
func (v *Runner) QueueCounts(ctx context.Context, endpointID string) (readmodel.QueueCounts, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT state, count(*) FROM queue WHERE endpoint_id = ? AND state IN (?, ?, ?) GROUP BY state`,
		endpointID, queueStates[0], queueStates[1], queueStates[2])
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

// QueueVersion moves whenever a committed batch changes the queue view
// (and at a reset). A reader that found nothing queued or in flight at one
// version knows nothing is while it stays there: only an applied event
// queues a delivery or starts an attempt, and that change moves it.
func (v *Runner) QueueVersion() uint64 { return v.queue.version.Load() }

// QueueChanged receives once the queue view has moved since it last did
// (one reader: the queue driver).
func (v *Runner) QueueChanged() <-chan struct{} { return v.queue.changed }

// QueueLive tells whether any delivery is queued or has an attempt in
// flight: two seeks on queue_due_endpoint.
func (v *Runner) QueueLive(ctx context.Context) (bool, error) {
	var live bool
	err := v.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM queue WHERE state = 'queued')
		OR EXISTS (SELECT 1 FROM queue WHERE state = 'inflight')`).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("read whether a queue is live: %w", err)
	}
	return live, nil
}
