package projections

import (
	"fmt"

	"github.com/relayhq/relay/domain"
)

// Handlers for inspectors, Endpoints and agent sessions. Each returns the
// number of rows it changed.

func (b *batch) inspectorCreated(p domain.InspectorCreated) (int64, error) {
	if err := b.storeActivity(addressKey{domain.AddressInspector, p.InspectorID}); err != nil {
		return 0, err
	}
	if err := b.storeStored(p.InspectorID); err != nil {
		return 0, err
	}
	return b.exec(qInspectorCreated, p.InspectorID, b.at(), p.IdleTTLMs, b.pos())
}

func (b *batch) endpointCreated(p domain.EndpointCreated) (int64, error) {
	if err := b.storeActivity(addressKey{domain.AddressEndpoint, p.EndpointID}); err != nil {
		return 0, err
	}
	return b.exec(qEndpointCreated, p.EndpointID, p.AccountID, p.Name, string(p.Mode), p.Target,
		p.ResponseCapture, b.at(), b.pos())
}

func (b *batch) agentConnected(p domain.AgentConnected) (int64, error) {
	return b.exec(qAgentConnected, p.AgentID, p.EndpointID, p.Target, b.at(), b.pos(), p.Node)
}

// noteActivity moves an address's last activity forward to the current event.
// The update is deferred to flush and made once per address with the
// latest time: activity only ever moves forward (MAX), so one update with
// the maximum leaves the row as the series of updates would. Only creating
// the address would tell the two apart (an update before the row exists
// changes nothing), so inspectorCreated and endpointCreated store what is
// deferred for their address first.
func (b *batch) noteActivity(kind domain.AddressKind, address string) {
	if kind != domain.AddressInspector && kind != domain.AddressEndpoint {
		return
	}
	key, at := addressKey{kind, address}, b.at()
	latest, ok := b.activity[key]
	if !ok {
		b.activityOrder = append(b.activityOrder, key)
	}
	if !ok || at > latest {
		b.activity[key] = at
	}
}

// storeActivity runs the deferred activity update of one address, if any.
func (b *batch) storeActivity(key addressKey) error {
	at, ok := b.activity[key]
	if !ok {
		return nil
	}
	delete(b.activity, key)
	query := qInspectorActivity
	if key.kind == domain.AddressEndpoint {
		query = qEndpointActivity
	}
	if _, err := b.exec(query, at, key.id); err != nil {
		return fmt.Errorf("store activity of %s %s: %w", key.kind, key.id, err)
	}
	if b.activityStored == nil {
		b.activityStored = map[string]int64{}
	}
	if at > b.activityStored[key.id] {
		b.activityStored[key.id] = at
	}
	return nil
}

// flushActivity runs every deferred activity update, before the batch commits.
func (b *batch) flushActivity() error {
	for _, key := range b.activityOrder {
		if err := b.storeActivity(key); err != nil {
			return err
		}
	}
	b.activityOrder = nil
	return b.flushStored()
}
