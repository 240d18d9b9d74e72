package agentcli

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/relayhq/relay/internal/gqlws"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// recordingObserver keeps every event.
type recordingObserver struct {
	mu       sync.Mutex
	states   []StateEvent
	forwards chan ForwardEvent
}

func (o *recordingObserver) State(e StateEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.states = append(o.states, e)
}

func (o *recordingObserver) Forwarded(e ForwardEvent) { o.forwards <- e }

func (o *recordingObserver) stateList() []State {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []State
	for _, e := range o.states {
		out = append(out, e.State)
	}
	return out
}

// TestServeSeveralEndpointsOneSocket: Serve asks for each Endpoint, then
// subscribes for each on the same socket with its own target; a request of
// the second goes to the second target (with its path prefix); the
// Observer hears Connecting, Connected (both Endpoints), the forward, and
// Stopped after a normal close when ctx ends.
func TestServeSeveralEndpointsOneSocket(t *testing.T) {
	targetA, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {})
	targetB, localB := recordingServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(202) })
	srv := newWSServer(t)
	obs := &recordingObserver{forwards: make(chan ForwardEvent, 4)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Options{Server: srv.url, Token: "t", Observer: obs,
			Endpoints: []Route{{EndpointID: "ep-a", Target: targetA}, {EndpointID: "ep-b", Target: "http://" + targetB + "/pre"}}})
	}()

	p := srv.accept(t)
	if m := p.recv(false); m.Type != gqlws.ConnectionInit {
		t.Fatalf("first message %q", m.Type)
	}
	p.send(wsMessage{Type: gqlws.ConnectionAck})
	for i, id := range []string{"ep-a", "ep-b"} {
		q := p.recv(false)
		var req gqlRequest
		json.Unmarshal(q.Payload, &req)
		if q.ID != describeID(i) || req.Variables["e"] != id {
			t.Fatalf("message %d: %s %+v, want the endpoint query for %s", i, q.ID, req, id)
		}
		target := "127.0.0.1:1"
		answer, _ := json.Marshal(map[string]any{"data": map[string]any{"endpoint": map[string]any{
			"name": "name-" + id, "url": publicURL(id), "mode": "PROXY", "target": target, "agentCount": 0}}})
		p.send(wsMessage{ID: q.ID, Type: gqlws.Next, Payload: answer})
	}
	for i, want := range []struct{ id, target string }{{"ep-a", targetA}, {"ep-b", targetB}} {
		sub := p.recv(false)
		var req gqlRequest
		json.Unmarshal(sub.Payload, &req)
		if sub.ID != subscriptionID(i) || req.Variables["e"] != want.id || req.Variables["t"] != want.target {
			t.Fatalf("subscription %d: %s %+v, want %s with target %s", i, sub.ID, req.Variables, want.id, want.target)
		}
	}
	item, _ := json.Marshal(map[string]any{"data": map[string]any{"forwardRequests": forwardRequest{
		AttemptID: "att-1", DeliveryID: "del-1", Method: "POST", Path: "/x?y=1"}}})
	p.send(wsMessage{ID: subscriptionID(1), Type: gqlws.Next, Payload: item})
	if got := next(t, localB); got.requestURI != "/pre/x?y=1" {
		t.Errorf("second target got %q, want the prefix in front", got.requestURI)
	}
	complete := p.recv(false)
	p.send(wsMessage{ID: complete.ID, Type: gqlws.Next, Payload: json.RawMessage(`{"data":{"completeForward":true}}`)})
	select {
	case ev := <-obs.forwards:
		if ev.EndpointID != "ep-b" || ev.DeliveryID != "del-1" || ev.AttemptID != "att-1" || ev.Status != 202 || ev.Path != "/x?y=1" || ev.Error != "" || ev.ReportError != "" {
			t.Errorf("forward event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no forward event")
	}
	obs.mu.Lock()
	connected := obs.states[len(obs.states)-1]
	obs.mu.Unlock()
	if connected.State != Connected || len(connected.Endpoints) != 2 || connected.Endpoints[1].Name != "name-ep-b" ||
		connected.Endpoints[1].URL != publicURL("ep-b") || connected.Endpoints[1].Target != "http://"+targetB+"/pre" {
		t.Errorf("connected event %+v", connected)
	}

	cancel()
	// The agent closes the socket normally: the relay records the end at once.
	p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := p.conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			if ce.Code != websocket.CloseNormalClosure {
				t.Errorf("close code %d, want 1000", ce.Code)
			}
			break
		}
		if err != nil {
			t.Fatalf("read after cancel: %v, want a close frame", err)
		}
	}
	if err := <-done; err != nil {
		t.Errorf("Serve returned %v after cancel, want nil", err)
	}
	if got := obs.stateList(); len(got) != 3 || got[0] != Connecting || got[1] != Connected || got[2] != Stopped {
		t.Errorf("states %v, want connecting, connected, stopped", got)
	}
}

// TestServeRejectsBadOptions: Serve checks its options before dialling.
func TestServeRejectsBadOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{"no endpoint", Options{Server: "http://x", Token: "t"}, "no endpoint"},
		{"no token", Options{Server: "http://x", Endpoints: []Route{{EndpointID: "e"}}}, "no token"},
		{"remote target", Options{Server: "http://x", Token: "t", Endpoints: []Route{{EndpointID: "e", Target: "example.com:80"}}}, "must be 127.0.0.1"},
		{"twice", Options{Server: "http://x", Token: "t", Endpoints: []Route{{EndpointID: "e"}, {EndpointID: "e"}}}, "twice"},
	} {
		err := Serve(t.Context(), tt.o)
		var oe *OptionsError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Serve = %v, want an *OptionsError containing %q", tt.name, err, tt.want)
		}
	}
}
