package desktop

import (
	"context"
	"time"

	"github.com/relayhq/relay/agentcli"
)

// serveAgent is the engine: the agent library `relay agent` runs, with
// every route over its one WebSocket.
func serveAgent(ctx context.Context, server, token string, routes []Route, ev events) error {
	eps := make([]agentcli.Route, len(routes))
	for i, r := range routes {
		eps[i] = agentcli.Route{EndpointID: r.EndpointID, Target: r.Target}
	}
	return agentcli.Serve(ctx, agentcli.Options{
		Server:    server,
		Token:     token,
		Endpoints: eps,
		Observer:  observer{ev},
		Roles:     true,
	})
}

// observer turns the library's events into the window's.
type observer struct{ ev events }

func (o observer) State(e agentcli.StateEvent) {
	s := ConnState{Reason: e.Reason, NextTry: e.NextTry, Since: time.Now()}
	switch e.State {
	case agentcli.Connecting:
		s.State = StateConnecting
	case agentcli.Connected:
		s.State = StateConnected
	case agentcli.Reconnecting:
		s.State = StateReconnecting
	case agentcli.Refused:
		s.State = StateRefused
	case agentcli.Stopped:
		s.State = StateOff
	default:
		return
	}
	o.ev.connState(s)
}

// Role tells the window whether this app is the Endpoint's primary.
func (o observer) Role(e agentcli.RoleEvent) { o.ev.role(e.EndpointID, e.Primary) }

func (o observer) Forwarded(e agentcli.ForwardEvent) {
	r := Row{
		DeliveryID: e.DeliveryID,
		AttemptID:  e.AttemptID,
		EndpointID: e.EndpointID,
		Time:       e.Time,
		Method:     e.Method,
		Path:       e.Path,
		Status:     e.Status,
		DurationMs: e.Duration.Milliseconds(),
		Error:      e.Error,
	}
	if r.Error == "" && e.ReportError != "" {
		r.Error = "answer not reported to the relay: " + e.ReportError
	}
	o.ev.forwarded(r)
}
