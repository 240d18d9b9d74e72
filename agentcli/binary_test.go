package agentcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/agentwire"
	"github.com/relayhq/relay/internal/gqlws"
)

// TestAgentBinaryDataPath: against a relay that offers agentwire's
// subprotocol the agent agrees on it, runs a binary forward frame against
// its target byte for byte, reports the answer in a binary complete frame,
// and tells the observer what the relay's Done said: on the subprotocols
// that acknowledge every answer it tells of the forward once the Done
// comes; on the newest at once, and of a refusal after, in an event of its
// own naming the same request. With PlainGraphQL it offers
// graphql-transport-ws only (TestAgentProtocol covers that path). Its
// answer carries a fidelity receipt of what it handed the target only when
// the relay agreed on a subprotocol with receipts: a relay that speaks only
// relay-agent.v1 would refuse the longer frame.
func TestAgentBinaryDataPath(t *testing.T) {
	reqBody := []byte{0, 1, 0xff}
	target, local := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Reply", "yes")
		w.WriteHeader(202)
		fmt.Fprint(w, "taken")
	})
	for _, tt := range []struct {
		name       string
		offer      string // the relay's binary subprotocol
		plain      bool
		wantBinary bool
	}{{"binary", agentwire.Subprotocol, false, true}, {"relay of v2", agentwire.SubprotocolV2, false, true},
		{"relay of v1", agentwire.SubprotocolV1, false, true}, {"plain GraphQL", agentwire.Subprotocol, true, false}} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newWSServerOf(t, tt.offer, gqlws.Subprotocol)
			obs := &recordingObserver{forwards: make(chan ForwardEvent, 4)}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go func() {
				_ = Serve(ctx, Options{Server: srv.url, Token: "t", Observer: obs, PlainGraphQL: tt.plain,
					Endpoints: []Route{{EndpointID: "ep-1", Target: target}}})
			}()
			p := srv.accept(t)
			if got := p.conn.Subprotocol() == tt.offer; got != tt.wantBinary {
				t.Fatalf("agreed on %q", p.conn.Subprotocol())
			}
			p.handshake("t", "ep-1")
			if !tt.wantBinary {
				return
			}
			frame := agentwire.AppendForward(nil, agentwire.Forward{Operation: subscriptionID(0), AttemptID: "att-1", DeliveryID: "del-1",
				Method: "PUT", Target: "/a//b?c=%zz", Headers: []domain.Header{{Name: "X-Sig", Value: "s"}}, Body: reqBody,
				Host: "ep-1.relay.test", Scheme: "https", RemoteAddr: "192.0.2.7:4000"})
			if err := p.conn.WriteMessage(websocket.BinaryMessage, frame); err != nil {
				t.Fatal(err)
			}
			got := next(t, local)
			if got.method != "PUT" || got.requestURI != "/a//b?c=%zz" || !bytes.Equal(got.body, reqBody) {
				t.Errorf("local server got %s %q body %v", got.method, got.requestURI, got.body)
			}
			_ = p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			var c agentwire.Complete
			for {
				typ, data, err := p.conn.ReadMessage()
				if err != nil {
					t.Fatal(err)
				}
				if typ == websocket.TextMessage { // the agent's pings
					continue
				}
				if c, err = agentwire.DecodeComplete(data); err != nil {
					t.Fatal(err)
				}
				break
			}
			if c.AttemptID != "att-1" || c.Status != 202 || string(c.Body) != "taken" || c.Error != "" || !hasReply(c.Headers) {
				t.Errorf("complete frame %+v, want att-1 202 taken with X-Reply", c)
			}
			receipt := domain.DigestRequest("PUT", "/a//b?c=%zz", []domain.Header{{Name: "X-Sig", Value: "s"}}, reqBody)
			switch {
			case !agentwire.CarriesReceipts(tt.offer) && c.Receipt != nil:
				t.Errorf("a receipt %+v sent on %s", *c.Receipt, tt.offer)
			case agentwire.CarriesReceipts(tt.offer) && (c.Receipt == nil || *c.Receipt != receipt):
				t.Errorf("receipt %v, want %+v", c.Receipt, receipt)
			}
			heard := func() ForwardEvent {
				t.Helper()
				select {
				case ev := <-obs.forwards:
					return ev
				case <-time.After(10 * time.Second):
					t.Fatal("the observer heard no forward")
					return ForwardEvent{}
				}
			}
			if !agentwire.Acknowledges(tt.offer) {
				// Told at once: no Done comes for an answer taken.
				if ev := heard(); ev.AttemptID != "att-1" || ev.Status != 202 || ev.ReportError != "" || ev.ReportOnly || !bytes.Equal(ev.RequestBody, reqBody) {
					t.Errorf("observer heard %+v, want att-1 202 told before any Done", ev)
				}
			}
			if err := p.conn.WriteMessage(websocket.BinaryMessage, agentwire.AppendDone(nil, agentwire.Done{AttemptID: "att-1", Code: "NOT_FOUND", Message: "gone"})); err != nil {
				t.Fatal(err)
			}
			ev := heard()
			if ev.AttemptID != "att-1" || ev.Status != 202 || ev.Method != "PUT" || ev.Path != "/a//b?c=%zz" || ev.ReportError != errAttemptGone.Error() {
				t.Errorf("observer heard %+v, want att-1 202 reported as gone", ev)
			}
			if want := !agentwire.Acknowledges(tt.offer); ev.ReportOnly != want || (want && ev.RequestBody != nil) {
				t.Errorf("observer heard ReportOnly %v with %d body bytes, want ReportOnly %v (and no body with it)", ev.ReportOnly, len(ev.RequestBody), want)
			}
		})
	}
}

