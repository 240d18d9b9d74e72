package ingress

import (
	"context"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/record"
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
	Filters         []domain.Filter     // Endpoints only: which deliveries are forwarded
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
	// Network is the client network that created an inspector ("" when
	// unknown); GuestStored is what every guest inspector's deliveries take
	// in the log and GuestNetworkStored what those of Network's inspectors
	// take, as far as the views have applied them (Config.GuestStorage
	// counts these). Inspectors only.
	Network                         string
	GuestStored, GuestNetworkStored int64
	// AccountStoredBytes is what the Endpoint's account's deliveries take
	// in the log, as far as the views have applied them; AccountStorage
	// (0: unlimited) and AccountRate (Off: none) are the account's quota in
	// force. Endpoints only.
	AccountStoredBytes int64
	AccountStorage     int64
	AccountRate        ratelimit.Rate
	// InSignupStorage is set when the Endpoint's account was made by open
	// sign-up and has no storage quota of its own
	// (domain.InSignupStorage); then AccountNetwork is the client network
	// that signed it up ("" when unknown), SignupStored what every such
	// account takes in the log and SignupNetworkStored what those of
	// AccountNetwork take, as far as the views have applied them
	// (Config.SignupStorage counts these). Endpoints only.
	InSignupStorage                   bool
	AccountNetwork                    string
	SignupStored, SignupNetworkStored int64
	// Answer is what an inspector or a LOG Endpoint answers (nil: 204);
	// Handshakes the providers' verification requests the address answers
	// itself (nil: none; a PROXY Endpoint only with Handshakes.InProxy RELAY).
	Answer     *domain.Answer
	Handshakes *domain.Handshakes
	// Smee: inspectors only, a GET asking for text/event-stream opens
	// smee's event stream instead of being recorded (smee.go).
	Smee bool
	// SmeeKeyHash: Endpoints only, the SHA-256 (hex) of the key a stream
	// request must name in its path (SmeeKeyPath + key); "" for none.
	SmeeKeyHash string
}

// AddressResolver finds the aggregate behind a public address. It returns an
// error matching domain.ErrNotFound for ids that name nothing.
type AddressResolver interface {
	Resolve(ctx context.Context, id string) (Route, error)
}

// Recorder records what ingress decides on a request (record.Recorder).
// ReceiveForward's record may still be on its way to disk when it returns:
// the sender is answered only once Queued.Wait has returned nil.
type Recorder interface {
	Now() time.Time
	NewID() string
	ReceiveAnswered(ctx context.Context, rc record.Receipt, status int, reason string) error
	// ReceiveQueued records a QUEUE Endpoint's delivery with its answer.
	ReceiveQueued(ctx context.Context, rc record.Receipt, status int, reason string) error
	ReceiveForward(ctx context.Context, rc record.Receipt, fw record.Forward) (domain.ForwardCommand, record.Queued, error)
	RecordLateAnswer(ctx context.Context, deliveryID string, status int, reason string) error
	ExpireIfIdle(ctx context.Context, inspectorID string, lastActivity time.Time) (bool, error)
	RecordRefusals(ctx context.Context, address string, kind domain.AddressKind, n int64, from, to time.Time) error
}

// Forwarder takes one attempt of a delivery to an Endpoint's local target
// and waits for its outcome. It records the attempt's result
// (ForwardResponded or ForwardFailed) itself. It returns within the
// command's timeout and a grace for recording (tunnel.RecordGrace), with an
// error if no outcome came by then, or sooner when ctx ends.
type Forwarder interface {
	Forward(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error)
}

// Admitter is a Forwarder that knows its listeners' filters (tunnel.Hub):
// Admits tells whether any listener would be given the request, and when
// none would, why not.
type Admitter interface {
	Admits(endpointID, accountID string, req *domain.FilterRequest) (ok bool, why string)
}
