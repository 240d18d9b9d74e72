package harness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Subscription is one graphql-transport-ws subscription on its own socket.
type Subscription struct {
	conn *websocket.Conn
	next chan json.RawMessage
	errs chan error
}

// Subscribe opens a socket, authenticates with token (may be empty) and
// starts query; it returns once the server acknowledged the connection.
func (r *Relay) Subscribe(t testing.TB, token, query string, vars map[string]any) *Subscription {
	t.Helper()
	return r.SubscribeInit(t, token, nil, query, vars)
}

// SubscribeInit is Subscribe with more fields in the connection_init
// payload (relayPosition, agentTarget).
func (r *Relay) SubscribeInit(t testing.TB, token string, init map[string]any, query string, vars map[string]any) *Subscription {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 10 * time.Second}
	h := http.Header{"Host": {r.Domain() + ":" + strconv.Itoa(r.Port)}}
	conn, _, err := d.Dial("ws://127.0.0.1:"+strconv.Itoa(r.Port)+"/graphql", h)
	if err != nil {
		t.Fatalf("dial websocket: %v", err)
	}
	payload := map[string]any{}
	for k, v := range init {
		payload[k] = v
	}
	if token != "" {
		payload["Authorization"] = "Bearer " + token
	}
	must(t, conn.WriteJSON(map[string]any{"type": "connection_init", "payload": payload}))
	var ack struct{ Type string }
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	must(t, conn.ReadJSON(&ack))
	if ack.Type != "connection_ack" {
		t.Fatalf("expected connection_ack, got %q", ack.Type)
	}
	_ = conn.SetReadDeadline(time.Time{})
	must(t, conn.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}}))
	s := &Subscription{conn: conn, next: make(chan json.RawMessage, 1024), errs: make(chan error, 16)}
	go s.read()
	t.Cleanup(func() { conn.Close() })
	return s
}

func (s *Subscription) read() {
	defer close(s.next)
	for {
		var m struct {
			ID      string          `json:"id"`
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := s.conn.ReadJSON(&m); err != nil {
			return
		}
		switch m.Type {
		case "ping":
			_ = s.conn.WriteJSON(map[string]any{"type": "pong"})
		case "next":
			var p GQLResult
			if err := json.Unmarshal(m.Payload, &p); err == nil && len(p.Errors) > 0 {
				s.errs <- fmt.Errorf("subscription error: %+v", p.Errors)
				continue
			}
			s.next <- p.Data
		case "error":
			s.errs <- fmt.Errorf("subscription refused: %s", m.Payload)
		case "complete":
			return
		}
	}
}

// Next waits for the next payload's data.
func (s *Subscription) Next(t testing.TB, timeout time.Duration) json.RawMessage {
	t.Helper()
	select {
	case d, ok := <-s.next:
		if !ok {
			t.Fatalf("subscription closed")
		}
		return d
	case err := <-s.errs:
		t.Fatalf("%v", err)
	case <-time.After(timeout):
		t.Fatalf("no subscription message within %s", timeout)
	}
	return nil
}

// Err waits for a refusal of the subscription.
func (s *Subscription) Err(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-s.errs:
		return err
	case d, ok := <-s.next:
		if ok {
			t.Fatalf("expected a refusal, got data %s", d)
		}
		// The server completes right after the error; read() queued the
		// error before closing next, so it is waiting here.
		select {
		case err := <-s.errs:
			return err
		default:
			return fmt.Errorf("closed")
		}
	case <-time.After(timeout):
		t.Fatalf("no refusal within %s", timeout)
	}
	return nil
}

// Close ends the socket.
func (s *Subscription) Close() { s.conn.Close() }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TryNext waits up to timeout for a payload; ok is false when none came.
func (s *Subscription) TryNext(timeout time.Duration) (data json.RawMessage, ok bool) {
	select {
	case d, open := <-s.next:
		return d, open
	case <-time.After(timeout):
		return nil, false
	}
}
