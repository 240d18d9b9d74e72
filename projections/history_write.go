package projections

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// historyWriter is the History's writing half: deliveries and their
// attempts. It remembers the deliveries the batch created or changed, by
// ID: what watchers hear once the batch commits, and what lets later
// events of the same delivery skip the lookup and defer their update of
// the deliveries row to flush (see updateDelivery); pending lists the
// deferred ones in the order they were first deferred.
type historyWriter struct {
	h       *History
	known   map[string]*knownDelivery
	pending []*knownDelivery
	held    []*knownDelivery // the deliveries it created, in order (see history_held.go)
	// unseen are the deliveries whose receipt the batch holds and that
	// have no row before it (see prepare).
	unseen map[string]bool
	stats  *statsWriter // the per-minute rollup, see stats.go
}

func (v *History) writer() *historyWriter {
	return &historyWriter{h: v, known: map[string]*knownDelivery{}, unseen: map[string]bool{}, stats: newStatsWriter(v.horizon)}
}

// knownDelivery is a delivery row the batch created or changed, with the
// update that flush still owes it when dirty.
type knownDelivery struct {
	dpos        int64            // its position (rowid)
	address     string           // its address
	change      readmodel.Change // what watchers are told
	dirty       bool             // an update is deferred
	pos         int64            // position of the latest event that changed it
	answered    any              // latest DeliveryAnswered status of the batch, or nil
	answeredPos any              // its position, or nil
	answeredWhy any              // its reason, or nil
	answeredAt  any              // its time, or nil
	// outcomes is false only for a delivery this batch created and gave no
	// attempt outcome: flush then knows no attempt decides its status.
	outcomes bool
	// fresh: the batch created it and counted it in the rollup at once;
	// deferred: an update of it was deferred to flush since. Flush counts
	// it again only when it may have changed (see statsWriter.counted).
	fresh, deferred bool
	response        *logRef // latest ForwardResponded of the batch, or nil
	dropped         bool    // its stream was deleted later in the batch: nothing to update
	// counted is the row as the batch's last update of it returned it,
	// for the rollup; nil while an update is deferred.
	counted *statsRow
	// held: the batch created it, and its attempts and final columns wait
	// in memory for flush (history_held.go); nil once written.
	held *heldDelivery
	// prefetched: its row was there before the batch and read by prepare
	// (see prefetch), account with it.
	prefetched bool
	account    string
	// kind is its address's kind, when known (grew).
	kind domain.AddressKind
}

// logRef locates an event in the log as the deliveries row stores it:
// stream is nil for the delivery's own stream, else the stream's name.
type logRef struct {
	stream   any
	revision int64
}

func (w *historyWriter) apply(t *txn, payload any) (n int64, handled bool, err error) {
	if err := w.stats.see(t); err != nil {
		return 0, false, err
	}
	switch p := payload.(type) {
	case receivedRow:
		n, err = w.deliveryReceived(t, p)
	case domain.DeliveryAnswered:
		n, err = w.updated(w.updateDelivery(t, p.DeliveryID, &p, nil, false))
	case domain.ForwardRequested:
		n, err = w.requested(t, p)
	case respondedRow:
		// An answer of its own in the log: its bytes (headers and a
		// captured body) count toward the delivery's stored bytes, as a
		// receipt's answer recorded in the receipt does.
		n, err = w.responded(t, p, t.at(), int64(len(t.event.Data)))
	case domain.ForwardFailed:
		if _, err := w.insertOutcome(t, t.at(), p.DeliveryID, p.AttemptID, p.Status, p.DurationMs, p.Error, p.AgentID, nil, nil, p.Copy); err != nil {
			return 0, true, err
		}
		n, err = w.updated(w.updateDelivery(t, p.DeliveryID, nil, nil, true))
	case domain.StreamDeleted:
		n, err = w.streamDeleted(t, p)
	case domain.AddressRateLimited:
		// The addresses apply it; the rollup counts its refusals too,
		// once, as the address's count does (refused_position).
		if err := w.stats.refused(t, p); err != nil {
			return 0, true, err
		}
		return 0, false, nil
	default:
		// RetryRequested changes no view: the ForwardRequested that follows
		// a retry carries the attempt.
		return 0, false, nil
	}
	return n, true, err
}

