package projections

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
)

// Handlers for deliveries and their attempts. Each returns the number of
// rows it changed (0 when the delivery is unknown).

func (b *batch) deliveryReceived(p domain.DeliveryReceived) (int64, error) {
	headers, err := encodeHeaders(p.Headers)
	if err != nil {
		return 0, err
	}
	n, err := b.exec(qDeliveryReceived, b.pos(), p.DeliveryID, p.Address, string(p.AddressKind), p.AccountID,
		p.Method, p.Target, p.Host, p.Proto, p.RemoteAddr, headers, p.BodySize, p.Complete, b.at())
	if err != nil || n == 0 {
		return n, err
	}
	body := p.Body
	if body == nil {
		body = []byte{}
	}
	if _, err := b.exec(qDeliveryBody, b.pos(), body); err != nil {
		return 0, err
	}
	if err := b.activity(p.AddressKind, p.Address); err != nil {
		return 0, err
	}
	b.known[p.DeliveryID] = &knownDelivery{dpos: b.pos(), address: p.Address}
	b.touched(p.DeliveryID, true)
	return n, nil
}

func (b *batch) deliveryAnswered(p domain.DeliveryAnswered) (int64, error) {
	_, ok, err := b.updateDelivery(p.DeliveryID, p.Status)
	return boolRows(ok), err
}

func (b *batch) forwardRequested(p domain.ForwardRequested) (int64, error) {
	if _, err := b.exec(qAttemptRequested, b.pos(), p.DeliveryID, p.AttemptID, p.Retry, b.at()); err != nil {
		return 0, err
	}
	_, ok, err := b.updateDelivery(p.DeliveryID, nil)
	return boolRows(ok), err
}

func (b *batch) forwardResponded(p domain.ForwardResponded) (int64, error) {
	if _, err := b.exec(qAttemptOutcome, b.pos(), p.DeliveryID, p.AttemptID, b.at(), p.Status, p.DurationMs, ""); err != nil {
		return 0, err
	}
	dpos, ok, err := b.updateDelivery(p.DeliveryID, nil)
	if err != nil || !ok {
		return 0, err
	}
	headers, err := encodeHeaders(p.Headers)
	if err != nil {
		return 0, err
	}
	var body []byte // NULL when the Endpoint does not capture responses
	if p.Captured {
		body = p.Body
		if body == nil {
			body = []byte{}
		}
	}
	_, err = b.exec(qDeliveryResponse, dpos, headers, p.Captured, body)
	return 1, err
}

func (b *batch) forwardFailed(p domain.ForwardFailed) (int64, error) {
	if _, err := b.exec(qAttemptOutcome, b.pos(), p.DeliveryID, p.AttemptID, b.at(), p.Status, p.DurationMs, p.Error); err != nil {
		return 0, err
	}
	_, ok, err := b.updateDelivery(p.DeliveryID, nil)
	return boolRows(ok), err
}

// updateDelivery marks a delivery as changed by the current event, records a
// DeliveryAnswered status when answered is an int, recomputes what the
// sender was answered (see qDeliveryUpdate) and returns the delivery's
// position; ok is false when the delivery is unknown.
//
// A delivery the batch already knows is not updated now but once, by flush,
// with the latest event's position and DeliveryAnswered status: qDeliveryUpdate
// computes every column from those and from the attempts table, and each
// event that changes the attempts of a delivery updates it afterwards, so
// the one deferred update leaves the row as the series of updates would.
func (b *batch) updateDelivery(id string, answered any) (dpos int64, ok bool, err error) {
	if k, ok := b.known[id]; ok {
		if !k.dirty {
			k.dirty = true
			b.pending = append(b.pending, id)
		}
		k.pos = b.pos()
		if answered != nil {
			k.answered = answered
		}
		b.touched(id, false)
		return k.dpos, true, nil
	}
	row, err := b.queryRow(qDeliveryUpdate, b.pos(), id, answered)
	if err != nil {
		return 0, false, err
	}
	var address string
	if err := row.Scan(&dpos, &address); errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil // not cached: a later DeliveryReceived may create it
	} else if err != nil {
		return 0, false, fmt.Errorf("update delivery %s: %w", id, err)
	}
	b.known[id] = &knownDelivery{dpos: dpos, address: address}
	b.touched(id, false)
	return dpos, true, nil
}

// flush applies the deferred delivery updates, before the batch commits.
func (b *batch) flush() error {
	for _, id := range b.pending {
		k := b.known[id]
		row, err := b.queryRow(qDeliveryUpdate, k.pos, id, k.answered)
		if err != nil {
			return err
		}
		var (
			dpos    int64
			address string
		)
		if err := row.Scan(&dpos, &address); err != nil {
			return fmt.Errorf("update delivery %s: %w", id, err)
		}
	}
	b.pending = nil
	return nil
}

func boolRows(ok bool) int64 {
	if ok {
		return 1
	}
	return 0
}

func encodeHeaders(h []domain.Header) (string, error) {
	if h == nil {
		h = []domain.Header{}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("encode headers: %w", err)
	}
	return string(b), nil
}
