package graph_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/ratelimit"
)

// TestOneClientHoldsPartOfTheReaders: one anonymous client keeps the views
// busy, 24 HTTP requests of an inspector's history at once and 8 sockets
// subscribing to its deliveries with since and completing, again and
// again, each replaying the inspector's rows; meanwhile an account reads
// its Endpoints. The client's reads hold at most all but one of the
// views' readers, so no read (the account's, or the client's own) ever
// queues for a connection in the pool: ReaderStats().WaitCount stays 0.
// Without the share the client alone filled the pool and its reads and
// the account's queued there together.
func TestOneClientHoldsPartOfTheReaders(t *testing.T) {
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		// Not the replay rate under test here: the sockets replay freely.
		r.ReplayRate = ratelimit.Rate{N: 1 << 20, Per: time.Second, Burst: 1 << 20}
	})
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	var in struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &in)
	inspector := in.CreateInspector.ID
	const rows = 20
	for i := range rows {
		e.receive(t, fmt.Sprintf("d-%d", i), inspector, domain.AddressInspector, "", true)
	}
	var su struct{ SignUp struct{ Token string } }
	e.c.MustPost(`mutation { signUp(name: "bea") { token } }`, &su)

	done := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(done); wg.Wait() }()
	var reads atomic.Int64 // the client's answered reads
	page := `{"query":"query($id: ID!){ inspector(id: $id){ deliveries(first: 50){ nodes{ id } } } }","variables":{"id":"` + inspector + `"}}`
	for range 24 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := postGraphQL(srv.URL, "", page, nil); err != nil {
					t.Errorf("the client's page: %v", err)
					return
				}
				reads.Add(1)
			}
		})
	}
	for range 8 {
		ws := dialWS(t, srv.URL, map[string]any{})
		wg.Go(func() {
			defer ws.Close()
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				id := strconv.Itoa(n)
				err := ws.WriteJSON(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{
					"query":     `subscription($a: ID!, $s: String){ deliveries(address: $a, since: $s){ id } }`,
					"variables": map[string]any{"a": inspector, "s": ""}}})
				for got := 0; err == nil && got < rows; {
					var m struct{ Type, ID string }
					switch err = ws.ReadJSON(&m); {
					case err != nil:
					case m.Type == "ping":
						err = ws.WriteJSON(map[string]string{"type": "pong"})
					case m.ID == id && m.Type == "next":
						got++
					case m.ID == id:
						err = fmt.Errorf("subscription ended with %q", m.Type)
					}
				}
				if err == nil {
					err = ws.WriteJSON(map[string]any{"id": id, "type": "complete"})
				}
				if err != nil {
					select {
					case <-done:
					default:
						t.Errorf("the client's replay: %v", err)
					}
					return
				}
				reads.Add(1)
			}
		})
	}
	// The client's load runs for a few hundred reads, then the account
	// reads while it goes on.
	testwait.CheckFor(t, time.Minute, time.Millisecond, func() error {
		if n := reads.Load(); n < 300 {
			return fmt.Errorf("the client made %d reads", n)
		}
		return nil
	})
	for range 20 {
		var out struct {
			Data struct{ Endpoints []struct{ ID string } }
		}
		if err := postGraphQL(srv.URL, su.SignUp.Token, `{"query":"{ endpoints { id } }"}`, &out); err != nil {
			t.Fatalf("the account's read: %v", err)
		}
	}
	st := e.views.ReaderStats()
	t.Logf("%d reads of the client; readers: %d open, %d queued for a connection (%s)", reads.Load(), st.OpenConnections, st.WaitCount, st.WaitDuration)
	if st.WaitCount != 0 {
		t.Errorf("%d reads queued for one of the views' %d readers while one client read: its reads held them all", st.WaitCount, st.MaxOpenConnections)
	}
}

// postGraphQL posts a GraphQL request body to the server at url, with a
// bearer token unless it is "", and decodes the answer into out (nil:
// dropped); an answer with errors is an error.
func postGraphQL(url, token, body string, out any) error {
	req, err := http.NewRequest(http.MethodPost, url+"/", bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var raw struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return fmt.Errorf("%s: %w", resp.Status, err)
	}
	if len(raw.Errors) > 0 {
		return fmt.Errorf("%s: %s", resp.Status, raw.Errors[0].Message)
	}
	if out != nil {
		return json.Unmarshal([]byte(`{"data":`+string(raw.Data)+`}`), out)
	}
	return nil
}