func hasReply(hs []domain.Header) bool {
	for _, h := range hs {
		if h.Name == "X-Reply" && h.Value == "yes" {
			return true
		}
	}
	return false
}

// TestAgentBinaryBodiesOutliveTheReadBuffer: the agent reads every frame
// into one buffer it reuses, so a forward still in flight when the next
// frames arrive must have its own copy of its body; the observer is handed
// it once the relay has answered the report. Forwards of small and large
// bodies (past the buffer the agent keeps) each reach the local handler
// and the observer byte for byte, though later frames were read while
// their reports waited.
func TestAgentBinaryBodiesOutliveTheReadBuffer(t *testing.T) {
	target, local := recordingServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	// The relay of v2 acknowledges every report, so each forward's body
	// stays in the agent until the Done comes.
	srv := newWSServerOf(t, agentwire.SubprotocolV2)
	obs := &recordingObserver{forwards: make(chan ForwardEvent, 4)}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_ = Serve(ctx, Options{Server: srv.url, Token: "t", Observer: obs, Endpoints: []Route{{EndpointID: "ep-1", Target: target}}})
	}()
	p := srv.accept(t)
	p.handshake("t", "ep-1")
	paths := []string{"/first", "/large", "/second", "/third"}
	bodies := map[string][]byte{
		"/first":  bytes.Repeat([]byte{'a'}, 100),
		"/large":  bytes.Repeat([]byte{'b', 0, 0xff}, maxReadBuffer),
		"/second": bytes.Repeat([]byte{'c'}, 100),
		"/third":  bytes.Repeat([]byte{'d'}, 3000),
	}
	for _, path := range paths {
		frame := agentwire.AppendForward(nil, agentwire.Forward{Operation: subscriptionID(0), AttemptID: path, Method: "POST",
			Target: path, Body: bodies[path]})
		if err := p.conn.WriteMessage(websocket.BinaryMessage, frame); err != nil {
			t.Fatal(err)
		}
		if got := next(t, local); !bytes.Equal(got.body, bodies[path]) {
			t.Errorf("%s: the local handler got %d bytes, not the %d sent", path, len(got.body), len(bodies[path]))
		}
		if c := readComplete(t, p); c.AttemptID != path || c.Status != 204 {
			t.Fatalf("complete frame %+v, want %s 204", c, path)
		}
	}
	// Every report is answered only now: each forward's body has stayed
	// in the agent while the frames after it were read.
	for _, path := range paths {
		if err := p.conn.WriteMessage(websocket.BinaryMessage, agentwire.AppendDone(nil, agentwire.Done{AttemptID: path})); err != nil {
			t.Fatal(err)
		}
	}
	for range paths {
		select {
		case ev := <-obs.forwards:
			if !bytes.Equal(ev.RequestBody, bodies[ev.AttemptID]) {
				t.Errorf("%s: the observer got a body of %d bytes starting %q, not the one sent", ev.AttemptID, len(ev.RequestBody), ev.RequestBody[:min(8, len(ev.RequestBody))])
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the observer heard no forward")
		}
	}
}

// readComplete reads the agent's next complete frame, answering its pings.
func readComplete(t testing.TB, p *wsPeer) agentwire.Complete {
	t.Helper()
	for {
		_ = p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		typ, data, err := p.conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if typ == websocket.TextMessage { // the agent's pings
			p.send(wsMessage{Type: gqlws.Pong})
			continue
		}
		c, err := agentwire.DecodeComplete(data)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// TestAgentBoundsWhatItReads: a message from the relay larger than
// MaxRelayMessage closes the socket (1009, message too big) instead of
// being read whole, and the agent dials again.
func TestAgentBoundsWhatItReads(t *testing.T) {
	srv := newWSServerOf(t, agentwire.Subprotocol)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_ = Serve(ctx, Options{Server: srv.url, Token: "t", Observer: &recordingObserver{forwards: make(chan ForwardEvent, 4)},
			Endpoints: []Route{{EndpointID: "ep-1", Target: "127.0.0.1:1"}}})
	}()
	p := srv.accept(t)
	p.handshake("t", "ep-1")
	// A Done frame whose message alone is past the bound. The agent may
	// close the socket before the write ends (a reset, here).
	huge := agentwire.AppendDone(nil, agentwire.Done{AttemptID: "att-1", Code: "NOT_FOUND", Message: strings.Repeat("x", MaxRelayMessage)})
	_ = p.conn.WriteMessage(websocket.BinaryMessage, huge)
	_ = p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := p.conn.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the agent's socket ended with %v, want close 1009 (message too big) or a reset", err)
			}
			break
		}
	}
	// Had it read the frame whole, it would have kept the socket.
	srv.accept(t) // dialled again
}
