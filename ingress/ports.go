package ingress

import (
	"context"
	"time"

	"github.com/relayhq/relay/domain"
)

// Route is what ingress needs to know about a public address to decide how
// to answer a request to it.
type Route struct {
	ID              string
	Kind            domain.AddressKind
	AccountID       string              // owner of an Endpoint; empty for inspectors
	Mode            domain.EndpointMode // Endpoints only
	ResponseCapture bool                // Endpoints only: store the local response body
	Deleted         bool                // Endpoints only
	Expired         bool                // inspectors only: expiry already recorded
	// LastActivityAt is the time of the latest request to an inspector, or
	// its creation time when none arrived yet. A zero value means unknown:
	// ingress then never expires the inspector for idleness.
	LastActivityAt time.Time
	// ExpiresAt is when an idle inspector expires (zero: unknown). Before
	// it, ingress needs no read of the inspector's stream.
	ExpiresAt time.Time
	// StoredBytes is what an inspector's deliveries take in the log, as
	// far as the views have applied them (the quota counts these).
	StoredBytes int64
}

// AddressResolver finds the aggregate behind a public address. It returns an
// error matching domain.ErrNotFound for ids that name nothing.
type AddressResolver interface {
	Resolve(ctx context.Context, id string) (Route, error)
}

// Forwarder takes one attempt of a delivery to an Endpoint's local target
// and waits for its outcome. It records the attempt's result
// (ForwardResponded or ForwardFailed) itself.
type Forwarder interface {
	Forward(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error)
}