// dialWS opens a graphql-transport-ws socket to the server at url and
// initialises it with payload.
func dialWS(t *testing.T, url string, payload map[string]any) *websocket.Conn {
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
	return c
}

// TestDeliveriesReplaysAreAdmittedPerClient: a client that subscribes to
// an address's deliveries with since again and again is replayed its rows
// only as often as the replay rate admits (here a burst of 4 that does not
// refill within the test); past it each subscription is refused
// RATE_LIMITED with a retryAfterSeconds, without replaying a row. A
// subscription without since replays nothing and is not counted, and
// another account's replay is admitted. Before, each of the 10 replayed.
func TestDeliveriesReplaysAreAdmittedPerClient(t *testing.T) {
	const burst, tries = 4, 10
	e := newEnvWith(t, nil, func(r *graph.Resolver) { r.ReplayRate = ratelimit.Rate{N: 1, Per: time.Hour, Burst: burst} })
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	var in struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &in)
	inspector := in.CreateInspector.ID
	const rows = 3
	for i := range rows {
		e.receive(t, fmt.Sprintf("d-%d", i), inspector, domain.AddressInspector, "", true)
	}
	var su struct{ SignUp struct{ Token string } }
	e.c.MustPost(`mutation { signUp(name: "bea") { token } }`, &su)

	// subscribe starts a subscription on ws and reads until it replayed
	// its rows (nil) or was refused (the refusal's code and retry).
	subscribe := func(ws *websocket.Conn, id string, since any) (code string, retry float64) {
		t.Helper()
		if err := ws.WriteJSON(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{
			"query":     `subscription($a: ID!, $s: String){ deliveries(address: $a, since: $s){ id } }`,
			"variables": map[string]any{"a": inspector, "s": since}}}); err != nil {
			t.Fatal(err)
		}
		if since == nil {
			return "", 0 // nothing to replay: the subscription waits for live rows
		}
		for got := 0; got < rows; {
			var m struct {
				Type, ID string
				Payload  json.RawMessage
			}
			if err := ws.ReadJSON(&m); err != nil {
				t.Fatal(err)
			}
			var answer struct {
				Errors []struct {
					Extensions struct {
						Code              string
						RetryAfterSeconds float64
					}
				}
			}
			switch {
			case m.ID != id:
			case m.Type == "next" && json.Unmarshal(m.Payload, &answer) == nil && len(answer.Errors) > 0:
				// A refused subscription answers its error, then completes.
				return answer.Errors[0].Extensions.Code, answer.Errors[0].Extensions.RetryAfterSeconds
			case m.Type == "next":
				got++
			default:
				t.Fatalf("subscription %s: %s %s", id, m.Type, m.Payload)
			}
		}
		if err := ws.WriteJSON(map[string]any{"id": id, "type": "complete"}); err != nil {
			t.Fatal(err)
		}
		return "", 0
	}

	ws := dialWS(t, srv.URL, map[string]any{})
	replayed, refused := 0, 0
	for i := range tries {
		switch code, retry := subscribe(ws, strconv.Itoa(i), ""); {
		case code == "":
			replayed++
		case code == "RATE_LIMITED" && retry > 0:
			refused++
		default:
			t.Fatalf("subscription %d refused %s, retryAfterSeconds %v", i, code, retry)
		}
	}
	t.Logf("%d subscriptions with since from one client: %d replayed, %d refused", tries, replayed, refused)
	if replayed != burst || refused != tries-burst {
		t.Errorf("%d of %d subscriptions with since replayed, %d refused; want %d replayed", replayed, tries, refused, burst)
	}
	subscribe(ws, "live", nil)
	other := dialWS(t, srv.URL, map[string]any{"Authorization": "Bearer " + su.SignUp.Token})
	if code, _ := subscribe(other, "1", ""); code != "" {
		t.Errorf("another account's replay refused %s", code)
	}
}
