package agentcli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/internal/testwait"
)

// TestConnectedWaitsForTheRelayToAttach: with Roles, the agent is
// announced as connected (the public URL printed) only once the relay lists
// its session as a listener, not when the subscription is sent, so a sender
// that uses the URL at once is served; the first role is told after it.
func TestConnectedWaitsForTheRelayToAttach(t *testing.T) {
	srv := newWSServer(t)
	obs := &roleRecorder{recordingObserver: recordingObserver{forwards: make(chan ForwardEvent, 1)}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Options{Server: srv.url, Token: "t", Observer: obs, Roles: true,
			Endpoints: []Route{{EndpointID: "ep", Target: "127.0.0.1:1"}}})
	}()
	p := srv.accept(t)
	p.asksRoles = true
	p.handshake("t", "ep")

	// The relay has not attached the session yet: its answers list
	// another listener only, a few times over.
	answer := func(mine bool) {
		t.Helper()
		q := p.recv(false)
		var req gqlRequest
		if err := json.Unmarshal(q.Payload, &req); err != nil || !strings.HasPrefix(q.ID, roleOpPrefix) || !strings.Contains(req.Query, "listeners{ primary mine }") {
			t.Fatalf("got %s %q %s, want a role query", q.Type, q.ID, q.Payload)
		}
		ls := []map[string]any{{"primary": true, "mine": false}}
		if mine {
			ls = append(ls, map[string]any{"primary": false, "mine": true})
		}
		p.answerRole(q.ID, ls)
	}
	for range 3 {
		answer(false)
	}
	// Three queries take the agent 10+20 ms of polling: an announcement
	// made when the subscription was sent would be seen by now.
	if got := obs.stateList(); len(got) != 1 || got[0] != Connecting {
		t.Fatalf("states before the relay lists the session: %v, want only connecting", got)
	}
	answer(true)
	waitConnected(t, &obs.recordingObserver)
	// The role comes with the next answer, after the connection.
	answer(true)
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if n := len(obs.roleList()); n != 1 {
			return fmt.Errorf("%d roles told, want 1", n)
		}
		return nil
	})
	if r := obs.roleList()[0]; r.Primary || r.Listeners != 2 || r.Changed {
		t.Errorf("role %+v, want a copy among 2 listeners, first report", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestConnectedWithoutRoles: an agent that does not ask for roles (relay
// agent) is announced too only once the relay lists its session, then asks
// no more and tells no role.
func TestConnectedWithoutRoles(t *testing.T) {
	srv := newWSServer(t)
	obs := &roleRecorder{recordingObserver: recordingObserver{forwards: make(chan ForwardEvent, 1)}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_ = Serve(ctx, Options{Server: srv.url, Token: "t", Observer: obs, Endpoints: []Route{{EndpointID: "ep", Target: "127.0.0.1:1"}}})
	}()
	p := srv.accept(t)
	p.asksRoles = true
	p.handshake("t", "ep")
	for range 3 {
		p.answerRole(nextRoleQuery(t, p), []map[string]any{{"primary": true, "mine": false}})
	}
	if got := obs.stateList(); len(got) != 1 || got[0] != Connecting {
		t.Fatalf("states before the relay lists the session: %v, want only connecting", got)
	}
	p.answerRole(nextRoleQuery(t, p), []map[string]any{{"primary": true, "mine": true}})
	waitConnected(t, &obs.recordingObserver)
	// The agent pings every 3 s; roles asked for every rolePoll (1 s)
	// would come first.
	if m := p.recv(true); m.Type != gqlws.Ping {
		t.Fatalf("got %s %q after the connection, want the agent's ping", m.Type, m.ID)
	}
	if n := len(obs.roleList()); n != 0 {
		t.Errorf("%d roles told, want none", n)
	}
}

// TestConnectedByAForward: a forward on the agent's subscription shows
// that the relay serves it, before any role query's answer does: the agent
// is announced before the forward runs, so the public URL is printed
// before the forward's line.
func TestConnectedByAForward(t *testing.T) {
	target, local := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {})
	srv := newWSServer(t)
	obs := &recordingObserver{forwards: make(chan ForwardEvent, 1)}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_ = Serve(ctx, Options{Server: srv.url, Token: "t", Observer: obs, Endpoints: []Route{{EndpointID: "ep", Target: target}}})
	}()
	p := srv.accept(t)
	p.asksRoles = true
	p.handshake("t", "ep")
	p.answerRole(nextRoleQuery(t, p), []map[string]any{{"primary": true, "mine": false}})
	item, err := json.Marshal(map[string]any{"data": map[string]any{"forwardRequests": forwardRequest{
		AttemptID: "att-1", DeliveryID: "del-1", Method: "POST", Path: "/x"}}})
	if err != nil {
		t.Fatal(err)
	}
	p.send(wsMessage{ID: subscriptionID(0), Type: gqlws.Next, Payload: item})
	next(t, local)
	if got := obs.stateList(); len(got) != 2 || got[1] != Connected {
		t.Fatalf("states when the forward ran: %v, want connecting, connected", got)
	}
}

// nextRoleQuery returns the ID of the agent's next role query; the
// agent's ping (every 3 s) before it fails the test.
func nextRoleQuery(t *testing.T, p *wsPeer) string {
	t.Helper()
	q := p.recv(true)
	if !strings.HasPrefix(q.ID, roleOpPrefix) {
		t.Fatalf("got %s %q, want a role query", q.Type, q.ID)
	}
	return q.ID
}

func waitConnected(t *testing.T, obs *recordingObserver) {
	t.Helper()
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if got := obs.stateList(); len(got) != 2 || got[1] != Connected {
			return fmt.Errorf("states %v, want connecting, connected", got)
		}
		return nil
	})
}

type roleRecorder struct {
	recordingObserver
	roles []RoleEvent
}

func (o *roleRecorder) Role(e RoleEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.roles = append(o.roles, e)
}

func (o *roleRecorder) roleList() []RoleEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]RoleEvent(nil), o.roles...)
}
