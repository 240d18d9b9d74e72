package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/tunnel"
)

// agentSocket is an agent's graphql-transport-ws socket whose messages are
// handed out by operation id.
type agentSocket struct {
	c    *websocket.Conn
	msgs chan wsMessage
}

type wsMessage struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// dialAgent opens an agent's socket from the local address ip.
func dialAgent(t *testing.T, url, auth, ip string) *agentSocket {
	t.Helper()
	local := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, NetDialContext: local.DialContext}
	c, _, err := d.Dial("ws"+strings.TrimPrefix(url, "http")+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	var ack wsMessage
	if err := c.ReadJSON(&ack); err != nil || ack.Type != "connection_ack" {
		t.Fatalf("connection_init: %v %+v", err, ack)
	}
	s := &agentSocket{c: c, msgs: make(chan wsMessage, 64)}
	go func() {
		defer close(s.msgs)
		for {
			var m wsMessage
			if c.ReadJSON(&m) != nil {
				return
			}
			if m.Type == "ping" {
				_ = c.WriteJSON(map[string]string{"type": "pong"})
				continue
			}
			s.msgs <- m
		}
	}()
	return s
}

// sessionStarts counts the sessions the log holds for an Endpoint.
func sessionStarts(t *testing.T, store domain.EventStore, endpointID string) (starts, ends int) {
	t.Helper()
	recs, err := store.ReadStream(context.Background(), domain.AgentStream(endpointID), 0, 100_000)
	if errors.Is(err, domain.ErrStreamNotFound) {
		return 0, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		switch r.Type {
		case domain.TypeAgentConnected:
			starts++
		case domain.TypeAgentDisconnected:
			ends++
		}
	}
	return starts, ends
}

// listenOnce starts a forwardRequests subscription on the socket and ends
// it: it returns "" once the session's start and end are in the log, or
// the code of the error the subscription was refused with.
func listenOnce(t *testing.T, s *agentSocket, store domain.EventStore, id, endpointID string) string {
	t.Helper()
	if refused, _ := startSession(t, s, store, id, endpointID); refused != "" {
		return refused
	}
	endSession(t, s, store, id, endpointID)
	return ""
}

// startSession starts a forwardRequests subscription on the socket: it
// returns once the session's start is in the log, or with the code and
// message of the error the subscription was refused with.
func startSession(t *testing.T, s *agentSocket, store domain.EventStore, id, endpointID string) (code, message string) {
	t.Helper()
	return startSessionWith(t, s, store, id, endpointID, nil)
}

// startSessionWith is startSession with the session's filters (FilterInput
// values; none when nil).
func startSessionWith(t *testing.T, s *agentSocket, store domain.EventStore, id, endpointID string, filters []map[string]any) (code, message string) {
	t.Helper()
	before, _ := sessionStarts(t, store, endpointID)
	err := s.c.WriteJSON(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{
		"query":     `subscription($id: ID!, $f: [FilterInput!]) { forwardRequests(endpointId: $id, filters: $f) { attemptId } }`,
		"variables": map[string]any{"id": endpointID, "f": filters}}})
	if err != nil {
		t.Fatal(err)
	}
	testwait.CheckFor(t, 10*time.Second, 2*time.Millisecond, func() error {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				t.Fatal("socket closed")
			}
			var p struct {
				Errors []struct {
					Message    string
					Extensions struct {
						Code              string
						RetryAfterSeconds int
					}
				}
			}
			if m.ID == id && m.Type == "next" && json.Unmarshal(m.Payload, &p) == nil && len(p.Errors) > 0 {
				code, message = p.Errors[0].Extensions.Code, p.Errors[0].Message
				if code == "RATE_LIMITED" && p.Errors[0].Extensions.RetryAfterSeconds < 1 {
					t.Errorf("refusal without retryAfterSeconds: %s", m.Payload)
				}
				return nil
			}
		default:
		}
		if n, _ := sessionStarts(t, store, endpointID); n > before {
			return nil
		}
		return errors.New("neither attached nor refused yet")
	})
	return code, message
}

