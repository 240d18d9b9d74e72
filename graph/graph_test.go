package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/secrets"
	"github.com/relayhq/relay/tunnel"
)

const adminToken = "operator-secret"

// env is the API over the real store, views and tunnel, in process.
type env struct {
	c     *client.Client
	h     http.Handler
	store domain.EventStore
	views *projections.Runner
	log   *countingLog // what the API read from the log
	reads *streamReads // the streams the commands read
	// viewsReads is the streams the views read from the log (a row's
	// headers and bodies).
	viewsReads *streamReads
}

func newEnv(t *testing.T) *env { t.Helper(); return newEnvClock(t, nil) }

// newEnvClock is newEnv whose service decides with now (time.Now when nil).
func newEnvClock(t *testing.T, now func() time.Time) *env { t.Helper(); return newEnvWith(t, now, nil) }

// newEnvWith is newEnvClock with the resolver changed by tune (if not nil).
func newEnvWith(t *testing.T, now func() time.Time, tune func(*graph.Resolver)) *env {
	t.Helper()
	return newEnvConfig(t, now, tune, nil)
}

// newEnvConfig is newEnvWith with the commands' configuration changed by
// config (if not nil).
func newEnvConfig(t *testing.T, now func() time.Time, tune func(*graph.Resolver), config func(*commands.Config)) *env {
	t.Helper()
	return newEnvHub(t, now, tune, config, tunnel.SessionCaps{})
}

// newEnvHub is newEnvConfig with the tunnel's session caps set.
func newEnvHub(t *testing.T, now func() time.Time, tune func(*graph.Resolver), config func(*commands.Config), caps tunnel.SessionCaps) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	codec := domain.NewCodec()
	viewsReads := &streamReads{EventStore: store}
	views, err := projections.Open(ctx, filepath.Join(dir, "views.db"), viewsReads, projections.Options{Codec: codec})
	if err != nil {
		t.Fatal(err)
	}
	viewsDone := make(chan struct{})
	go func() { _ = views.Run(ctx); close(viewsDone) }()
	rec := record.New(record.Config{Store: store, Codec: codec, Logger: log, Now: now})
	hub := tunnel.NewHub(tunnel.HubConfig{Recorder: rec, Logger: log, Sessions: caps})
	keys, _, err := secrets.Generate()
	if err != nil {
		t.Fatal(err)
	}
	reads := &streamReads{EventStore: store}
	cfg := commands.Config{InspectorTTL: time.Hour, ForwardTimeout: time.Second, SignupOpen: true, Secrets: keys}
	if config != nil {
		config(&cfg)
	}
	svc := commands.New(cfg, reads, rec, views, hub, hub, log)
	counted := &countingLog{EventStore: store}
	res := &graph.Resolver{
		Service: svc, Views: views, Log: counted, Hub: hub, Logger: log, AdminToken: adminToken,
		PublicURL: func(id string) string { return "http://" + id + ".localhost/" },
	}
	if tune != nil {
		tune(res)
	}
	h := graph.NewHandler(res, graph.ServerOptions{})
	t.Cleanup(func() {
		cancel()
		hub.Close()
		<-viewsDone
		_ = views.Close()
		_ = store.Close()
	})
	return &env{c: client.New(h), h: h, store: store, views: views, log: counted, reads: reads, viewsReads: viewsReads}
}

func code(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	for _, c := range []string{"UNAUTHENTICATED", "NOT_FOUND", "INVALID_INPUT", "RETRY_NOT_PROXY", "AGENT_NOT_CONNECTED", "PAYLOAD_INCOMPLETE", "INTERNAL"} {
		if strings.Contains(s, `"code":"`+c+`"`) {
			return c
		}
	}
	return s
}

func TestInvalidQueriesGetErrorsNotCrashes(t *testing.T) {
	e := newEnv(t)
	for _, q := range []string{
		`{`, `query { nope }`, `mutation { createInspector }`, `{ inspector(id: true) { id } }`,
		`{ inspector { id } }`, `subscription { deliveries(address: "x") { id } }`, strings.Repeat("{", 5000),
	} {
		resp, err := e.c.RawPost(q)
		switch {
		case err != nil && (strings.Contains(err.Error(), "http 5") || !strings.Contains(err.Error(), `"errors"`)):
			t.Errorf("%.40q: %v", q, err)
		case err == nil && resp.Errors == nil:
			t.Errorf("%.40q: no GraphQL error", q)
		}
	}
	// A raw body that is not JSON at all.
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader("not json")))
	if rec.Code >= 500 || !strings.Contains(rec.Body.String(), "errors") {
		t.Fatalf("non-JSON body: %d %s", rec.Code, rec.Body)
	}
}

