package tunnel

import (
	"context"

	"github.com/relayhq/relay/domain"
)

// Sessions is what the tunnel offers the API that agents connect through:
// attach a session and receive its work, report an attempt's outcome
// (Claim, then deliver), count an Endpoint's sessions. *Hub implements it.
type Sessions interface {
	Attach(ctx context.Context, s SessionInfo) (<-chan domain.ForwardCommand, error)
	Claim(ctx context.Context, accountID, agentID string, out domain.ForwardOutcome) (deliver func(), err error)
	Connected(endpointID string) int
	// Listeners lists the sessions of an Endpoint on every live node.
	Listeners(endpointID string) []Listener
	// Written tells that a session's frame of an attempt was written to
	// the agent's socket, or dropped with it: a copy's bytes are no
	// longer held.
	Written(agentID, attemptID string)
}

var _ Sessions = (*Hub)(nil)
