package projections

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// queueSchemaSQL is the queue view: the queued deliveries of QUEUE
// Endpoints with their schedule (docs/queue.md). A delivered one stays,
// as what its queue did (tries, possible duplicates), until its stream
// is deleted.
const queueSchemaSQL = `
CREATE TABLE IF NOT EXISTS queue (
	delivery_id TEXT PRIMARY KEY,
	endpoint_id TEXT    NOT NULL,
	account_id  TEXT    NOT NULL,
	seq         INTEGER NOT NULL, -- the receipt's position: the queue's order
	since       INTEGER NOT NULL, -- receipt or latest redrive: its age runs from here
	state       TEXT    NOT NULL, -- queued | inflight | dead | delivered
	next_at     INTEGER NOT NULL,
	tries       INTEGER NOT NULL DEFAULT 0,
	failures    INTEGER NOT NULL DEFAULT 0,
	attempt_id  TEXT    NOT NULL DEFAULT '',
	inflight_at INTEGER NOT NULL DEFAULT 0,
	duplicate   INTEGER NOT NULL DEFAULT 0,
	reason      TEXT    NOT NULL DEFAULT '',
	-- duplicates counts the attempts sent as possible duplicates.
	duplicates  INTEGER NOT NULL DEFAULT 0,
	status      INTEGER NOT NULL DEFAULT 0, -- the local answer that delivered it
	-- pos is the position of the latest event applied to the row: every
	-- update is made only by a later event, so applying one again (a
	-- batch retried) changes nothing.
	pos         INTEGER NOT NULL
);
-- queue_due finds the Endpoints with queued deliveries one seek each,
-- and whether one is due (an older file's queue_due on (state, next_at)
-- is replaced).
DROP INDEX IF EXISTS queue_due;
CREATE INDEX IF NOT EXISTS queue_due_endpoint ON queue (state, endpoint_id, next_at);
CREATE INDEX IF NOT EXISTS queue_endpoint ON queue (endpoint_id, state, seq);
CREATE INDEX IF NOT EXISTS queue_account ON queue (account_id, state, seq);
`

// Each update's last two arguments are the event's position twice (see
// queue.pos).
const (
	qQueueInsert = `INSERT OR IGNORE INTO queue (delivery_id, endpoint_id, account_id, seq, since, state, next_at, pos)
		VALUES (?, ?, ?, ?, ?, 'queued', ?, ?)`
	qQueueAttempt = `UPDATE queue SET state = 'inflight', tries = tries + 1, attempt_id = ?, inflight_at = ?, duplicate = 0,
		duplicates = duplicates + ?, pos = ? WHERE delivery_id = ? AND state IN ('queued', 'inflight') AND pos < ?`
	// An attempt a crash, a shutdown or a lost node left open goes back
	// to the queue, due at once, and the next attempt is marked a
	// possible duplicate.
	qQueueOrphaned = `UPDATE queue SET state = 'queued', next_at = ?, attempt_id = '', duplicate = 1, reason = ?, pos = ?
		WHERE delivery_id = ? AND attempt_id = ? AND state = 'inflight' AND pos < ?`
	qQueueRetry = `UPDATE queue SET state = 'queued', next_at = ?, failures = ?, reason = ?, attempt_id = '', pos = ?
		WHERE delivery_id = ? AND state IN ('queued', 'inflight') AND pos < ?`
	qQueueDead = `UPDATE queue SET state = 'dead', failures = ?, reason = ?, attempt_id = '', pos = ?
		WHERE delivery_id = ? AND pos < ?`
	qQueueDelivered = `UPDATE queue SET state = 'delivered', status = ?, attempt_id = '', reason = '', pos = ?
		WHERE delivery_id = ? AND pos < ?`
	qQueueRequeued = `UPDATE queue SET state = 'queued', next_at = ?, since = ?, failures = 0, reason = '', duplicate = 0, pos = ?
		WHERE delivery_id = ? AND state = 'dead' AND pos < ?`
	qQueueDropped      = `DELETE FROM queue WHERE delivery_id = ?`
	qQueueEndpointGone = `DELETE FROM queue WHERE endpoint_id = ?`
)

// queueWatch counts the committed batches (and resets) that changed the
// queue view, and tells a waiting reader of each.
type queueWatch struct {
	version atomic.Uint64
	changed chan struct{} // capacity 1: a reader that missed some learns of the latest
}