func TestInspectorLifecycle(t *testing.T) {
	e := newEnv(t)
	var created struct{ CreateInspector struct{ ID, URL string } }
	e.c.MustPost(`mutation { createInspector { id url } }`, &created)
	id := created.CreateInspector.ID
	if domain.ValidateAddressID(id) != nil || created.CreateInspector.URL != "http://"+id+".localhost/" {
		t.Fatalf("created %+v", created)
	}
	var got struct {
		Inspector *struct {
			ID         string
			Expired    bool
			Deliveries struct{ Nodes []struct{ ID string } }
		}
	}
	e.c.MustPost(`query($id: ID!) { inspector(id: $id) { id expired deliveries { nodes { id } } } }`, &got, client.Var("id", id))
	if got.Inspector == nil || got.Inspector.ID != id || got.Inspector.Expired || len(got.Inspector.Deliveries.Nodes) != 0 {
		t.Fatalf("inspector %+v", got.Inspector)
	}
	var unknown struct{ Inspector *struct{ ID string } }
	e.c.MustPost(`query { inspector(id: "unknownunknown") { id } }`, &unknown)
	if unknown.Inspector != nil {
		t.Fatalf("unknown inspector is %+v, want null", unknown.Inspector)
	}
	var bad struct {
		Inspector struct{ Deliveries struct{ Nodes []any } }
	}
	err := e.c.Post(`query($id: ID!) { inspector(id: $id) { deliveries(after: "%%%") { nodes { id } } } }`, &bad, client.Var("id", id))
	if code(err) != "INVALID_INPUT" {
		t.Fatalf("malformed cursor: %v", err)
	}
}

func TestEventsArePagedInOrder(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 5; i++ {
		e.c.MustPost(`mutation { createInspector { id } }`, &struct{ CreateInspector struct{ ID string } }{})
	}
	type page struct {
		Events struct {
			Nodes    []struct{ Position, Type, Stream, Data string }
			PageInfo struct {
				HasNextPage bool
				EndCursor   *string
			}
		}
	}
	var all []string
	var after *string
	for {
		var p page
		e.c.MustPost(`query($after: String) { events(first: 2, after: $after) { nodes { position type stream data } pageInfo { hasNextPage endCursor } } }`, &p,
			client.Var("after", after), client.AddHeader("Authorization", "Bearer "+adminToken))
		for _, n := range p.Events.Nodes {
			if n.Type != domain.TypeInspectorCreated || !strings.HasPrefix(n.Stream, "inspector-") || !strings.Contains(n.Data, "idle_ttl_ms") {
				t.Fatalf("event %+v", n)
			}
			all = append(all, n.Position)
		}
		if !p.Events.PageInfo.HasNextPage {
			break
		}
		after = p.Events.PageInfo.EndCursor
	}
	if strings.Join(all, ",") != "1,2,3,4,5" {
		t.Fatalf("positions %v, want 1..5", all)
	}
	// A page that ends exactly at the log's last event has no next page;
	// one that ends before it has.
	for _, tc := range []struct {
		first, after int
		wantNext     bool
	}{{5, 0, false}, {4, 0, true}, {2, 3, false}, {1, 3, true}, {3, 5, false}} {
		var p page
		e.c.MustPost(`query($first: Int, $after: String) { events(first: $first, after: $after) { nodes { position } pageInfo { hasNextPage endCursor } } }`, &p,
			client.Var("first", tc.first), client.Var("after", strconv.Itoa(tc.after)), client.AddHeader("Authorization", "Bearer "+adminToken))
		if p.Events.PageInfo.HasNextPage != tc.wantNext {
			t.Errorf("events(first: %d, after: %d): hasNextPage %v, want %v", tc.first, tc.after, p.Events.PageInfo.HasNextPage, tc.wantNext)
		}
	}
	err := e.c.Post(`{ events(after: "x") { nodes { id } } }`, &struct{}{}, client.AddHeader("Authorization", "Bearer "+adminToken))
	if code(err) != "INVALID_INPUT" {
		t.Fatalf("bad cursor: %v", err)
	}
	if err := e.c.Post(`{ events { nodes { id } } }`, &struct{}{}); code(err) != "UNAUTHENTICATED" {
		t.Fatalf("log without a token: %v", err)
	}
}

