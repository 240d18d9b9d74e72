package desktop

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/relayhq/relay/agentcli"
)

// Route is one Endpoint this agent serves and the local target it
// forwards to.
type Route struct {
	EndpointID string `json:"endpointId"`
	Target     string `json:"target"`
}

// Connection states the window shows.
const (
	StateOff          = "off"          // no Endpoint switched on
	StateConnecting   = "connecting"   // first dial of a session
	StateConnected    = "connected"    // the relay accepted every route
	StateReconnecting = "reconnecting" // dropped; Reason says why, NextTry when
	StateRefused      = "refused"      // the relay refused (bad token, unknown Endpoint); retrying as the CLI does
)

// ConnState is the agent's connection as the window shows it.
type ConnState struct {
	State   string    `json:"state"`
	Reason  string    `json:"reason,omitempty"`
	NextTry time.Time `json:"nextTry,omitzero"`
	Since   time.Time `json:"since"`
}

// Row is one forwarded request: a line of the window's live list.
type Row struct {
	DeliveryID string    `json:"deliveryId"`
	AttemptID  string    `json:"attemptId"`
	EndpointID string    `json:"endpointId"`
	Time       time.Time `json:"time"`
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	Status     int       `json:"status"`
	DurationMs int64     `json:"durationMs"`
	Error      string    `json:"error,omitempty"`
}

// Failed reports whether the local process did not answer with success.
func (r Row) Failed() bool { return r.Error != "" || r.Status >= 500 || r.Status == 0 }

// events receives what the running agent reports.
type events interface {
	connState(ConnState)
	forwarded(Row)
	// role: whether this app answers an Endpoint's senders (primary) or
	// receives copies of its deliveries.
	role(endpointID string, primary bool)
}

// engine serves routes over one connection to the relay until ctx ends,
// reporting to ev. It is the agent library's Serve.
type engine func(ctx context.Context, server, token string, routes []Route, ev events) error

// runner keeps one engine running for the routes switched on. A change of
// routes restarts the session with the new set: the relay then sees one
// disconnect and one connect, and every route shares the connection.
type runner struct {
	engine engine
	ev     events

	mu     sync.Mutex
	routes []Route
	cancel context.CancelFunc
	done   chan struct{}
}

// set replaces the served routes, stopping the old session first so the
// relay records its end before the new one starts.
func (r *runner) set(server, token string, routes []Route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Equal(routes, r.routes) && (r.cancel != nil) == (len(routes) > 0) {
		return
	}
	r.stopLocked()
	rs := slices.Clone(routes)
	r.routes = rs
	if len(rs) == 0 {
		r.ev.connState(ConnState{State: StateOff, Since: time.Now()})
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.cancel, r.done = cancel, done
	r.ev.connState(ConnState{State: StateConnecting, Since: time.Now()})
	go func() {
		defer close(done)
		// The engine retries what retrying can change and reports a
		// refusal itself; any other error it returns needs the user too.
		err := r.engine(ctx, server, token, rs, r.ev)
		if err != nil && ctx.Err() == nil && !errors.As(err, new(*agentcli.RefusedError)) {
			r.ev.connState(ConnState{State: StateRefused, Reason: err.Error(), Since: time.Now()})
		}
	}()
}

// stop ends the session and waits until it is closed.
func (r *runner) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
	r.routes = nil
}

func (r *runner) stopLocked() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.cancel, r.done = nil, nil
}
