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
	b.touched(p.DeliveryID, p.Address, true)
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
func (b *batch) updateDelivery(id string, answered any) (dpos int64, ok bool, err error) {
	row, err := b.queryRow(qDeliveryUpdate, b.pos(), id, answered)
	if err != nil {
		return 0, false, err
	}
	var address string
	if err := row.Scan(&dpos, &address); errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, fmt.Errorf("update delivery %s: %w", id, err)
	}
	b.touched(id, address, false)
	return dpos, true, nil
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
