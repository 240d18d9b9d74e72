package systemtest

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/agentwire"
	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/systemtest/harness"
)

// binaryAgent is a WebSocket that offered agentwire's subprotocol first.
type binaryAgent struct {
	t    *testing.T
	conn *websocket.Conn
}

// dialBinary opens a socket offering agentwire's subprotocol, and signs in
// with token unless it is "".
func dialBinary(t *testing.T, r *harness.Relay, token string) *binaryAgent {
	t.Helper()
	return dialBinaryAs(t, r, token, agentwire.Subprotocol)
}

// dialBinaryAs is dialBinary offering the binary subprotocol proto.
func dialBinaryAs(t *testing.T, r *harness.Relay, token, proto string) *binaryAgent {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{proto, gqlws.Subprotocol}, HandshakeTimeout: 10 * time.Second}
	conn, _, err := d.Dial("ws://127.0.0.1:"+strconv.Itoa(r.Port)+"/graphql", http.Header{"Host": {"localhost:" + strconv.Itoa(r.Port)}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	if conn.Subprotocol() != proto {
		t.Fatalf("agreed on %q, want %q", conn.Subprotocol(), proto)
	}
	a := &binaryAgent{t: t, conn: conn}
	if token != "" {
		a.json(map[string]any{"type": gqlws.ConnectionInit, "payload": map[string]any{"Authorization": "Bearer " + token}})
		if typ, data := a.read(); typ != websocket.TextMessage || !bytes.Contains(data, []byte(gqlws.ConnectionAck)) {
			t.Fatalf("after connection_init: %q, want connection_ack", data)
		}
	}
	return a
}

func (a *binaryAgent) json(v any) {
	a.t.Helper()
	if err := a.conn.WriteJSON(v); err != nil {
		a.t.Fatal(err)
	}
}

func (a *binaryAgent) binary(frame []byte) {
	a.t.Helper()
	if err := a.conn.WriteMessage(websocket.BinaryMessage, frame); err != nil {
		a.t.Fatal(err)
	}
}

// read returns the next message that is not a ping.
func (a *binaryAgent) read() (int, []byte) {
	a.t.Helper()
	for {
		_ = a.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		typ, data, err := a.conn.ReadMessage()
		if err != nil {
			a.t.Fatalf("read: %v", err)
		}
		if typ == websocket.TextMessage && bytes.Contains(data, []byte(`"type":"ping"`)) {
			continue
		}
		return typ, data
	}
}

// closedWith reads until the socket closes and returns its close code.
func (a *binaryAgent) closedWith() int {
	a.t.Helper()
	for {
		_ = a.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := a.conn.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			a.t.Fatalf("socket ended without a close frame: %v", err)
		}
	}
}

func (a *binaryAgent) done() agentwire.Done {
	a.t.Helper()
	typ, data := a.read()
	if typ != websocket.BinaryMessage {
		a.t.Fatalf("answer to a complete frame: %q, want a binary Done", data)
	}
	d, err := agentwire.DecodeDone(data)
	if err != nil {
		a.t.Fatal(err)
	}
	return d
}

// TestAgentBinaryDataPath: a socket that agrees on agentwire's
// subprotocol receives forward requests as binary frames, byte for byte,
// and answers them with binary frames; the relay passes the answer to the
// sender. Another account cannot complete the attempt, a report without a
// status or an error is refused, and frames sent out of turn or malformed
// close the socket with the protocol's codes. The relay answers a report
// it takes with a Done frame on relay-agent.v2 and v1, and with nothing on
// relay-agent.v3: there the next frame after it is the refusal of the same
// report sent again.
func TestAgentBinaryDataPath(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	a := signUpTenant(t, r, "a")
	b := signUpTenant(t, r, "b")
	for _, proto := range agentwire.Subprotocols {
		t.Run(proto, func(t *testing.T) {
			ep := createEndpointFor(t, r, a.Token, map[string]any{"name": "binary " + proto, "mode": "PROXY", "target": "127.0.0.1:9"})
			agent := dialBinaryAs(t, r, a.Token, proto)
			agent.json(map[string]any{"id": "forward-0", "type": gqlws.Subscribe,
				"payload": map[string]any{"query": forwardRequestsSubscription, "variables": map[string]any{"e": ep.ID}}})
			waitAgent(t, r, a.Token, ep.ID, true)
			completeBinary(t, r, ep, agent, dialBinaryAs(t, r, b.Token, proto), proto)
		})
	}
	for _, tt := range []struct {
		name  string
		token string
		frame []byte
		code  int
	}{
		{"before connection_init", "", agentwire.AppendComplete(nil, agentwire.Complete{AttemptID: "x", Status: 200}), gqlws.CloseUnauthorized},
		{"malformed", a.Token, []byte{agentwire.KindComplete, 0xff}, gqlws.CloseBadRequest},
		{"a forward frame from the client", a.Token, agentwire.AppendForward(nil, agentwire.Forward{AttemptID: "x"}), gqlws.CloseBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := dialBinary(t, r, tt.token)
			s.binary(tt.frame)
			if code := s.closedWith(); code != tt.code {
				t.Errorf("closed with %d, want %d", code, tt.code)
			}
		})
	}
}