// TestAccountsReadOnlyTheirOwnEvents: an account's view of the log holds
// its own streams and nothing of guests or other accounts.
func TestAccountsReadOnlyTheirOwnEvents(t *testing.T) {
	e := newEnv(t)
	e.c.MustPost(`mutation { createInspector { id } }`, &struct{ CreateInspector struct{ ID string } }{})
	tokens := map[string]string{}
	for _, name := range []string{"a", "b"} {
		var su struct{ SignUp struct{ Token string } }
		e.c.MustPost(`mutation($n: String!) { signUp(name: $n) { token } }`, &su, client.Var("n", name))
		tokens[name] = su.SignUp.Token
		e.c.MustPost(`mutation { createEndpoint(input: {name: "x", mode: LOG}) { id } }`, &struct{ CreateEndpoint struct{ ID string } }{},
			client.AddHeader("Authorization", "Bearer "+su.SignUp.Token))
	}
	for name, tok := range tokens {
		var p struct {
			Events struct{ Nodes []struct{ Type, Data string } }
		}
		e.c.MustPost(`{ events(first: 25) { nodes { type data } } }`, &p, client.AddHeader("Authorization", "Bearer "+tok))
		var types []string
		for _, n := range p.Events.Nodes {
			types = append(types, n.Type)
		}
		// The token's first use is recorded (then at most once a minute).
		want := domain.TypeAccountCreated + "," + domain.TypeTokenIssued + "," + domain.TypeTokenUsed + "," + domain.TypeEndpointCreated
		if strings.Join(types, ",") != want {
			t.Errorf("account %s reads %v, want %s", name, types, want)
		}
	}
}

func TestRefusalCodes(t *testing.T) {
	e := newEnv(t)
	var su struct{ SignUp struct{ Token string } }
	e.c.MustPost(`mutation { signUp(name: "ada") { token } }`, &su)
	auth := client.AddHeader("Authorization", "Bearer "+su.SignUp.Token)
	tests := []struct {
		name  string
		query string
		opts  []client.Option
		want  string
	}{
		{"no token", `{ endpoints { id } }`, nil, "UNAUTHENTICATED"},
		{"bad token", `{ endpoints { id } }`, []client.Option{client.AddHeader("Authorization", "Bearer nope")}, "UNAUTHENTICATED"},
		{"bad target", `mutation { createEndpoint(input: {name: "a", mode: PROXY, target: "10.0.0.1:80"}) { id } }`, []client.Option{auth}, "INVALID_INPUT"},
		{"unknown endpoint", `mutation { updateEndpoint(id: "nosuchendpoint", input: {name: "b"}) { id } }`, []client.Option{auth}, "NOT_FOUND"},
		{"unknown delete", `mutation { deleteEndpoint(id: "nosuchendpoint") }`, []client.Option{auth}, "NOT_FOUND"},
		{"unknown retry", `mutation { retryDelivery(id: "nope") { id } }`, []client.Option{auth}, "NOT_FOUND"},
		{"retry without token", `mutation { retryDelivery(id: "nope") { id } }`, nil, "UNAUTHENTICATED"},
		{"empty name", `mutation { signUp(name: "  ") { token } }`, nil, "INVALID_INPUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.c.Post(tt.query, &struct{}{}, tt.opts...)
			if got := code(err); got != tt.want {
				t.Fatalf("code %q, want %q", got, tt.want)
			}
		})
	}
	err := e.c.Post(`mutation { createEndpoint(input: {name: "a", mode: PROXY, target: "10.0.0.1:80"}) { id } }`, &struct{}{}, auth)
	if err == nil || !strings.Contains(err.Error(), `"field":"target"`) {
		t.Fatalf("invalid target error does not name the field: %v", err)
	}
}

// TestSubscriptionsEndWithTheirSocket checks that a closed subscription
// leaves no goroutine behind.
func TestSubscriptionsEndWithTheirSocket(t *testing.T) {
	e := newEnv(t)
	var created struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &created)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	before := runtime.NumGoroutine()
	subs := make([]*websocket.Conn, 0, 10)
	for i := 0; i < 10; i++ {
		subs = append(subs, subscribeWS(t, srv.URL, nil, `subscription($a: ID!) { deliveries(address: $a) { id } }`, map[string]any{"a": created.CreateInspector.ID}))
	}
	for _, s := range subs {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if n := runtime.NumGoroutine(); n > before+2 {
			return fmt.Errorf("%d goroutines, %d before the subscriptions", n, before)
		}
		return nil
	})
}

