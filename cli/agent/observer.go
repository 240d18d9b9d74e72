package agent

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/cli/cmdutil"
)

// jsonObserver prints the agent's events as JSON lines (listen and agent
// with -o json): {"event":"connected",...} and {"event":"forward",...} on
// out, state changes without data on status as text.
type jsonObserver struct {
	mu          sync.Mutex
	out, status io.Writer
}

// listenEventJSON is one line of `relay listen -o json`.
type listenEventJSON struct {
	Event      string               `json:"event"` // connected, reconnecting, forward
	Time       time.Time            `json:"time"`
	Endpoints  []listenEndpointJSON `json:"endpoints,omitempty"`
	Reason     string               `json:"reason,omitempty"`
	EndpointID string               `json:"endpointId,omitempty"`
	DeliveryID string               `json:"deliveryId,omitempty"`
	AttemptID  string               `json:"attemptId,omitempty"`
	Method     string               `json:"method,omitempty"`
	Path       string               `json:"path,omitempty"`
	Status     int                  `json:"status,omitempty"`
	DurationMs *int64               `json:"durationMs,omitempty"` // forward only
	Error      string               `json:"error,omitempty"`
	Copy       bool                 `json:"copy,omitempty"`      // forward: received as a copy, its answer sent to no sender
	Signature  string               `json:"signature,omitempty"` // with --verify: the verdict
	Primary    *bool                `json:"primary,omitempty"`   // role: whether this agent answers the senders
	Listeners  int                  `json:"listeners,omitempty"` // role: sessions listening on the Endpoint
}

type listenEndpointJSON struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	URL    string `json:"url"`
	Mode   string `json:"mode"`
	Target string `json:"target"`
}

func (o *jsonObserver) State(e agentcli.StateEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch e.State {
	case agentcli.Connected:
		ev := listenEventJSON{Event: "connected", Time: time.Now().UTC()}
		for _, ep := range e.Endpoints {
			ev.Endpoints = append(ev.Endpoints, listenEndpointJSON{ID: ep.ID, Name: ep.Name, URL: ep.URL, Mode: ep.Mode, Target: ep.Target})
		}
		_ = cmdutil.WriteJSONLine(o.out, ev)
	case agentcli.Reconnecting:
		_ = cmdutil.WriteJSONLine(o.out, listenEventJSON{Event: "reconnecting", Time: time.Now().UTC(), Reason: e.Reason})
	}
}

// Role prints {"event":"role","endpointId":…,"primary":…,"listeners":…}
// on connect and on every change.
func (o *jsonObserver) Role(e agentcli.RoleEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := e.Primary
	_ = cmdutil.WriteJSONLine(o.out, listenEventJSON{Event: "role", Time: time.Now().UTC(), EndpointID: e.EndpointID, Primary: &p, Listeners: e.Listeners})
}

func (o *jsonObserver) Forwarded(e agentcli.ForwardEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.ReportOnly { // the forward's own line went out already
		o.report(e)
		return
	}
	ms := e.Duration.Milliseconds()
	_ = cmdutil.WriteJSONLine(o.out, listenEventJSON{Event: "forward", Time: e.Time.UTC(), EndpointID: e.EndpointID, DeliveryID: e.DeliveryID,
		AttemptID: e.AttemptID, Method: e.Method, Path: e.Path, Status: e.Status, DurationMs: &ms, Error: e.Error, Copy: e.Copy, Signature: e.Signature})
	if e.ReportError != "" {
		o.report(e)
	}
}

// report prints on status why e's answer was not reported to the relay.
func (o *jsonObserver) report(e agentcli.ForwardEvent) {
	fmt.Fprintln(o.status, e.ReportLine())
}

// NewJSONObserver prints the agent's events on out as JSON lines, and
// what is not an event (reconnecting, errors) on status.
func NewJSONObserver(out, status io.Writer) agentcli.Observer {
	return &jsonObserver{out: out, status: status}
}
