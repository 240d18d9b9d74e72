package projections

import (
	"context"
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
// tombstones not yet applied). It walks guests' deliveries in their order
// (deliveries_of_inspectors, CROSS JOIN keeping them outside), so it reads
// neither the purged inspectors, whose rows stay for good, nor Endpoints'
// deliveries: what guests hold now, which --guest-storage bounds.
func (v *History) PurgedDeliveries(ctx context.Context, limit int) ([]string, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT d.id FROM deliveries d INDEXED BY deliveries_of_inspectors
		CROSS JOIN inspectors i
		WHERE d.kind = 'inspector' AND i.id = d.address AND i.purged = 1 ORDER BY d.position LIMIT ?`, limit)
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

// retentionCandidatesQueries list the Endpoints holding deliveries past
// their window, from the Endpoint after ?5, then from the first one up to
// it, walked by id (no sort). An Endpoint is taken on one probe of
// deliveries_by_received, and only those taken are counted, each up to
// ?6 rows: a sweep never counts a whole backlog, nor the Endpoints it
// does not decide.
var retentionCandidatesQueries = [2]string{retentionCandidatesQuery("id > ?5"), retentionCandidatesQuery("id <= ?5")}

func retentionCandidatesQuery(from string) string {
	old := `FROM deliveries d WHERE d.address = e.id AND d.received_at < ?3 - e.ms * 1000000 AND ` + notWaiting
	return `SELECT e.id, e.last_activity_at, e.ms, (SELECT COUNT(*) FROM (SELECT 1 ` + old + ` LIMIT ?6))
		FROM (SELECT id, last_activity_at,
				MIN(CASE WHEN retention_ms > 0 THEN retention_ms ELSE ?1 END, CASE WHEN ?2 > 0 THEN ?2 ELSE 9223372036854 END) AS ms
			FROM endpoints WHERE ` + from + `) e
		WHERE EXISTS (SELECT 1 ` + old + `)
		ORDER BY e.id LIMIT ?4`
}

// RetentionCandidates lists up to limit Endpoints that hold deliveries
// received longer ago than their window at now and not waiting on a
// forward, with the window applied (limits.Window of their own), how many
// such deliveries they hold (up to MaxCountedRetained, DeliveriesAtLeast
// past it) and their newest delivery's time. They come in id order from
// the first id after after, wrapping around, so sweeps that each pass the
// last id they decided go through every such Endpoint however many sort
// before it.
func (v *History) RetentionCandidates(ctx context.Context, now time.Time, limits domain.RetentionLimits, after string, limit int) ([]readmodel.RetentionCandidate, error) {
	var out []readmodel.RetentionCandidate
	for _, q := range retentionCandidatesQueries {
		if len(out) == limit {
			break
		}
		rows, err := v.r.QueryContext(ctx, q, limits.Default.Milliseconds(), limits.Max.Milliseconds(), now.UnixNano(),
			limit-len(out), after, MaxCountedRetained+1)
		if err != nil {
			return nil, fmt.Errorf("list endpoints past retention: %w", err)
		}
		for rows.Next() {
			var (
				c        readmodel.RetentionCandidate
				last, ms int64
			)
			if err := rows.Scan(&c.ID, &last, &ms, &c.Deliveries); err != nil {
				rows.Close()
				return nil, fmt.Errorf("list endpoints past retention: %w", err)
			}
			c.LastActivityAt, c.Window = fromNanos(last), time.Duration(ms)*time.Millisecond
			if c.Deliveries > MaxCountedRetained {
				c.Deliveries, c.DeliveriesAtLeast = MaxCountedRetained, true
			}
			out = append(out, c)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("list endpoints past retention: %w", err)
		}
	}
	return out, nil
}

// retainedDeliveriesQueries list the deliveries past their Endpoint's
// cutoff from the Endpoint after ?1, then from the first one up to it.
// CROSS JOIN keeps the Endpoints outside, walked by their id (so the order
// needs no sort): each one's deliveries below its cutoff are a range of
// deliveries_by_received, the newer ones are never read.
var retainedDeliveriesQueries = [2]string{retainedDeliveriesQuery("e.id > ?1"), retainedDeliveriesQuery("e.id <= ?1")}

func retainedDeliveriesQuery(from string) string {
	return `SELECT d.id, e.id FROM endpoints e CROSS JOIN deliveries d
		WHERE e.retained_to > 0 AND ` + from + ` AND d.address = e.id AND d.received_at < e.retained_to AND ` + notWaiting + `
		ORDER BY e.id LIMIT ?2`
}

// RetainedDeliveries lists up to limit deliveries that a retention
// decision of their Endpoint removed and that still have rows: their
// streams are still to be deleted (or their tombstones not yet applied).
// They come Endpoint by Endpoint in id order from the first Endpoint after
// after, wrapping around; last is the Endpoint of the last one, where the
// next page goes on, so one Endpoint's backlog cannot hold the others'.
func (v *History) RetainedDeliveries(ctx context.Context, after string, limit int) (ids []string, last string, err error) {
	for _, q := range retainedDeliveriesQueries {
		if len(ids) == limit {
			break
		}
		rows, err := v.r.QueryContext(ctx, q, after, limit-len(ids))
		if err != nil {
			return nil, "", fmt.Errorf("list deliveries past their endpoint's retention: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id, &last); err != nil {
				rows.Close()
				return nil, "", fmt.Errorf("list deliveries past their endpoint's retention: %w", err)
			}
			ids = append(ids, id)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, "", fmt.Errorf("list deliveries past their endpoint's retention: %w", err)
		}
	}
	return ids, last, nil
}