// receive records a delivery as ingress would and waits for the views.
func (e *env) receive(t *testing.T, id, address string, kind domain.AddressKind, accountID string, complete bool) {
	t.Helper()
	ev := domain.DeliveryReceived{DeliveryID: id, Address: address, AddressKind: kind, AccountID: accountID,
		Method: "POST", Target: "/", Host: address + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
		Body: []byte("{}"), BodySize: 2, Complete: complete}
	data, err := domain.NewCodec().Encode(commands.NewEventID(), ev, time.Now(), domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.store.Append(context.Background(), domain.DeliveryStream(id), domain.NoStream(), data)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.views.WaitFor(context.Background(), res.Position); err != nil {
		t.Fatal(err)
	}
}

// TestRetryRefusals: each reason a retry is refused reaches the client as
// its own code, and the delivery's events stay its account's.
func TestRetryRefusals(t *testing.T) {
	e := newEnv(t)
	var in struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &in)
	tokens, accounts := map[string]string{}, map[string]string{}
	for _, name := range []string{"ada", "bob"} {
		var su struct {
			SignUp struct {
				Token   string
				Account struct{ ID string }
			}
		}
		e.c.MustPost(`mutation($n: String!) { signUp(name: $n) { token account { id } } }`, &su, client.Var("n", name))
		tokens[name] = su.SignUp.Token
		accounts[name] = su.SignUp.Account.ID
	}
	ada := client.AddHeader("Authorization", "Bearer "+tokens["ada"])
	adaID := accounts["ada"]
	var logEp, proxyEp struct{ CreateEndpoint struct{ ID string } }
	e.c.MustPost(`mutation { createEndpoint(input: {name: "log", mode: LOG}) { id } }`, &logEp, ada)
	e.c.MustPost(`mutation { createEndpoint(input: {name: "proxy", mode: PROXY, target: "127.0.0.1:9"}) { id } }`, &proxyEp, ada)
	e.receive(t, "d-inspector", in.CreateInspector.ID, domain.AddressInspector, "", true)
	e.receive(t, "d-log", logEp.CreateEndpoint.ID, domain.AddressEndpoint, adaID, true)
	e.receive(t, "d-proxy", proxyEp.CreateEndpoint.ID, domain.AddressEndpoint, adaID, true)
	e.receive(t, "d-partial", proxyEp.CreateEndpoint.ID, domain.AddressEndpoint, adaID, false)

	retry := func(id string, opts ...client.Option) string {
		return code(e.c.Post(`mutation($id: ID!) { retryDelivery(id: $id) { id } }`, &struct{}{},
			append(opts, client.Var("id", id))...))
	}
	for _, tt := range []struct{ delivery, want string }{
		{"d-inspector", "RETRY_NOT_PROXY"},
		{"d-log", "RETRY_NOT_PROXY"},
		{"d-proxy", "AGENT_NOT_CONNECTED"},
	} {
		if got := retry(tt.delivery, ada); got != tt.want {
			t.Errorf("retry %s: %q, want %q", tt.delivery, got, tt.want)
		}
	}
	if got := retry("d-log", client.AddHeader("Authorization", "Bearer "+tokens["bob"])); got != "NOT_FOUND" {
		t.Errorf("retry of another account's delivery: %q, want NOT_FOUND", got)
	}

	// With an agent attached, an incomplete payload is the remaining refusal.
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	agent := subscribeWS(t, srv.URL, map[string]any{"Authorization": "Bearer " + tokens["ada"]},
		`subscription($id: ID!) { forwardRequests(endpointId: $id) { attemptId } }`, map[string]any{"id": proxyEp.CreateEndpoint.ID})
	defer agent.Close()
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		var got struct{ Endpoint struct{ AgentConnected bool } }
		e.c.MustPost(`query($id: ID!) { endpoint(id: $id) { agentConnected } }`, &got, ada, client.Var("id", proxyEp.CreateEndpoint.ID))
		if !got.Endpoint.AgentConnected {
			return errors.New("the agent is not connected")
		}
		return nil
	})
	if got := retry("d-partial", ada); got != "PAYLOAD_INCOMPLETE" {
		t.Errorf("retry of an incomplete payload: %q, want PAYLOAD_INCOMPLETE", got)
	}

	// The delivery streams belong to ada alone; nobody reads the guest's.
	for name, want := range map[string]int{"ada": 3, "bob": 0} {
		var p struct {
			Events struct{ Nodes []struct{ Stream string } }
		}
		e.c.MustPost(`{ events(first: 100) { nodes { stream } } }`, &p, client.AddHeader("Authorization", "Bearer "+tokens[name]))
		n := 0
		for _, ev := range p.Events.Nodes {
			if strings.HasPrefix(ev.Stream, "delivery-") {
				if ev.Stream == domain.DeliveryStream("d-inspector") {
					t.Errorf("%s reads the guest's delivery", name)
				}
				n++
			}
		}
		if n != want {
			t.Errorf("%s reads %d delivery events, want %d", name, n, want)
		}
	}
}