// completeBinary sends a delivery to ep, takes its forward on agent's
// socket and answers it: first from other (another account's socket),
// then without a status, then properly, then again.
func completeBinary(t *testing.T, r *harness.Relay, ep endpointInfo, agent, other *binaryAgent, proto string) {
	t.Helper()
	body := []byte{'{', 0, 0xff, '}'}
	answered := make(chan harness.Response, 1)
	go func() {
		resp, err := r.TrySendRaw(harness.RawRequest{Method: "POST", Target: "/hook?q=%zz", Host: r.AddressHost(ep.ID), Body: body,
			Headers: [][2]string{{"X-Sig", "v1=\xfe"}}})
		if err != nil {
			resp = harness.Response{Status: -1, Body: []byte(err.Error())}
		}
		answered <- resp
	}()
	typ, data := agent.read()
	if typ != websocket.BinaryMessage {
		t.Fatalf("forward request as %q, want a binary frame", data)
	}
	f, err := agentwire.DecodeForward(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Operation != "forward-0" || f.Method != "POST" || f.Target != "/hook?q=%zz" || !bytes.Equal(f.Body, body) || f.AttemptID == "" {
		t.Fatalf("forward frame %+v, want operation forward-0, POST /hook?q=%%zz and the body as sent", f)
	}
	if !hasHeader(f.Headers, "X-Sig", "v1=\xfe") {
		t.Errorf("forward headers %q lack X-Sig exactly as sent", f.Headers)
	}

	other.binary(agentwire.AppendComplete(nil, agentwire.Complete{AttemptID: f.AttemptID, Status: 200}))
	if d := other.done(); d.Code != "NOT_FOUND" || d.AttemptID != f.AttemptID {
		t.Errorf("another account's complete: %+v, want NOT_FOUND for %s", d, f.AttemptID)
	}
	agent.binary(agentwire.AppendComplete(nil, agentwire.Complete{AttemptID: f.AttemptID}))
	if d := agent.done(); d.Code != "INVALID_INPUT" {
		t.Errorf("complete with neither status nor error: %+v, want INVALID_INPUT", d)
	}
	taken := agentwire.AppendComplete(nil, agentwire.Complete{AttemptID: f.AttemptID, Status: 201,
		Headers: []domain.Header{{Name: "X-From", Value: "agent"}}, Body: []byte{0, 1, 0xff}, DurationMs: 3})
	agent.binary(taken)
	if agentwire.Acknowledges(proto) {
		if d := agent.done(); d.Code != "" {
			t.Errorf("complete: %+v, want taken", d)
		}
	}
	select {
	case resp := <-answered:
		if resp.Status != 201 || !bytes.Equal(resp.Body, []byte{0, 1, 0xff}) || resp.Header.Get("X-From") != "agent" {
			t.Fatalf("sender got %d %q %v, want the agent's 201", resp.Status, resp.Body, resp.Header)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the sender got no answer")
	}
	// The same report again is refused; on v3 that refusal is the first
	// frame after the report taken, which therefore got none.
	agent.binary(taken)
	if d := agent.done(); d.Code != "NOT_FOUND" || d.AttemptID != f.AttemptID {
		t.Errorf("the report sent again: %+v, want NOT_FOUND for %s", d, f.AttemptID)
	}
}

func hasHeader(hs []domain.Header, name, value string) bool {
	for _, h := range hs {
		if h.Name == name && h.Value == value {
			return true
		}
	}
	return false
}
