package projections

import "github.com/relayhq/relay/domain"

// Handlers for inspectors, Endpoints and agent sessions. Each returns the
// number of rows it changed.

func (b *batch) inspectorCreated(p domain.InspectorCreated) (int64, error) {
	return b.exec(qInspectorCreated, p.InspectorID, b.at(), p.IdleTTLMs, b.pos())
}

func (b *batch) endpointCreated(p domain.EndpointCreated) (int64, error) {
	return b.exec(qEndpointCreated, p.EndpointID, p.AccountID, p.Name, string(p.Mode), p.Target,
		p.ResponseCapture, b.at(), b.pos())
}

func (b *batch) agentConnected(p domain.AgentConnected) (int64, error) {
	return b.exec(qAgentConnected, p.AgentID, p.EndpointID, p.Target, b.at(), b.pos())
}

// activity moves an address's last activity forward to the current event.
func (b *batch) activity(kind domain.AddressKind, address string) error {
	var query string
	switch kind {
	case domain.AddressInspector:
		query = qInspectorActivity
	case domain.AddressEndpoint:
		query = qEndpointActivity
	default:
		return nil
	}
	_, err := b.exec(query, b.at(), address)
	return err
}
