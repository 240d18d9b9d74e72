package projections

import (
	"fmt"

	"github.com/relayhq/relay/domain"
)

// A delivery the batch created has no attempts in the table yet, and every
// later event of it in the batch is known here: its attempts are held in
// memory, its row's final columns are computed here, and the row and its
// attempts are inserted once, whole, at flush, many to a statement. Without
// this, a proxied delivery whose receipt and answer share a batch (the
// common case under load) cost its insert, two attempt writes (the
// request, then its outcome as an upsert), an update whose subquery read
// the attempts back and returned the row for the rollup, and a second
// update of its rollup class: five statements of its own
// (docs/projections.md).

// prepare finds which receipts of the batch (the first events of delivery
// streams) have no row yet, a few statements for the whole batch: those
// rows are inserted whole at flush. A receipt that finds a row changes
// nothing (the views applying the log again); it is left to the insert at
// receipt, which finds the row as before.
//
// A receipt received alone (an inspector's, answered at receipt; a proxied
// one whose answer comes in a later batch) is held too: one lookup per 32
// of them and their rows in a few multi-row inserts cost less than an
// insert each.
func (w *historyWriter) prepare(t *txn, todo []domain.RecordedEvent) error {
	var ids []any
	for _, e := range todo {
		if e.Type != domain.TypeDeliveryReceived || e.Revision != 0 {
			continue
		}
		if kind, id, _ := domain.ParseStream(e.Stream); kind == domain.StreamDelivery && !w.unseen[id] {
			ids = append(ids, id)
			w.unseen[id] = true
		}
	}
	if err := w.prefetch(t, todo); err != nil {
		return err
	}
	for len(ids) > 0 {
		n := chunk(len(ids))
		st, err := t.stmt(qDeliveriesExisting[n])
		if err != nil {
			return err
		}
		rows, err := st.QueryContext(t.ctx, ids[:n]...)
		if err != nil {
			return fmt.Errorf("find the batch's deliveries: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("find the batch's deliveries: %w", err)
			}
			delete(w.unseen, id)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("find the batch's deliveries: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

// prefetch makes known the deliveries the batch has events of but not
// their receipts (an agent's answer in a later batch than its receipt),
// a statement per 32 of them: their updates are then deferred to flush
// and made there many to a statement (flushUpdates), and their attempts
// are written by position, where each would otherwise be updated by id at
// once. A delivery not found (deleted, or received later in the batch)
// takes the path by id as before.
func (w *historyWriter) prefetch(t *txn, todo []domain.RecordedEvent) error {
	var ids []any
	seen := make(map[string]bool, len(todo))
	for _, e := range todo {
		if seen[e.Stream] {
			continue
		}
		seen[e.Stream] = true
		if e.Type == domain.TypeDeliveryReceived && e.Revision == 0 {
			continue // the batch creates it, or finds it at receipt (see prepare)
		}
		if kind, id, _ := domain.ParseStream(e.Stream); kind == domain.StreamDelivery {
			ids = append(ids, id)
		}
	}
	for len(ids) > 0 {
		n := chunk(len(ids))
		st, err := t.stmt(qDeliveriesKnown[n])
		if err != nil {
			return err
		}
		rows, err := st.QueryContext(t.ctx, ids[:n]...)
		if err != nil {
			return fmt.Errorf("find the batch's earlier deliveries: %w", err)
		}
		for rows.Next() {
			k := &knownDelivery{outcomes: true}
			var id string
			if err := rows.Scan(&id, &k.dpos, &k.address, &k.account); err != nil {
				rows.Close()
				return fmt.Errorf("find the batch's earlier deliveries: %w", err)
			}
			k.prefetched = true
			k.kind = kindOfAccount(k.account)
			w.known[id] = k
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("find the batch's earlier deliveries: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

// heldDelivery is what flush owes a delivery the batch created.
type heldDelivery struct {
	// row is the receipt's columns (qDeliveriesHeld) when its insert is
	// held too, nil once inserted.
	row []any
	// As at receipt: what the sender was answered then, if
	// anything (status, reason, time), its receipt time and the class
	// the rollup counted it under.
	answered   any
	reason     string
	answeredAt any
	received   int64
	class      int64
	attempts   map[string]*heldAttempt
	order      []*heldAttempt // in the order the batch made them
}

// heldAttempt is an attempts row as flush inserts it.
type heldAttempt struct {
	position                  int64
	attemptID                 string
	retry                     bool
	startedAt                 int64
	node                      string
	edit                      any // JSON text or NULL
	copy                      bool
	agentID                   string
	queued, possibleDuplicate bool
	// The outcome: outcomePos is 0 until one is recorded.
	status, durationMs any
	errText            string
	outcomePos         int64
	outcomeAt          any
	signature          any
	fidelity           any
}

func newHeldDelivery(row []any, answered any, reason string, answeredAt any, received, class int64) *heldDelivery {
	return &heldDelivery{row: row, answered: answered, reason: reason, answeredAt: answeredAt, received: received, class: class,
		attempts: map[string]*heldAttempt{}}
}

// requested records an attempt's request as qAttemptRequestedAt would: an
// attempt its outcome made first takes the request's edit (when it has
// one) and queue marks.
func (h *heldDelivery) requested(pos int64, attemptID string, retry bool, at int64, node string, edit any, copy bool,
	agentID string, queued, possibleDuplicate bool) {
	if a, ok := h.attempts[attemptID]; ok {
		if edit != nil {
			a.edit = edit
		}
		a.queued, a.possibleDuplicate = queued, possibleDuplicate
		return
	}
	a := &heldAttempt{position: pos, attemptID: attemptID, retry: retry, startedAt: at, node: node, edit: edit,
		copy: copy, agentID: agentID, queued: queued, possibleDuplicate: possibleDuplicate}
	h.attempts[attemptID] = a
	h.order = append(h.order, a)
}

// outcome records an attempt's outcome as qAttemptOutcomeAt would: an
// outcome without a request makes the attempt, started at the outcome; an
// attempt's later outcome replaces its earlier one. changed is false when
// the same outcome was recorded already.
func (h *heldDelivery) outcome(pos int64, attemptID string, at int64, status, durationMs any, errText, agentID string,
	signature, fidelity any, copy bool) (changed bool) {
	a, ok := h.attempts[attemptID]
	if !ok {
		a = &heldAttempt{position: pos, attemptID: attemptID, startedAt: at}
		h.attempts[attemptID] = a
		h.order = append(h.order, a)
	} else if a.outcomePos == pos {
		return false
	}
	a.status, a.durationMs, a.errText, a.outcomePos, a.agentID = status, durationMs, errText, pos, agentID
	a.outcomeAt, a.signature, a.fidelity, a.copy = at, signature, fidelity, copy
	return true
}

// responseStatus is what the sender was answered, as deliveryUpdateSet
// computes it: the status of the latest attempt with an outcome that is
// not a copy and was requested after the relay's own latest answer
// (answeredPos, 0 for none), else the status the relay answered.
func (h *heldDelivery) responseStatus(answeredPos int64, answered any) any {
	var latest *heldAttempt
	for _, a := range h.order {
		if a.outcomePos == 0 || a.copy || a.position <= answeredPos {
			continue
		}
		if latest == nil || a.position > latest.position {
			latest = a
		}
	}
	if latest != nil && latest.status != nil {
		return latest.status
	}
	return answered
}

// flushHeld writes the held deliveries ks: their attempts, and their rows
// with their final columns when their inserts were held too (else it sets
// those columns when the batch changed them since the receipt), moving each
// in the rollup to the class its status has now (as statsWriter.counted
// would). The rows of all of them go in as few multi-row inserts as they
// make up (a statement costs more than a row). Each is then an ordinary
// known delivery whose row and attempts are in the tables.
func (w *historyWriter) flushHeld(t *txn, ks []*knownDelivery) error {
	var attempts, rows [][]any
	for _, k := range ks {
		h := k.held
		k.held = nil
		for _, a := range h.order {
			attempts = append(attempts, []any{a.position, k.dpos, a.attemptID, a.retry, a.startedAt, a.node, a.edit, a.copy,
				a.agentID, a.queued, a.possibleDuplicate, a.status, a.durationMs, a.errText, nullIfZero(a.outcomePos),
				a.outcomeAt, a.signature, a.fidelity})
		}
		if !k.dirty && h.row == nil {
			continue // inserted, and changed by no event since
		}
		cols := w.heldColumns(k, h)
		if h.row != nil {
			rows = append(rows, append(h.row, cols...))
		} else if _, err := t.exec(qDeliveryHeld, append(cols, k.dpos)...); err != nil {
			return fmt.Errorf("update delivery at %d: %w", k.dpos, err)
		}
		// Counted in the rollup now: flush need not count it again.
		k.dirty, k.deferred = false, false
	}
	if _, err := execChunks(t, qAttemptsHeld, attempts); err != nil {
		return fmt.Errorf("record attempts: %w", err)
	}
	n, err := execChunks(t, qDeliveriesHeld, rows)
	if err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	if n != int64(len(rows)) {
		// prepare found no row for them and the batch made none but these.
		return fmt.Errorf("record deliveries: %d of %d rows exist already", int64(len(rows))-n, len(rows))
	}
	return nil
}

// heldColumns are the final columns of k, a held delivery (qDeliveryHeld's
// order): what the sender was answered, its latest response and the
// rollup class, into which it is moved.
func (w *historyWriter) heldColumns(k *knownDelivery, h *heldDelivery) []any {
	answered, reason, at := h.answered, h.reason, h.answeredAt
	var answeredPos int64
	if k.answered != nil {
		answered, at = k.answered, k.answeredAt
		answeredPos, _ = k.answeredPos.(int64)
		if s, ok := k.answeredWhy.(string); ok {
			reason = s
		}
	}
	status := h.responseStatus(answeredPos, answered)
	var rRev, rStream any
	if k.response != nil {
		rRev, rStream = k.response.revision, k.response.stream
	}
	updated := k.dpos
	if k.dirty {
		updated = k.pos
	}
	class := w.stats.moved(k.address, h.received, h.class, status)
	return []any{updated, answered, nullIfZero(answeredPos), reason, at, status, rStream, rRev, class}
}

// nullIfZero is n, or NULL when it is 0.
func nullIfZero(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}