// subscribeWS opens a graphql-transport-ws socket to the server at url,
// initialises it with payload, starts one subscription and keeps reading
// (answering pings) until the socket is closed.
func subscribeWS(t *testing.T, url string, payload map[string]any, query string, vars map[string]any) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	c, _, err := d.Dial("ws"+strings.TrimPrefix(url, "http")+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var ack struct{ Type string }
	if err := c.WriteJSON(map[string]any{"type": "connection_init", "payload": payload}); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadJSON(&ack); err != nil || ack.Type != "connection_ack" {
		t.Fatalf("connection_init: %v %+v", err, ack)
	}
	if err := c.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			var m struct{ Type string }
			if c.ReadJSON(&m) != nil {
				return
			}
			if m.Type == "ping" {
				_ = c.WriteJSON(map[string]string{"type": "pong"})
			}
		}
	}()
	return c
}

// TestAgentConnectedRecordsTheAgentsTarget: the agent's session event names
// the target the agent said it forwards to, or the Endpoint's when it named
// none or an invalid one.
func TestAgentConnectedRecordsTheAgentsTarget(t *testing.T) {
	e := newEnv(t)
	var su struct{ SignUp struct{ Token string } }
	e.c.MustPost(`mutation { signUp(name: "ada") { token } }`, &su)
	auth := "Bearer " + su.SignUp.Token
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	for _, tt := range []struct {
		name, sent, arg, want string
	}{
		{"named", "127.0.0.1:4000", "", "127.0.0.1:4000"},
		{"none", "", "", "127.0.0.1:9"},
		{"not local", "example.com:80", "", "127.0.0.1:9"},
		// One connection may serve several Endpoints, each with its own target.
		{"per subscription", "127.0.0.1:4000", "localhost:5000", "localhost:5000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ep struct{ CreateEndpoint struct{ ID string } }
			e.c.MustPost(`mutation { createEndpoint(input: {name: "`+tt.name+`", mode: PROXY, target: "127.0.0.1:9"}) { id } }`, &ep,
				client.AddHeader("Authorization", auth))
			payload := map[string]any{"Authorization": auth}
			if tt.sent != "" {
				payload["agentTarget"] = tt.sent
			}
			vars := map[string]any{"id": ep.CreateEndpoint.ID}
			if tt.arg != "" {
				vars["t"] = tt.arg
			}
			agent := subscribeWS(t, srv.URL, payload,
				`subscription($id: ID!, $t: String) { forwardRequests(endpointId: $id, target: $t) { attemptId } }`, vars)
			defer agent.Close()
			var got domain.AgentConnected
			testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
				recs, err := e.store.ReadStream(context.Background(), domain.AgentStream(ep.CreateEndpoint.ID), 0, 10)
				if errors.Is(err, domain.ErrStreamNotFound) {
					return errors.New("no agent stream yet")
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) == 0 {
					return errors.New("no agent.connected.v1 yet")
				}
				if err := json.Unmarshal(recs[0].Data, &got); err != nil {
					t.Fatal(err)
				}
				return nil
			})
			if got.Target != tt.want {
				t.Errorf("agent.connected.v1 target %q, want %q", got.Target, tt.want)
			}
		})
	}
}

// TestPagesAreClamped: a first larger than 100 reads a page of 100 and
// says that more follow, for the log and for a history alike.
func TestPagesAreClamped(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 101; i++ {
		var out struct{ CreateInspector struct{ ID string } }
		e.c.MustPost(`mutation { createInspector { id } }`, &out)
	}
	var p struct {
		Events struct {
			Nodes    []struct{ Position string }
			PageInfo struct{ HasNextPage bool }
		}
	}
	e.c.MustPost(`{ events(first: 1000) { nodes { position } pageInfo { hasNextPage } } }`, &p, client.AddHeader("Authorization", "Bearer "+adminToken))
	if len(p.Events.Nodes) != graph.MaxPageSize || !p.Events.PageInfo.HasNextPage {
		t.Errorf("events(first: 1000) = %d rows, hasNextPage %v; want %d and true", len(p.Events.Nodes), p.Events.PageInfo.HasNextPage, graph.MaxPageSize)
	}
}