// responded records an attempt's local answer, recorded at at (Unix
// nanoseconds): a ForwardResponded, or the answer a receipt records (at
// the receipt's position).
//
// stored is the bytes the answer adds to the log beside the delivery's
// receipt (0 when the receipt records it, which counts them already).
func (w *historyWriter) responded(t *txn, p respondedRow, at, stored int64) (int64, error) {
	// fresh: the outcome is new to the attempts table, not one applied
	// again (see attemptOutcomeConflict), so its time is counted once.
	fresh, err := w.insertOutcome(t, at, p.DeliveryID, p.AttemptID, p.Status, p.DurationMs, "", p.AgentID,
		nullIfEmpty(p.Signature), fidelityColumn(p.Fidelity), p.Copy)
	if err != nil {
		return 0, err
	}
	var n int64
	if p.Copy {
		// A copy's answer is not the delivery's response.
		n, err = w.updated(w.updateDelivery(t, p.DeliveryID, nil, nil, true))
	} else {
		ref := w.ref(t, p.DeliveryID)
		n, err = w.updated(w.updateDelivery(t, p.DeliveryID, nil, &ref, true))
	}
	if err == nil && fresh && stored > 0 && n > 0 {
		err = w.grew(t, p.DeliveryID, stored)
	}
	if p.Copy {
		return n, err
	}
	// The local answer's time goes into the rollup of the delivery's
	// address (known to the batch once updated, unless the delivery is
	// unknown).
	if k, ok := w.known[p.DeliveryID]; ok && err == nil && fresh {
		w.stats.latency(k.address, at, p.DurationMs)
	}
	return n, err
}

// requested records an attempt's request.
func (w *historyWriter) requested(t *txn, p domain.ForwardRequested) (int64, error) {
	if err := w.insertRequest(t, p); err != nil {
		return 0, err
	}
	return w.updated(w.updateDelivery(t, p.DeliveryID, nil, nil, false))
}

// insertRequest inserts the attempt of a request.
func (w *historyWriter) insertRequest(t *txn, p domain.ForwardRequested) error {
	var edit any // NULL: sent as recorded
	if p.Edit != nil {
		b, err := json.Marshal(storedEditOf(*p.Edit))
		if err != nil {
			return fmt.Errorf("encode the edit of attempt %s: %w", p.AttemptID, err)
		}
		edit = string(b)
		if p.Edit.Body != nil {
			if _, err := t.exec(qAttemptEditBody, p.DeliveryID, p.AttemptID, s2.Encode(nil, *p.Edit.Body)); err != nil {
				return fmt.Errorf("record the edited body of attempt %s: %w", p.AttemptID, err)
			}
		}
	}
	if k, ok := w.known[p.DeliveryID]; ok && k.held != nil {
		k.held.requested(t.pos(), p.AttemptID, p.Retry, t.at(), p.Node, edit, p.Copy, p.AgentID, p.Queued, p.PossibleDuplicate)
		return nil
	}
	_, err := w.insertAttempt(t, p.DeliveryID, qAttemptRequested, qAttemptRequestedAt, p.AttemptID, p.Retry, t.at(), p.Node, edit, p.Copy, p.AgentID,
		p.Queued, p.PossibleDuplicate)
	return err
}

// insertOutcome records an attempt's outcome, recorded at at (Unix
// nanoseconds; held in memory for a delivery the batch created); changed
// is false when it was recorded already.
func (w *historyWriter) insertOutcome(t *txn, at int64, deliveryID, attemptID string, status int, durationMs int64, errText, agentID string,
	signature, fidelity any, copy bool) (changed bool, err error) {
	if k, ok := w.known[deliveryID]; ok && k.held != nil {
		return k.held.outcome(t.pos(), attemptID, at, status, durationMs, errText, agentID, signature, fidelity, copy), nil
	}
	return w.insertAttempt(t, deliveryID, qAttemptOutcome, qAttemptOutcomeAt,
		attemptID, at, status, durationMs, errText, agentID, signature, fidelity, copy)
}

