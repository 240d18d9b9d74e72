package projections

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// PurgeCandidates lists up to limit inspectors idle past their TTL plus
// retention at now, oldest activity first. It reads inspectors_live: none
// of the purged ones, which keep their rows for good.
func (v *History) PurgeCandidates(ctx context.Context, now time.Time, retention time.Duration, limit int) ([]readmodel.PurgeCandidate, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT i.id, i.last_activity_at, i.ttl_ms,
			(SELECT COUNT(*) FROM deliveries d WHERE d.address = i.id)
		FROM inspectors i INDEXED BY inspectors_live
		WHERE i.purged = 0 AND i.last_activity_at + i.ttl_ms * 1000000 + ?1 <= ?2
		ORDER BY i.last_activity_at LIMIT ?3`, retention.Nanoseconds(), now.UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("list inspectors past retention: %w", err)
	}
	defer rows.Close()
	var out []readmodel.PurgeCandidate
	for rows.Next() {
		var (
			c           readmodel.PurgeCandidate
			last, ttlMs int64
		)
		if err := rows.Scan(&c.ID, &last, &ttlMs, &c.Deliveries); err != nil {
			return nil, fmt.Errorf("list inspectors past retention: %w", err)
		}
		c.LastActivityAt, c.TTL = fromNanos(last), time.Duration(ttlMs)*time.Millisecond
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list inspectors past retention: %w", err)
	}
	return out, nil
}

// PurgedDeliveries lists up to limit deliveries of purged inspectors that
// still have rows: their streams are still to be deleted (or their
// tombstones not yet applied). It reads the inspectors listed in
// inspectors_purging (purged, holding deliveries) and their deliveries,
// so it reads neither the purged inspectors already emptied, whose rows
// stay for good and which any stranger can pile up, nor the addresses
// that are not purged, however many hold deliveries.
func (v *History) PurgedDeliveries(ctx context.Context, limit int) ([]string, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT d.id FROM inspectors_purging p
		CROSS JOIN deliveries d INDEXED BY deliveries_by_address
		WHERE d.address = p.id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of purged inspectors: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list deliveries of purged inspectors: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list deliveries of purged inspectors: %w", err)
	}
	return out, nil
}

// notWaiting is true of a delivery row no forward is waiting on: every
// attempt has its outcome, and the sender was answered. Retention leaves
// the others for a later decision.
const notWaiting = `(d.answered_status IS NOT NULL OR d.response_status IS NOT NULL)
	AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.delivery_position = d.position AND a.outcome_position IS NULL)`

// MaxCountedRetained bounds the count of an Endpoint's deliveries past its
// window that a retention decision records: a sweep reads at most this
// many of each Endpoint it decides, however large a backlog a lowered
// window left.
const MaxCountedRetained = 1000

// retentionWalk is how many addresses one query of a walk of the
// addresses that hold deliveries steps over (see addressWalk); a variable
// so a test can make the queries small.
var retentionWalk = 1000

// addressWalk is a CTE "walk(id)" of the addresses that hold deliveries,
// in id order from the first after the parameter after, at most the
// parameter limit of them: one seek of deliveries_by_received each, so
// the Endpoints' retention reads neither each address's deliveries nor the
// Endpoints that hold none. A deleted Endpoint keeps its row for good once
// retention has emptied it, and an account may create and delete them as
// long as its storage quota lasts.
func addressWalk(after, limit string) string {
	return `WITH RECURSIVE walk(id) AS (
			SELECT (SELECT address FROM deliveries WHERE address > ` + after + ` ORDER BY address LIMIT 1)
			UNION ALL
			SELECT (SELECT address FROM deliveries WHERE address > walk.id ORDER BY address LIMIT 1)
			FROM walk WHERE walk.id IS NOT NULL
			LIMIT ` + limit + `)`
}

// retentionWindowMs is an Endpoint e's window in milliseconds: its own or
// the default ?1, never beyond the maximum ?2.
const retentionWindowMs = `MIN(CASE WHEN e.retention_ms > 0 THEN e.retention_ms ELSE ?1 END, CASE WHEN ?2 > 0 THEN ?2 ELSE 9223372036854 END)`

// retentionCandidatesQuery lists the addresses that hold deliveries from
// the one after ?4, at most ?6 (addressWalk), each with, when it is an
// Endpoint, its last activity, its window (retentionWindowMs) and the
// count of its deliveries received before ?3 less its window, up to ?5
// rows (0: none, or not an Endpoint). Rows come in id order without a
// sort, and each is counted only when read: a sweep never counts a whole
// backlog, nor the Endpoints past those it decides.
var retentionCandidatesQuery = addressWalk("?4", "?6") + `
	SELECT w.id, IFNULL(e.last_activity_at, 0), IFNULL(` + retentionWindowMs + `, 0),
		CASE WHEN e.id IS NULL THEN 0 ELSE (SELECT COUNT(*) FROM (SELECT 1 FROM deliveries d
			WHERE d.address = e.id AND d.received_at < ?3 - ` + retentionWindowMs + ` * 1000000 AND ` + notWaiting + ` LIMIT ?5)) END
	FROM walk w LEFT JOIN endpoints e ON e.id = w.id
	WHERE w.id IS NOT NULL`

// RetentionCandidates lists up to limit Endpoints that hold deliveries
// received longer ago than their window at now and not waiting on a
// forward, with the window applied (limits.Window of their own), how many
// such deliveries they hold (up to MaxCountedRetained, DeliveriesAtLeast
// past it) and their newest delivery's time. They come in id order from
// the first id after after, wrapping around, so sweeps that each pass the
// last id they decided go through every such Endpoint however many sort
// before it. It walks the addresses that hold deliveries (addressWalk),
// none of the Endpoints that hold none.
func (v *History) RetentionCandidates(ctx context.Context, now time.Time, limits domain.RetentionLimits, after string, limit int) ([]readmodel.RetentionCandidate, error) {
	var out []readmodel.RetentionCandidate
	err := walkAddresses(after, func(from string, wrapped bool) (string, bool, error) {
		rows, err := v.r.QueryContext(ctx, retentionCandidatesQuery, limits.Default.Milliseconds(), limits.Max.Milliseconds(),
			now.UnixNano(), from, MaxCountedRetained+1, retentionWalk)
		if err != nil {
			return "", false, err
		}
		defer rows.Close()
		walked, last := 0, ""
		for len(out) < limit && rows.Next() {
			var (
				c      readmodel.RetentionCandidate
				at, ms int64
				id     string
			)
			if err := rows.Scan(&id, &at, &ms, &c.Deliveries); err != nil {
				return "", false, err
			}
			if wrapped && id > after {
				return "", true, nil // back where the walk began
			}
			walked, last = walked+1, id
			if c.Deliveries == 0 {
				continue
			}
			c.ID, c.LastActivityAt, c.Window = id, fromNanos(at), time.Duration(ms)*time.Millisecond
			if c.Deliveries > MaxCountedRetained {
				c.Deliveries, c.DeliveriesAtLeast = MaxCountedRetained, true
			}
			out = append(out, c)
		}
		if err := rows.Err(); err != nil {
			return "", false, err
		}
		return last, len(out) == limit || (walked < retentionWalk && wrapped), nil
	})
	if err != nil {
		return nil, fmt.Errorf("list endpoints past retention: %w", err)
	}
	return out, nil
}

// walkAddresses runs page over the addresses that hold deliveries from the
// one after after to the end, then from the first one up to after: page
// reads one query's worth from the address after from (wrapped: in the
// second part) and returns the last address it read ("" for none: the end
// of that part) and whether the walk is done.
func walkAddresses(after string, page func(from string, wrapped bool) (last string, done bool, err error)) error {
	from, wrapped := after, false
	for {
		last, done, err := page(from, wrapped)
		if err != nil || done {
			return err
		}
		if last == "" {
			// The end of this part: go on from the first address, unless
			// the walk began there.
			if wrapped || after == "" {
				return nil
			}
			from, wrapped = "", true
			continue
		}
		from = last
	}
}

// retainedDeliveriesQuery lists the addresses that hold deliveries from
// the one after ?1, at most ?2 (addressWalk), each with, when it is an
// Endpoint with a retention decision, its deliveries received before the
// decision's cutoff (NULL for none). LEFT JOIN keeps the walk outside, so
// the rows need no sort, and each Endpoint's deliveries below its cutoff
// are a range of deliveries_by_received: the newer ones are never read.
var retainedDeliveriesQuery = addressWalk("?1", "?2") + `
	SELECT w.id, d.id FROM walk w
		LEFT JOIN endpoints e ON e.id = w.id AND e.retained_to > 0
		LEFT JOIN deliveries d ON d.address = e.id AND d.received_at < e.retained_to AND ` + notWaiting + `
	WHERE w.id IS NOT NULL`

// RetainedDeliveries lists up to limit deliveries that a retention
// decision of their Endpoint removed and that still have rows: their
// streams are still to be deleted (or their tombstones not yet applied).
// They come Endpoint by Endpoint in id order from the first Endpoint after
// after, wrapping around; last is the Endpoint of the last one, where the
// next page goes on, so one Endpoint's backlog cannot hold the others'.
// It walks the addresses that hold deliveries (addressWalk), none of the
// Endpoints that hold none.
func (v *History) RetainedDeliveries(ctx context.Context, after string, limit int) (ids []string, last string, err error) {
	err = walkAddresses(after, func(from string, wrapped bool) (string, bool, error) {
		rows, err := v.r.QueryContext(ctx, retainedDeliveriesQuery, from, retentionWalk)
		if err != nil {
			return "", false, err
		}
		defer rows.Close()
		walked, walkedTo := 0, ""
		for len(ids) < limit && rows.Next() {
			var (
				address string
				id      sql.NullString
			)
			if err := rows.Scan(&address, &id); err != nil {
				return "", false, err
			}
			if wrapped && address > after {
				return "", true, nil // back where the walk began
			}
			if address != walkedTo {
				walked, walkedTo = walked+1, address
			}
			if id.Valid {
				ids, last = append(ids, id.String), address
			}
		}
		if err := rows.Err(); err != nil {
			return "", false, err
		}
		return walkedTo, len(ids) == limit || (walked < retentionWalk && wrapped), nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list deliveries past their endpoint's retention: %w", err)
	}
	return ids, last, nil
}