// endSession ends the subscription id on the socket and returns once its
// end is in the log.
func endSession(t *testing.T, s *agentSocket, store domain.EventStore, id, endpointID string) {
	t.Helper()
	_, before := sessionStarts(t, store, endpointID)
	if err := s.c.WriteJSON(map[string]any{"id": id, "type": "complete"}); err != nil {
		t.Fatal(err)
	}
	testwait.CheckFor(t, 10*time.Second, 2*time.Millisecond, func() error {
		if _, ends := sessionStarts(t, store, endpointID); ends <= before {
			return fmt.Errorf("%d sessions ended, want more", ends)
		}
		return nil
	})
}

// TestAgentSessionsAreRated: every forwardRequests subscription is a
// session recorded in the log for good (its start with its filters, its
// end), so one account that starts and ends sessions in a loop could grow
// the log without end. Past the account's burst a session is refused
// RATE_LIMITED and nothing is recorded; past four accounts' worth, so is
// every session of the same client address. Another address is not
// affected.
func TestAgentSessionsAreRated(t *testing.T) {
	const burst = 5
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		// A rate that refills nothing while the test runs.
		r.SessionRate = ratelimit.Rate{N: 1, Per: time.Hour, Burst: burst}
	})
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	signUp := func(name string) (auth, endpointID string) {
		var su struct{ SignUp struct{ Token string } }
		e.c.MustPost(`mutation { signUp(name: "`+name+`") { token } }`, &su)
		auth = "Bearer " + su.SignUp.Token
		var ep struct{ CreateEndpoint struct{ ID string } }
		e.c.MustPost(`mutation { createEndpoint(input: {name: "p", mode: PROXY, target: "127.0.0.1:9"}) { id } }`, &ep,
			client.AddHeader("Authorization", auth))
		return auth, ep.CreateEndpoint.ID
	}

	// One account in a loop: its burst is recorded, the rest refused.
	auth, ep := signUp("looper")
	s := dialAgent(t, srv.URL, auth, "127.0.0.1")
	const tries = 3 * burst
	refused := 0
	for i := range tries {
		switch code := listenOnce(t, s, e.store, fmt.Sprint(i), ep); code {
		case "":
		case "RATE_LIMITED":
			refused++
		default:
			t.Fatalf("session %d refused %s", i, code)
		}
	}
	starts, ends := sessionStarts(t, e.store, ep)
	t.Logf("%d sessions tried, %d recorded (%d ends), %d refused", tries, starts, ends, refused)
	if starts != burst || refused != tries-burst {
		t.Errorf("%d sessions recorded and %d refused, want %d and %d", starts, refused, burst, tries-burst)
	}

	// The accounts of one address share its bucket of four bursts: the
	// looper's sessions took one (its refusals none), three more accounts
	// take theirs, and then the address is refused whatever the account.
	for k := range 3 {
		a, ep := signUp(fmt.Sprint("more", k))
		s := dialAgent(t, srv.URL, a, "127.0.0.1")
		for i := range burst {
			if code := listenOnce(t, s, e.store, fmt.Sprint(i), ep); code != "" {
				t.Fatalf("account %d's session %d refused %s", k, i, code)
			}
		}
	}
	a, last := signUp("last")
	if code := listenOnce(t, dialAgent(t, srv.URL, a, "127.0.0.1"), e.store, "1", last); code != "RATE_LIMITED" {
		t.Errorf("a fresh account of an address past its bucket: %q, want RATE_LIMITED", code)
	}
	if n, _ := sessionStarts(t, e.store, last); n != 0 {
		t.Errorf("%d sessions of the refused account recorded", n)
	}
	// Another address is not affected.
	if code := listenOnce(t, dialAgent(t, srv.URL, a, "127.0.0.2"), e.store, "1", last); code != "" {
		t.Errorf("the same account from another address: %q, want its session", code)
	}
}