func (w *historyWriter) deliveryReceived(t *txn, p receivedRow) (int64, error) {
	ref := w.ref(t, p.DeliveryID)
	var answered any // the status answered at receipt, as a DeliveryAnswered right after would record it
	reason := ""
	if p.Answer != nil {
		answered, reason = p.Answer.Status, p.Answer.Reason
	}
	size := int64(len(t.event.Data))
	var provider, event, providerID any // NULL: no provider, or none of its ids
	if p.Provider != nil {
		provider, event, providerID = p.Provider.Name, nullIfEmpty(p.Provider.EventType), nullIfEmpty(p.Provider.DeliveryID)
	}
	class := int64(0) // the rollup's status class, counted now
	if p.Answer != nil {
		class = statusClass(sql.NullInt64{Int64: int64(p.Answer.Status), Valid: true})
	}
	// The row's columns that no later event changes, in qDeliveriesHeld's
	// order; size (the stored bytes) is at heldStoredColumn, which an
	// attempt's answer in the same batch adds to (grew), and again as the
	// receipt's own bytes (request_bytes), which nothing adds to.
	row := []any{t.pos(), p.DeliveryID, p.Address, string(p.AddressKind), p.AccountID,
		p.Method, p.Target, p.Host, p.Proto, p.RemoteAddr, p.BodySize, p.Complete, t.at(), ref.stream, ref.revision,
		size, size, provider, event, providerID}
	var answeredAt any
	if answered != nil {
		answeredAt = t.at()
	}
	h := newHeldDelivery(row, answered, reason, answeredAt, t.at(), class)
	// A row created just now has no attempts: until an outcome arrives in
	// this batch, flush need not look for one (see qDeliveriesUpdateNoOutcome).
	k := &knownDelivery{dpos: t.pos(), address: p.Address, kind: p.AddressKind, account: p.AccountID, fresh: true, held: h}
	if !w.unseen[p.DeliveryID] || ref.stream != nil {
		// A row may be there (the views applying the log again, or a
		// receipt that is not its stream's first event): inserted now, as
		// at receipt, the insert finds it and changes nothing.
		n, err := t.exec(qDeliveriesHeld[1], slices.Concat(row, w.heldColumns(k, h))...)
		if err != nil || n == 0 {
			return n, err
		}
		h.row = nil // inserted
	}
	delete(w.unseen, p.DeliveryID) // a second receipt finds the first's row
	w.stats.receipt(p.Address, t.at(), class, reason)
	t.moved = &deliveryMove{deliveryID: p.DeliveryID, address: p.Address, kind: p.AddressKind,
		accountID: p.AccountID, bytes: size, at: t.at(), added: true}
	w.known[p.DeliveryID] = k
	w.held = append(w.held, k)
	w.touched(t, k, p.DeliveryID, true)
	if p.Forward != nil {
		// As the ForwardRequested that older logs have right after it, but
		// without its update of the row: at the receipt's own position, with
		// no outcome and no new answer, that update would change nothing.
		if err := w.insertRequest(t, p.Forward.requested(p.DeliveryID)); err != nil {
			return 0, err
		}
		if r := p.Forward.Responded; r != nil {
			// As the ForwardResponded that would otherwise follow, at the
			// receipt's position, recorded when the answer came.
			if _, err := w.responded(t, *r, t.at()+r.DurationMs*int64(time.Millisecond), 0); err != nil {
				return 0, err
			}
		}
	}
	return 1, nil
}

// heldStoredColumn is the place of the stored bytes (size) in the row
// deliveryReceived builds.
const heldStoredColumn = 15