func (q *queueWatch) moved() {
	q.version.Add(1)
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

// queueWriter keeps the queue view. It runs after the history. A batch
// that changed a row of it moves the watch once committed.
type queueWriter struct {
	watch   *queueWatch
	changed bool
}

func (*queueWriter) flush(*txn) error { return nil }

func (w *queueWriter) committed() {
	if w.changed {
		w.watch.moved()
	}
}

func (w *queueWriter) apply(t *txn, payload any) (n int64, handled bool, err error) {
	switch p := payload.(type) {
	case receivedRow:
		if !p.Queued || p.AddressKind != domain.AddressEndpoint {
			return 0, false, nil
		}
		n, err = t.exec(qQueueInsert, p.DeliveryID, p.Address, p.AccountID, t.pos(), t.at(), t.at(), t.pos())
	case domain.ForwardRequested:
		if !p.Queued {
			return 0, false, nil
		}
		dup := 0
		if p.PossibleDuplicate {
			dup = 1
		}
		n, err = t.exec(qQueueAttempt, p.AttemptID, t.at(), dup, t.pos(), p.DeliveryID, t.pos())
	case domain.ForwardFailed:
		if p.Error != domain.FailureRestarted && p.Error != domain.FailureNodeLostBeforeAnswer && p.Error != domain.FailureShuttingDown {
			return 0, false, nil
		}
		n, err = t.exec(qQueueOrphaned, t.at(), p.Error, t.pos(), p.DeliveryID, p.AttemptID, t.pos())
	case domain.DeliveryRetryScheduled:
		next, perr := time.Parse(time.RFC3339Nano, p.NextAt)
		if perr != nil {
			next = t.event.Metadata.OccurredAt
		}
		n, err = t.exec(qQueueRetry, next.UnixNano(), p.Failures, p.Reason, t.pos(), p.DeliveryID, t.pos())
	case domain.DeliveryDead:
		n, err = t.exec(qQueueDead, p.Failures, p.Reason, t.pos(), p.DeliveryID, t.pos())
	case domain.DeliveryDelivered:
		n, err = t.exec(qQueueDelivered, p.Status, t.pos(), p.DeliveryID, t.pos())
	case domain.DeliveryRequeued:
		n, err = t.exec(qQueueRequeued, t.at(), t.at(), t.pos(), p.DeliveryID, t.pos())
	case domain.EndpointDeleted:
		n, err = t.exec(qQueueEndpointGone, p.EndpointID)
	case domain.StreamDeleted:
		kind, id, _ := domain.ParseStream(p.Stream)
		if kind != domain.StreamDelivery {
			return 0, false, nil
		}
		n, err = t.exec(qQueueDropped, id)
	default:
		return 0, false, nil
	}
	w.changed = w.changed || n > 0
	return n, n > 0, err
}

// queueColumns are what scanQueue reads, in order.
const queueColumns = `delivery_id, endpoint_id, account_id, seq, since, state, next_at, tries, failures, attempt_id, inflight_at, duplicate, reason, duplicates, status`

type rowScanner interface{ Scan(dest ...any) error }

// queueColumnsOf are queueColumns of the table named as.
func queueColumnsOf(as string) string {
	return as + "." + strings.ReplaceAll(queueColumns, ", ", ", "+as+".")
}

// scanQueue scans queueColumns, then more (columns after them).
func scanQueue(r rowScanner, more ...any) (readmodel.QueueEntry, error) {
	var e readmodel.QueueEntry
	var since, next, inflight int64
	var dup int
	err := r.Scan(append([]any{&e.DeliveryID, &e.EndpointID, &e.AccountID, &e.Seq, &since, &e.State, &next, &e.Tries, &e.Failures,
		&e.AttemptID, &inflight, &dup, &e.Reason, &e.Duplicates, &e.Status}, more...)...)
	e.Since, e.NextAt = time.Unix(0, since).UTC(), time.Unix(0, next).UTC()
	if inflight != 0 {
		e.InFlightAt = time.Unix(0, inflight).UTC()
	}
	e.Duplicate = dup != 0
	return e, err
}

// queueWriteQueries are the queue writer's statements, prepared with the
// others'.
var queueWriteQueries = []string{qQueueInsert, qQueueAttempt, qQueueOrphaned, qQueueRetry, qQueueDead, qQueueDelivered,
	qQueueDropped, qQueueRequeued, qQueueEndpointGone}
