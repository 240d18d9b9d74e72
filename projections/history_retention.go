package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/relayhq/relay/readmodel"
)

// PurgeCandidates lists up to limit inspectors idle past their TTL plus
// retention at now, oldest activity first.
func (v *History) PurgeCandidates(ctx context.Context, now time.Time, retention time.Duration, limit int) ([]readmodel.PurgeCandidate, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT i.id, i.last_activity_at, i.ttl_ms,
			(SELECT COUNT(*) FROM deliveries d WHERE d.address = i.id)
		FROM inspectors i
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
// tombstones not yet applied).
func (v *History) PurgedDeliveries(ctx context.Context, limit int) ([]string, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT d.id FROM inspectors i JOIN deliveries d ON d.address = i.id
		WHERE i.purged = 1 ORDER BY d.position LIMIT ?`, limit)
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