// grew adds bytes an attempt stored in the log (its answer) to a known
// delivery's stored bytes, and tells the addresses (txn.moved) so that its
// account's (or inspector's) stored bytes grow alike; deleting the delivery
// takes the row's stored bytes off again, answers included.
func (w *historyWriter) grew(t *txn, id string, bytes int64) error {
	k, ok := w.known[id]
	if !ok {
		return nil
	}
	if h := k.held; h != nil && h.row != nil {
		h.row[heldStoredColumn] = h.row[heldStoredColumn].(int64) + bytes // inserted at flush
	} else if _, err := t.exec(qDeliveryGrew, bytes, id); err != nil {
		return fmt.Errorf("count the answer of delivery %s: %w", id, err)
	}
	t.moved = &deliveryMove{deliveryID: id, address: k.address, kind: k.kind, accountID: k.account, bytes: bytes, grew: true}
	return nil
}

// streamDeleted drops the row of a deleted delivery stream and its
// attempts. On a rebuild the stream's events are gone from the log, the
// row never existed and nothing changes: both ways end with the same views.
func (w *historyWriter) streamDeleted(t *txn, p domain.StreamDeleted) (int64, error) {
	streamKind, id, _ := domain.ParseStream(p.Stream)
	if streamKind != domain.StreamDelivery {
		return 0, nil // only delivery streams have rows of their own
	}
	if k, ok := w.known[id]; ok && k.held != nil {
		// Its row and attempts are read and deleted below: write them first.
		if err := w.flushHeld(t, []*knownDelivery{k}); err != nil {
			return 0, err
		}
	}
	if err := w.stats.dropped(t, id); err != nil {
		return 0, err
	}
	row, err := t.queryRow(qDeliveryDropped, id)
	if err != nil {
		return 0, err
	}
	var (
		pos, last     int64
		address, kind string
		stored, at    int64
		accountID     string
	)
	if err := row.Scan(&pos, &address, &kind, &stored, &accountID, &last, &at); errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("drop delivery %s: %w", id, err)
	}
	if k, ok := w.known[id]; ok && k.dirty && k.pos > last {
		// Its update waits for flush: the row does not say yet that the
		// batch's events changed it, and their account_events rows go too.
		last = k.pos
	}
	if _, err := t.exec(qAttemptsDropped, pos); err != nil {
		return 0, fmt.Errorf("drop attempts of delivery %s: %w", id, err)
	}
	if _, err := t.exec(qAttemptEditsDropped, id); err != nil {
		return 0, fmt.Errorf("drop the edited bodies of delivery %s: %w", id, err)
	}
	if domain.AddressKind(kind) == domain.AddressInspector {
		// Its inspector's last delivery gone, retention is done with it.
		if _, err := t.exec(qInspectorPurgingDone, address); err != nil {
			return 0, fmt.Errorf("drop delivery %s of a purged inspector: %w", id, err)
		}
	}
	if accountID != "" {
		if _, err := t.exec(qAccountEventsDropped, accountID, pos, last, p.Stream); err != nil {
			return 0, fmt.Errorf("drop account events of delivery %s: %w", id, err)
		}
	}
	if k, ok := w.known[id]; ok {
		k.dropped = true // flush must not update the row, watchers need not hear
		delete(w.known, id)
	}
	t.moved = &deliveryMove{deliveryID: id, address: address, kind: domain.AddressKind(kind), accountID: accountID, bytes: stored, at: at,
		from: pos, to: last}
	return 1, nil
}

// touched records that the current event changed k, the delivery deliveryID.
func (w *historyWriter) touched(t *txn, k *knownDelivery, deliveryID string, isNew bool) {
	k.change.DeliveryID = deliveryID
	k.change.Position = t.event.Position
	k.change.New = k.change.New || isNew
}

// ref locates the current event for the deliveries row of deliveryID: its
// revision, and its stream unless it is the delivery's own.
func (w *historyWriter) ref(t *txn, deliveryID string) logRef {
	r := logRef{revision: int64(t.event.Revision)}
	if kind, id, _ := domain.ParseStream(t.event.Stream); kind != domain.StreamDelivery || id != deliveryID {
		r.stream = t.event.Stream
	}
	return r
}

