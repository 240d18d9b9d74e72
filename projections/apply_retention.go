package projections

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
)

// Handlers for quotas, rate-limit refusals and retention. Each returns the
// number of rows it changed.

// noteStored adds n bytes to an inspector's stored bytes, deferred to flush.
func (b *batch) noteStored(inspectorID string, n int64) {
	if b.stored == nil {
		b.stored = map[string]int64{}
	}
	if _, ok := b.stored[inspectorID]; !ok {
		b.storedOrder = append(b.storedOrder, inspectorID)
	}
	b.stored[inspectorID] += n
}

// storeStored runs the deferred stored-bytes update of one inspector, if
// any. Like storeActivity, inspectorCreated calls it first, so bytes noted
// before the row existed change nothing, as event by event they would not.
// What was stored stays in b.stored for the address cache.
func (b *batch) storeStored(id string) error {
	d := b.stored[id] - b.storedDone[id]
	if d == 0 {
		return nil
	}
	if b.storedDone == nil {
		b.storedDone = map[string]int64{}
	}
	b.storedDone[id] += d
	if _, err := b.exec(qInspectorStored, d, id); err != nil {
		return fmt.Errorf("store bytes of inspector %s: %w", id, err)
	}
	return nil
}

// flushStored runs the deferred stored-bytes updates.
func (b *batch) flushStored() error {
	for _, id := range b.storedOrder {
		if err := b.storeStored(id); err != nil {
			return err
		}
	}
	b.storedOrder = nil
	return nil
}

// inspectorPurged marks the inspector purged. Its last activity becomes the
// decision's: deferred activity of this batch is stored first, as
// inspectorCreated does, so the value set here is the final one.
func (b *batch) inspectorPurged(p domain.InspectorPurged) (int64, error) {
	last, err := time.Parse(time.RFC3339Nano, p.LastActivityAt)
	if err != nil {
		return 0, fmt.Errorf("purge of inspector %s: last activity: %w", p.InspectorID, err)
	}
	if err := b.storeActivity(addressKey{domain.AddressInspector, p.InspectorID}); err != nil {
		return 0, err
	}
	return b.exec(qInspectorPurged, last.UnixNano(), p.InspectorID)
}

func (b *batch) rateLimited(p domain.AddressRateLimited) (int64, error) {
	query := qInspectorRefused
	if p.AddressKind == domain.AddressEndpoint {
		query = qEndpointRefused
	}
	return b.exec(query, p.Refused, b.pos(), p.Address)
}

// streamDeleted drops the row of a deleted delivery stream and its
// attempts, and takes its bytes off its inspector. On a rebuild the
// stream's events are gone from the log, the row never existed and
// nothing changes: both ways end with the same views.
func (b *batch) streamDeleted(p domain.StreamDeleted) (int64, error) {
	streamKind, id, _ := domain.ParseStream(p.Stream)
	if streamKind != domain.StreamDelivery {
		return 0, nil // only delivery streams have rows of their own
	}
	row, err := b.queryRow(qDeliveryDropped, id)
	if err != nil {
		return 0, err
	}
	var (
		pos           int64
		address, kind string
		stored        int64
	)
	if err := row.Scan(&pos, &address, &kind, &stored); errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("drop delivery %s: %w", id, err)
	}
	if _, err := b.exec(qAttemptsDropped, pos); err != nil {
		return 0, fmt.Errorf("drop attempts of delivery %s: %w", id, err)
	}
	if k, ok := b.known[id]; ok {
		k.dropped = true // flush must not update the row, watchers need not hear
		delete(b.known, id)
	}
	if domain.AddressKind(kind) == domain.AddressInspector {
		b.noteStored(address, -stored)
	}
	return 1, nil
}
