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
	"github.com/relayhq/relay/internal/testwait"
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
	e := newEnv(t)
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