// insertAttempt runs an attempts insert for the current event: byPos with
// the delivery's position when the batch knows it, else byID, which looks
// the delivery up by its id (and inserts nothing for an unknown one). The
// queries take the event's position and the delivery, then args.
func (w *historyWriter) insertAttempt(t *txn, deliveryID, byID, byPos string, args ...any) (changed bool, err error) {
	head := []any{t.pos(), deliveryID}
	query := byID
	if k, ok := w.known[deliveryID]; ok {
		head[1], query = k.dpos, byPos
	}
	n, err := t.exec(query, append(head, args...)...)
	if err != nil {
		return false, fmt.Errorf("record attempt of delivery %s: %w", deliveryID, err)
	}
	return n > 0, nil
}

// updateDelivery marks a delivery as changed by the current event, records a
// DeliveryAnswered (its status, reason and time) when answered is not nil
// and a latest response when response is not nil, and recomputes what the
// sender was answered
// (see deliveryUpdateSet); outcome tells that the event gave an attempt an
// outcome. ok is false when the delivery is unknown.
//
// A delivery the batch already knows is not updated now but once, by flush,
// by its position, with the latest event's position, DeliveryAnswered
// status and response: the update computes every column from those and
// from the attempts table, and each event that changes the attempts of a
// delivery updates it afterwards, so the one deferred update leaves the row
// as the series of updates would.
func (w *historyWriter) updateDelivery(t *txn, id string, answered *domain.DeliveryAnswered, response *logRef, outcome bool) (ok bool, err error) {
	// Statement arguments: NULL leaves the column as it is.
	var status, answeredPos, why, at any
	if answered != nil {
		status, answeredPos, why, at = answered.Status, t.pos(), answered.Reason, t.at()
	}
	if k, ok := w.known[id]; ok {
		if !k.dirty {
			k.dirty = true
			k.deferred = true
			k.counted = nil
			w.pending = append(w.pending, k)
		}
		k.pos = t.pos()
		if answered != nil {
			k.answered, k.answeredPos, k.answeredWhy, k.answeredAt = status, answeredPos, why, at
		}
		if response != nil {
			k.response = response
		}
		k.outcomes = k.outcomes || outcome
		if k.prefetched {
			t.owned = &deliveryOwner{deliveryID: id, accountID: k.account}
		}
		w.touched(t, k, id, false)
		return true, nil
	}
	var rRev, rStream any
	if response != nil {
		rRev, rStream = response.revision, response.stream
	}
	row, err := t.queryRow(qDeliveryUpdateByID, t.pos(), id, status, rRev, rStream, answeredPos, why, at)
	if err != nil {
		return false, err
	}
	var (
		dpos    int64
		account string
	)
	counted := &statsRow{}
	if err := counted.scan(row, &dpos, &account); errors.Is(err, sql.ErrNoRows) {
		return false, nil // not cached: a later DeliveryReceived may create it
	} else if err != nil {
		return false, fmt.Errorf("update delivery %s: %w", id, err)
	}
	t.owned = &deliveryOwner{deliveryID: id, accountID: account}
	// Its attempts are not known here: flush looks them up.
	k := &knownDelivery{dpos: dpos, address: counted.address, outcomes: true, counted: counted, account: account, kind: kindOfAccount(account)}
	w.known[id] = k
	w.touched(t, k, id, false)
	return true, nil
}

// updated counts a delivery update as rows changed.
func (w *historyWriter) updated(ok bool, err error) (int64, error) {
	if ok {
		return 1, err
	}
	return 0, err
}

// flush applies the deferred delivery updates.
func (w *historyWriter) flush(t *txn) error {
	held := make([]*knownDelivery, 0, len(w.held))
	for _, k := range w.held {
		if k.held != nil && !k.dropped {
			held = append(held, k)
		}
	}
	if err := w.flushHeld(t, held); err != nil {
		return err
	}
	if err := w.flushUpdates(t); err != nil {
		return err
	}
	// Every delivery the batch changed is counted in the rollup under its
	// final status of the batch; one it created and left alone was counted
	// as it was created.
	for _, k := range w.known {
		if (k.fresh || k.prefetched) && !k.deferred {
			continue // counted as created, or not changed by the batch
		}
		if err := w.stats.counted(t, k.dpos, k.counted); err != nil {
			return err
		}
	}
	return w.stats.flush(t)
}

