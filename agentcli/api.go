package agentcli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/domain"
)

// Options configure Serve.
type Options struct {
	// Server is the relay's URL (http, https, ws or wss); its GraphQL
	// WebSocket is Server/graphql.
	Server string
	// Token is an API token of the account that owns the Endpoints.
	Token string
	// Endpoints are served over one WebSocket, one forwardRequests
	// subscription each. At least one.
	Endpoints []Route
	// Timeout bounds one local request; 0 is 30 s.
	Timeout time.Duration
	// Insecure accepts any certificate of an https target (a self-signed
	// local one).
	Insecure bool
	// HostHeader is the Host of the local request: HostRewrite (""
	// too: the target's host, as a local server expects) or HostPreserve
	// (the public host the sender called).
	HostHeader string
	// CAFile names PEM certificates trusted for an https relay besides
	// the system's (a private CA); "" trusts the system's only.
	CAFile string
	// Observer hears the connection's state and every forward; nil drops
	// them. Forwarded is called from the goroutine of each request, so
	// concurrently; State from Serve's. Neither should block for long: a
	// slow Forwarded holds up that request's answer to the relay.
	Observer Observer
	// Verify, when set, checks each request's provider signature before
	// its answer is reported (relay listen --verify): its verdict is
	// printed, and reported to the relay with the answer.
	Verify func(headers []Header, body []byte, at time.Time) string
	// PlainGraphQL speaks only graphql-transport-ws, as third-party agents
	// do, instead of offering the relay's binary data path first (see
	// internal/agentwire): for comparing the two, or a proxy that passes no
	// other subprotocol.
	PlainGraphQL bool
	// Primary asks the relay to make this agent's sessions the primary
	// listener of their Endpoints (relay listen --primary): their answers
	// go to the senders; other listeners get copies.
	Primary bool
	// Filters choose the deliveries this agent is given (all must match;
	// see domain.ParseFilter); none: every delivery.
	Filters []domain.Filter
	// Roles asks the relay every second whether this agent is the
	// primary listener of each Endpoint and tells an Observer that is a
	// RoleObserver, on connect and on every change. Without it the agent
	// still asks until the relay lists its sessions, as the Connected
	// state waits for that.
	Roles bool
}

// RoleObserver is an Observer that also hears whether this agent answers
// an Endpoint's senders (primary) or receives copies, on connect and on
// every change (the relay's primary left, or a newer --primary came).
type RoleObserver interface {
	Role(RoleEvent)
}

// RoleEvent is this agent's role on one Endpoint.
type RoleEvent struct {
	EndpointID string
	Name       string
	Primary    bool // its answers go to the senders; else it receives copies
	Listeners  int  // sessions listening on the Endpoint on this relay node
	Changed    bool // false for the first report after connecting
}

// Route is one Endpoint the agent serves and where its requests go.
type Route struct {
	EndpointID string
	// Target is a ParseTarget string (3000, localhost:3000,
	// https://localhost:8443/api); empty uses the Endpoint's own target
	// as the relay stores it.
	Target string
}

// Observer hears what the agent does.
type Observer interface {
	State(StateEvent)
	Forwarded(ForwardEvent)
}

// State is the connection's state.
type State int

const (
	// Connecting: dialling the relay for the first time.
	Connecting State = iota
	// Connected: the relay accepted the token and every Endpoint and lists
	// this agent as their listener; forwarding.
	Connected
	// Reconnecting: the connection failed or dropped; Reason says why,
	// NextTry when the agent dials again.
	Reconnecting
	// Refused: the relay refused the token or an Endpoint; Serve returns
	// a *RefusedError after this event.
	Refused
	// Stopped: ctx ended and the session was closed; Serve returns nil.
	Stopped
)

