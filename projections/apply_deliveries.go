package projections

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
)

// Handlers for deliveries and their attempts. Each returns the number of
// rows it changed (0 when the delivery is unknown).

func (b *batch) deliveryReceived(p receivedRow) (int64, error) {
	ref := b.ref(p.DeliveryID)
	var answered any // the status answered at receipt, as a DeliveryAnswered right after would record it
	if p.Answer != nil {
		answered = p.Answer.Status
	}
	n, err := b.exec(qDeliveryReceived, b.pos(), p.DeliveryID, p.Address, string(p.AddressKind), p.AccountID,
		p.Method, p.Target, p.Host, p.Proto, p.RemoteAddr, p.BodySize, p.Complete, b.at(), ref.stream, ref.revision,
		answered, len(b.event.Data))
	if err != nil || n == 0 {
		return n, err
	}
	b.noteActivity(p.AddressKind, p.Address)
	if ref.stream == nil { // the delivery's own stream: spare indexStream a lookup
		b.owners[b.event.Stream] = p.AccountID
	}
	if p.AddressKind == domain.AddressInspector {
		b.noteStored(p.Address, int64(len(b.event.Data)))
	}
	// A row created just now has no attempts: until an outcome arrives in
	// this batch, flush need not look for one (see qDeliveryUpdateNoOutcome).
	k := &knownDelivery{dpos: b.pos(), address: p.Address}
	b.known[p.DeliveryID] = k
	b.touched(k, p.DeliveryID, true)
	return n, nil
}

func (b *batch) deliveryAnswered(p domain.DeliveryAnswered) (int64, error) {
	ok, err := b.updateDelivery(p.DeliveryID, p.Status, nil, false)
	return boolRows(ok), err
}

func (b *batch) forwardRequested(p domain.ForwardRequested) (int64, error) {
	if err := b.insertAttempt(p.DeliveryID, qAttemptRequested, qAttemptRequestedAt, p.AttemptID, p.Retry, b.at(), p.Node); err != nil {
		return 0, err
	}
	ok, err := b.updateDelivery(p.DeliveryID, nil, nil, false)
	return boolRows(ok), err
}

func (b *batch) forwardResponded(p respondedRow) (int64, error) {
	if err := b.insertAttempt(p.DeliveryID, qAttemptOutcome, qAttemptOutcomeAt,
		p.AttemptID, b.at(), p.Status, p.DurationMs, ""); err != nil {
		return 0, err
	}
	ref := b.ref(p.DeliveryID)
	ok, err := b.updateDelivery(p.DeliveryID, nil, &ref, true)
	return boolRows(ok), err
}

func (b *batch) forwardFailed(p domain.ForwardFailed) (int64, error) {
	if err := b.insertAttempt(p.DeliveryID, qAttemptOutcome, qAttemptOutcomeAt,
		p.AttemptID, b.at(), p.Status, p.DurationMs, p.Error); err != nil {
		return 0, err
	}
	ok, err := b.updateDelivery(p.DeliveryID, nil, nil, true)
	return boolRows(ok), err
}

// ref locates the current event for the deliveries row of deliveryID: its
// revision, and its stream unless it is the delivery's own.
func (b *batch) ref(deliveryID string) logRef {
	r := logRef{revision: int64(b.event.Revision)}
	if kind, id, _ := domain.ParseStream(b.event.Stream); kind != domain.StreamDelivery || id != deliveryID {
		r.stream = b.event.Stream
	}
	return r
}

// insertAttempt runs an attempts insert for the current event: byPos with
// the delivery's position when the batch knows it, else byID, which looks
// the delivery up by its id (and inserts nothing for an unknown one). The
// queries take the event's position and the delivery, then args.
func (b *batch) insertAttempt(deliveryID, byID, byPos string, args ...any) error {
	head := []any{b.pos(), deliveryID}
	query := byID
	if k, ok := b.known[deliveryID]; ok {
		head[1], query = k.dpos, byPos
	}
	if _, err := b.exec(query, append(head, args...)...); err != nil {
		return fmt.Errorf("record attempt of delivery %s: %w", deliveryID, err)
	}
	return nil
}

// updateDelivery marks a delivery as changed by the current event, records a
// DeliveryAnswered status when answered is an int and a latest response
// when response is not nil, and recomputes what the sender was answered
// (see qDeliveryUpdate); outcome tells that the event gave an attempt an
// outcome. ok is false when the delivery is unknown.
//
// A delivery the batch already knows is not updated now but once, by flush,
// by its position, with the latest event's position, DeliveryAnswered
// status and response: the update computes every column from those and
// from the attempts table, and each event that changes the attempts of a
// delivery updates it afterwards, so the one deferred update leaves the row
// as the series of updates would.
func (b *batch) updateDelivery(id string, answered any, response *logRef, outcome bool) (ok bool, err error) {
	if k, ok := b.known[id]; ok {
		if !k.dirty {
			k.dirty = true
			b.pending = append(b.pending, k)
		}
		k.pos = b.pos()
		if answered != nil {
			k.answered, k.answeredPos = answered, b.pos()
		}
		if response != nil {
			k.response = response
		}
		k.outcomes = k.outcomes || outcome
		b.touched(k, id, false)
		return true, nil
	}
	var rRev, rStream, answeredPos any
	if response != nil {
		rRev, rStream = response.revision, response.stream
	}
	if answered != nil {
		answeredPos = b.pos()
	}
	row, err := b.queryRow(qDeliveryUpdateByID, b.pos(), id, answered, rRev, rStream, answeredPos)
	if err != nil {
		return false, err
	}
	var (
		dpos    int64
		address string
	)
	if err := row.Scan(&dpos, &address); errors.Is(err, sql.ErrNoRows) {
		return false, nil // not cached: a later DeliveryReceived may create it
	} else if err != nil {
		return false, fmt.Errorf("update delivery %s: %w", id, err)
	}
	// Its attempts are not known here: flush looks them up.
	k := &knownDelivery{dpos: dpos, address: address, outcomes: true}
	b.known[id] = k
	b.touched(k, id, false)
	return true, nil
}

// flush applies the deferred delivery and activity updates, before the
// batch commits.
func (b *batch) flush() error {
	for _, k := range b.pending {
		if k.dropped {
			continue
		}
		var (
			n   int64
			err error
		)
		if k.outcomes {
			var rRev, rStream any
			if k.response != nil {
				rRev, rStream = k.response.revision, k.response.stream
			}
			n, err = b.exec(qDeliveryUpdate, k.pos, k.dpos, k.answered, rRev, rStream, k.answeredPos)
		} else {
			n, err = b.exec(qDeliveryUpdateNoOutcome, k.pos, k.dpos, k.answered, k.answeredPos)
		}
		if err == nil && n != 1 {
			err = fmt.Errorf("updated %d rows, want 1", n)
		}
		if err != nil {
			return fmt.Errorf("update delivery at %d: %w", k.dpos, err)
		}
		k.dirty = false
	}
	b.pending = nil
	return b.flushActivity()
}

func boolRows(ok bool) int64 {
	if ok {
		return 1
	}
	return 0
}