// TestOpenAgentSessionsAreCapped: the session rate bounds how fast
// sessions start, not how many stay open, and each open one is walked by
// every delivery of its Endpoint. Past the Endpoint's cap, and past the
// account's, a forwardRequests subscription is refused TOO_MANY_SESSIONS,
// saying which cap and its flag, and nothing is recorded; a session that
// ends frees its place; another account is not affected.
func TestOpenAgentSessionsAreCapped(t *testing.T) {
	const perEndpoint, perAccount = 3, 5
	e := newEnvHub(t, nil, nil, nil, tunnel.SessionCaps{PerEndpoint: perEndpoint, PerAccount: perAccount})
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	signUp := func(name string, endpoints int) (auth string, ids []string) {
		var su struct{ SignUp struct{ Token string } }
		e.c.MustPost(`mutation { signUp(name: "`+name+`") { token } }`, &su)
		auth = "Bearer " + su.SignUp.Token
		for i := range endpoints {
			var ep struct{ CreateEndpoint struct{ ID string } }
			e.c.MustPost(`mutation { createEndpoint(input: {name: "p`+strconv.Itoa(i)+`", mode: PROXY, target: "127.0.0.1:9"}) { id } }`, &ep,
				client.AddHeader("Authorization", auth))
			ids = append(ids, ep.CreateEndpoint.ID)
		}
		return auth, ids
	}
	// One socket per session: the sessions of one socket are named after
	// it and its Endpoint, one each.
	start := func(auth, endpointID string) (*agentSocket, string, string) {
		t.Helper()
		s := dialAgent(t, srv.URL, auth, "127.0.0.1")
		code, msg := startSession(t, s, e.store, "1", endpointID)
		return s, code, msg
	}
	auth, eps := signUp("crowd", 3)

	// The Endpoint's cap.
	var open []*agentSocket
	for i := range perEndpoint {
		s, code, _ := start(auth, eps[0])
		if code != "" {
			t.Fatalf("session %d of %d refused %s", i+1, perEndpoint, code)
		}
		open = append(open, s)
	}
	tried := 2 * perEndpoint
	for range tried - perEndpoint {
		_, code, msg := start(auth, eps[0])
		if code != "TOO_MANY_SESSIONS" || !strings.Contains(msg, "--max-endpoint-sessions") {
			t.Errorf("a session past the Endpoint's cap: %s %q, want TOO_MANY_SESSIONS naming --max-endpoint-sessions", code, msg)
		}
	}
	starts, _ := sessionStarts(t, e.store, eps[0])
	t.Logf("%d sessions tried on one Endpoint, %d recorded", tried, starts)
	if starts != perEndpoint {
		t.Errorf("%d sessions of the Endpoint recorded, want %d", starts, perEndpoint)
	}
	// A session that ends frees its place.
	endSession(t, open[0], e.store, "1", eps[0])
	s, code, _ := start(auth, eps[0])
	if code != "" {
		t.Fatalf("a session after one ended: %s, want it attached", code)
	}
	open[0] = s

	// The account's cap: two more on a second Endpoint make five.
	for range perAccount - perEndpoint {
		if _, code, _ := start(auth, eps[1]); code != "" {
			t.Fatalf("a session within the account's cap refused %s", code)
		}
	}
	_, code, msg := start(auth, eps[2])
	if code != "TOO_MANY_SESSIONS" || !strings.Contains(msg, "--max-account-sessions") {
		t.Errorf("a session past the account's cap: %s %q, want TOO_MANY_SESSIONS naming --max-account-sessions", code, msg)
	}
	if n, _ := sessionStarts(t, e.store, eps[2]); n != 0 {
		t.Errorf("%d sessions recorded past the account's cap", n)
	}
	endSession(t, open[1], e.store, "1", eps[0])
	if _, code, _ := start(auth, eps[2]); code != "" {
		t.Errorf("a session after one of the account's ended: %s, want it attached", code)
	}

	// Another account keeps its own places.
	other, theirs := signUp("neighbour", 1)
	if _, code, _ := start(other, theirs[0]); code != "" {
		t.Errorf("another account's session: %s, want it attached", code)
	}
}