func (s State) String() string {
	switch s {
	case Connecting:
		return "connecting"
	case Connected:
		return "connected"
	case Reconnecting:
		return "reconnecting"
	case Refused:
		return "refused"
	case Stopped:
		return "stopped"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// StateEvent is a change of the connection's state.
type StateEvent struct {
	State  State
	Server string // the GraphQL WebSocket URL
	// Endpoints, with Connected: what each served Endpoint is, in the
	// order of Options.Endpoints.
	Endpoints []EndpointInfo
	Reason    string    // Reconnecting, Refused: why
	NextTry   time.Time // Reconnecting: when the agent dials again
	// HeldOff, with Reconnecting: the relay refused the session for now
	// (too many open, or started too fast) rather than the connection
	// dropping; Reason says which and what to do.
	HeldOff bool
}

// EndpointInfo is a served Endpoint as the relay describes it on connect.
type EndpointInfo struct {
	ID     string
	Name   string
	URL    string // the public URL to give to webhook senders
	Mode   string // PROXY forwards; LOG records and answers, nothing reaches the agent
	Target string // where this agent forwards its requests (Target.String())
	// OtherAgents counts the agent connections that served the Endpoint
	// before this one; one of them answers the senders, the others get
	// copies (see RoleEvent).
	OtherAgents int
}

// Header is a request or response header, values in the order sent.
type Header = domain.Header

// ForwardEvent is one request forwarded to the local target.
type ForwardEvent struct {
	Time       time.Time // when the request reached the agent
	EndpointID string
	DeliveryID string // for `relay retry` and `relay deliveries show`
	AttemptID  string
	Method     string
	Path       string // the recorded path and query
	Status     int    // the local status; 502/504 when Error is set
	Duration   time.Duration
	Error      string // why the local target gave no answer; "" when it answered
	// Copy: this agent received the request as a copy, as the relay last
	// told it its role (RoleEvent, asked every second with Options.Roles):
	// its answer is recorded, never sent to the sender.
	Copy bool
	// ReportError is set when the answer could not be reported to the
	// relay (it no longer waited, or the connection dropped).
	ReportError string
	// ReportOnly: this event only tells ReportError, for a forward another
	// event tells of. On the newest binary subprotocol the relay answers a
	// Complete only to refuse it, and the agent's reader tells of the
	// refusal as it reads it: usually after the worker has told of the
	// forward, but either may come first. The fields besides ReportError
	// are that event's, without the request's headers and body (or only
	// AttemptID, with Method "answer" and Path "of attempt <ID>", when the
	// refusal came too late to be matched).
	ReportOnly bool
	// The request as sent to the local target (after the path prefix).
	RequestHeaders []Header
	RequestBody    []byte
	// Signature is the verdict of a provider signature check made on this
	// machine (relay listen --verify), "" when none was asked for.
	Signature string
}

// RefusedError is the server refusing the agent for a reason that retrying
// will not change: a bad token (401, UNAUTHENTICATED), a forbidden
// connection (403) or an Endpoint this token does not know (NOT_FOUND).
type RefusedError struct{ reason string }

func (e *RefusedError) Error() string { return e.reason }

// ExitCode is 2, the relay command's code for a refusal.
func (e *RefusedError) ExitCode() int { return 2 }

// heldOffError is the relay refusing a session for now: past a cap of open
// sessions (TOO_MANY_SESSIONS: one frees when another listener ends) or
// past the rate of session starts (RATE_LIMITED, with the relay's
// retryAfterSeconds). Dialling again soon is refused again, so the agent
// waits longer than after a drop (agent.heldOffDelay).
type heldOffError struct {
	reason     string
	full       bool          // wait from heldOffBase up to heldOffCap
	retryAfter time.Duration // wait at least this long
}

func (e *heldOffError) Error() string { return e.reason }

// OptionsError is an Options value Serve cannot use.
type OptionsError struct{ err error }

func (e *OptionsError) Error() string { return e.err.Error() }
func (e *OptionsError) Unwrap() error { return e.err }

// ExitCode is 2, the relay command's code for a usage error.
func (e *OptionsError) ExitCode() int { return 2 }

// Serve connects to the relay and forwards the Endpoints' requests until
// ctx ends. It reconnects after every drop with exponential backoff and
// jitter. It returns nil when ctx ends, after closing the WebSocket with a
// normal close so the relay records the disconnect at once; a
// *RefusedError when the relay refuses the token or an Endpoint; an
// *OptionsError when o is unusable.
func Serve(ctx context.Context, o Options) error {
	a, err := newAgent(o)
	if err != nil {
		return err
	}
	return a.run(ctx)
}

// validate checks o and returns the WebSocket URL and parsed routes.
func (o Options) validate() (string, []route, error) {
	if o.Server == "" {
		return "", nil, errors.New("no server")
	}
	ws, err := apiclient.WebSocketURL(o.Server)
	if err != nil {
		return "", nil, fmt.Errorf("server: %w", err)
	}
	if o.Token == "" {
		return "", nil, errors.New("no token")
	}
	if len(o.Endpoints) == 0 {
		return "", nil, errors.New("no endpoint")
	}
	if o.HostHeader != "" && o.HostHeader != HostRewrite && o.HostHeader != HostPreserve {
		return "", nil, fmt.Errorf("host header %q: %s or %s", o.HostHeader, HostRewrite, HostPreserve)
	}
	if o.Timeout < 0 {
		return "", nil, errors.New("timeout must be positive")
	}
	routes := make([]route, 0, len(o.Endpoints))
	var seen []string
	for _, r := range o.Endpoints {
		if err := domain.ValidateAddressID(r.EndpointID); err != nil {
			return "", nil, fmt.Errorf("endpoint %q: %w", r.EndpointID, err)
		}
		if slices.Contains(seen, r.EndpointID) {
			return "", nil, fmt.Errorf("endpoint %q given twice", r.EndpointID)
		}
		seen = append(seen, r.EndpointID)
		rt := route{id: r.EndpointID}
		if r.Target != "" {
			t, err := ParseTarget(r.Target)
			if err != nil {
				return "", nil, fmt.Errorf("endpoint %s: %w", r.EndpointID, err)
			}
			rt.target = &t
		}
		routes = append(routes, rt)
	}
	return ws, routes, nil
}

// route is one served Endpoint; target nil takes the Endpoint's own.
type route struct {
	id     string
	target *Target
}

type discard struct{}

func (discard) State(StateEvent)       {}
func (discard) Forwarded(ForwardEvent) {}