// flushUpdates makes the deferred delivery updates, many to a statement
// (qDeliveriesUpdate), and keeps what each returned for the rollup.
func (w *historyWriter) flushUpdates(t *txn) error {
	var withOutcomes, without [][]any
	byPos := make(map[int64]*knownDelivery, len(w.pending))
	for _, k := range w.pending {
		if k.dropped || !k.dirty {
			continue
		}
		byPos[k.dpos] = k
		if k.outcomes {
			var rRev, rStream any
			if k.response != nil {
				rRev, rStream = k.response.revision, k.response.stream
			}
			withOutcomes = append(withOutcomes, []any{k.pos, k.dpos, k.answered, rRev, rStream, k.answeredPos, k.answeredWhy, k.answeredAt})
		} else {
			without = append(without, []any{k.pos, k.dpos, k.answered, k.answeredPos, k.answeredWhy, k.answeredAt})
		}
	}
	w.pending = nil
	for _, u := range []struct {
		queries map[int]string
		rows    [][]any
	}{{qDeliveriesUpdate, withOutcomes}, {qDeliveriesUpdateNoOutcome, without}} {
		for rows := u.rows; len(rows) > 0; {
			n := chunk(len(rows))
			if err := w.updateChunk(t, u.queries[n], rows[:n], byPos); err != nil {
				return err
			}
			rows = rows[n:]
		}
	}
	for pos, k := range byPos {
		if k.dirty {
			return fmt.Errorf("update delivery at %d: updated no row, want 1", pos)
		}
	}
	return nil
}

// updateChunk runs one statement of flushUpdates over rows.
func (w *historyWriter) updateChunk(t *txn, query string, rows [][]any, byPos map[int64]*knownDelivery) error {
	st, err := t.stmt(query)
	if err != nil {
		return err
	}
	args := make([]any, 0, len(rows)*len(rows[0]))
	for _, r := range rows {
		args = append(args, r...)
	}
	res, err := st.QueryContext(t.ctx, args...)
	if err != nil {
		return fmt.Errorf("update %d deliveries: %w", len(rows), err)
	}
	defer res.Close()
	for res.Next() {
		var pos int64
		counted := &statsRow{}
		if err := res.Scan(&pos, &counted.address, &counted.received, &counted.status, &counted.was, &counted.reason); err != nil {
			return fmt.Errorf("update %d deliveries: %w", len(rows), err)
		}
		if k, ok := byPos[pos]; ok {
			k.dirty, k.counted = false, counted
		}
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("update %d deliveries: %w", len(rows), err)
	}
	return res.Close()
}

// committed tells watchers what the batch changed, by address, each
// address's changes in position order.
func (w *historyWriter) committed() {
	if w.stats.loaded {
		w.h.horizon = statsHorizon{at: w.stats.stored, known: true}
	}
	out := map[string][]readmodel.Change{}
	for _, k := range w.known {
		if k.change.DeliveryID == "" {
			continue // prefetched, and changed by none of the batch's events
		}
		out[k.address] = append(out[k.address], k.change)
	}
	for _, cs := range out {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Position < cs[j].Position })
	}
	w.h.hub.publish(out)
}

// nullIfEmpty is s, or NULL when it is empty.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// fidelityColumn is an attempt's fidelity as the attempts table keeps it:
// NULL when the agent reported no receipt, else the differing parts,
// comma-separated ("" when none differ).
func fidelityColumn(f *domain.Fidelity) any {
	if f == nil {
		return nil
	}
	return strings.Join(f.Differences(), ",")
}

// kindOfAccount is the kind of address a delivery owned by account went
// to: only Endpoints have an owner.
func kindOfAccount(account string) domain.AddressKind {
	if account != "" {
		return domain.AddressEndpoint
	}
	return domain.AddressInspector
}
