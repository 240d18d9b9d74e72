package agentcli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/relayhq/relay/internal/gqlws"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/testwait"
)

// wsServer is a minimal graphql-transport-ws server: each accepted
// connection is handed to the test, in order.
type wsServer struct {
	url   string
	conns chan *wsPeer
}

// wsPeer is the server's side of one agent connection.
type wsPeer struct {
	t    testing.TB
	conn *websocket.Conn
	done chan struct{}     // closed to end the server handler
	init map[string]string // the connection_init payload, once handshaken
	// asksRoles: the test reads the agent's role queries itself; else
	// recv answers each as a relay that lists the agent as primary.
	asksRoles bool
}

func newWSServer(t *testing.T) *wsServer {
	t.Helper()
	return newWSServerOf(t, gqlws.Subprotocol)
}

// newWSServerOf is newWSServer offering the given subprotocols, in order.
func newWSServerOf(t testing.TB, protocols ...string) *wsServer {
	t.Helper()
	s := &wsServer{conns: make(chan *wsPeer, 8)}
	up := websocket.Upgrader{Subprotocols: protocols}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/graphql" {
			http.NotFound(w, r)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		p := &wsPeer{t: t, conn: c, done: make(chan struct{})}
		s.conns <- p
		<-p.done
		c.Close()
	}))
	t.Cleanup(func() {
		// Release handlers the test did not finish with.
		for {
			select {
			case p := <-s.conns:
				p.close()
			default:
				srv.Close()
				return
			}
		}
	})
	s.url = srv.URL
	return s
}

func (s *wsServer) accept(t testing.TB) *wsPeer {
	t.Helper()
	select {
	case p := <-s.conns:
		t.Cleanup(p.close)
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not connect")
		return nil
	}
}

func (p *wsPeer) close() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
}

func (p *wsPeer) send(m wsMessage) {
	p.t.Helper()
	if err := p.conn.WriteJSON(m); err != nil {
		p.t.Fatalf("server write %s: %v", m.Type, err)
	}
}

// recv returns the next message from the agent, skipping (and answering)
// the agent's own pings unless wantPing is set, and its role queries
// unless asksRoles is.
func (p *wsPeer) recv(wantPing bool) wsMessage {
	p.t.Helper()
	for {
		p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var m wsMessage
		if err := p.conn.ReadJSON(&m); err != nil {
			p.t.Fatalf("server read: %v", err)
		}
		if m.Type == gqlws.Ping && !wantPing {
			p.send(wsMessage{Type: gqlws.Pong})
			continue
		}
		if m.Type == gqlws.Subscribe && strings.HasPrefix(m.ID, roleOpPrefix) && !p.asksRoles {
			p.answerRole(m.ID, []map[string]any{{"primary": true, "mine": true}})
			continue
		}
		return m
	}
}

// answerRole answers the role query id with the Endpoint's listeners.
func (p *wsPeer) answerRole(id string, listeners []map[string]any) {
	p.t.Helper()
	data, err := json.Marshal(map[string]any{"data": map[string]any{"endpoint": map[string]any{"listeners": listeners}}})
	if err != nil {
		p.t.Fatal(err)
	}
	p.send(wsMessage{ID: id, Type: gqlws.Next, Payload: data})
	p.send(wsMessage{ID: id, Type: gqlws.Complete})
}

// handshake expects connection_init with the token, the subscription and
// the question about the Endpoint, which it answers as a PROXY Endpoint.
func (p *wsPeer) handshake(token, endpoint string) {
	p.t.Helper()
	p.handshakeAs(token, endpoint, "PROXY")
}

// handshakeAs is handshake with the Endpoint in the given mode.
func (p *wsPeer) handshakeAs(token, endpoint, mode string) {
	p.t.Helper()
	init := p.recv(false)
	if init.Type != gqlws.ConnectionInit {
		p.t.Fatalf("first message %q, want connection_init", init.Type)
	}
	var payload map[string]string
	if err := json.Unmarshal(init.Payload, &payload); err != nil || payload["Authorization"] != "Bearer "+token {
		p.t.Fatalf("init payload %s, want Authorization: Bearer %s", init.Payload, token)
	}
	p.init = payload
	p.send(wsMessage{Type: gqlws.ConnectionAck})
	p.describe(endpoint, endpointInfo{URL: publicURL(endpoint), Mode: mode})
	sub := p.recv(false)
	var req gqlRequest
	if err := json.Unmarshal(sub.Payload, &req); err != nil {
		p.t.Fatalf("subscribe payload: %v", err)
	}
	if sub.Type != gqlws.Subscribe || sub.ID != subscriptionID(0) || !strings.Contains(req.Query, "forwardRequests(endpointId: $e, target: $t, primary: $p, filters: $f)") || req.Variables["e"] != endpoint {
		p.t.Fatalf("got %s %s %+v, want the forwardRequests subscription for %s", sub.Type, sub.ID, req, endpoint)
	}
}

// describe expects the question about the Endpoint and answers it with ep.
func (p *wsPeer) describe(endpoint string, ep endpointInfo) {
	p.t.Helper()
	q := p.recv(false)
	var req gqlRequest
	if err := json.Unmarshal(q.Payload, &req); err != nil {
		p.t.Fatalf("endpoint query payload: %v", err)
	}
	if q.Type != gqlws.Subscribe || q.ID != describeID(0) || !strings.Contains(req.Query, "endpoint(id: $e){ name url mode target agentCount }") || req.Variables["e"] != endpoint {
		p.t.Fatalf("got %s %s %+v, want the endpoint query for %s", q.Type, q.ID, req, endpoint)
	}
	answer, _ := json.Marshal(map[string]any{"data": map[string]any{"endpoint": ep}})
	p.send(wsMessage{ID: q.ID, Type: gqlws.Next, Payload: answer})
	p.send(wsMessage{ID: q.ID, Type: gqlws.Complete})
}

// testAgent is an agent serving Endpoint "ep" at 127.0.0.1:1 with a
// text observer writing its state to stderr.
func testAgent(t *testing.T, server string, stderr io.Writer) *agent {
	t.Helper()
	a, err := newAgent(Options{Server: server, Token: "t", Endpoints: []Route{{EndpointID: "ep", Target: "127.0.0.1:1"}},
		Timeout: time.Second, Observer: &TextObserver{Out: io.Discard, Status: stderr}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func publicURL(endpoint string) string { return "http://" + endpoint + ".relay.test/" }

// safeBuffer is a bytes.Buffer for concurrent writers.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startAgent(t *testing.T, run func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent returned %v, want nil after cancel", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("agent did not stop after cancel")
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestAgentProtocol(t *testing.T) {
	reqBody := []byte{0, 1, 2, 0xff, 'h', 'i'}
	target, local := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("X-Reply", "1")
		w.Header().Add("X-Reply", "2")
		w.WriteHeader(201)
		fmt.Fprint(w, "accepted")
	})
	srv := newWSServer(t)
	before := runtime.NumGoroutine() // the servers are up; the agent is not
	var stdout, stderr safeBuffer
	stop := startAgent(t, func(ctx context.Context) error {
		return Run(ctx, []string{"--server", srv.url, "--token", "tok-1", "--endpoint", "ep-1", "--target", target}, &stdout, &stderr)
	})

	p := srv.accept(t)
	p.handshake("tok-1", "ep-1")
	if p.init["agentTarget"] != target {
		t.Errorf("connection_init names target %q, want the agent's %q", p.init["agentTarget"], target)
	}
	item, _ := json.Marshal(map[string]any{"data": map[string]any{"forwardRequests": forwardRequest{
		AttemptID: "att-1", DeliveryID: "del-1", Method: "POST", Path: "/hook//x?y=%2F",
		Headers:    nil,
		BodyBase64: base64.StdEncoding.EncodeToString(reqBody),
	}}})
	p.send(wsMessage{ID: subscriptionID(0), Type: gqlws.Next, Payload: item})

	got := next(t, local)
	if got.requestURI != "/hook//x?y=%2F" || !bytes.Equal(got.body, reqBody) {
		t.Errorf("local server got %s %q body %v", got.method, got.requestURI, got.body)
	}

	m := p.recv(false)
	var req struct {
		Query     string                   `json:"query"`
		Variables map[string]completeInput `json:"variables"`
	}
	if err := json.Unmarshal(m.Payload, &req); err != nil {
		t.Fatalf("decode completeForward: %v", err)
	}
	in := req.Variables["input"]
	if m.Type != gqlws.Subscribe || m.ID == subscriptionID(0) || !strings.Contains(req.Query, "completeForward(input: $input)") {
		t.Fatalf("got %s id %q query %q, want a completeForward subscribe with a fresh id", m.Type, m.ID, req.Query)
	}
	body, _ := base64.StdEncoding.DecodeString(in.BodyBase64)
	if in.AttemptID != "att-1" || in.Status == nil || *in.Status != 201 || string(body) != "accepted" || in.Error != "" {
		t.Errorf("completeForward input %+v (body %q), want att-1 201 'accepted'", in, body)
	}
	var replies []string
	for _, h := range in.Headers {
		if h.Name == "X-Reply" {
			replies = append(replies, h.Value)
		}
	}
	if strings.Join(replies, ",") != "1,2" {
		t.Errorf("X-Reply headers %q, want 1,2", replies)
	}
	p.send(wsMessage{ID: m.ID, Type: gqlws.Next, Payload: json.RawMessage(`{"data":{"completeForward":true}}`)})
	p.send(wsMessage{ID: m.ID, Type: gqlws.Complete})

	p.send(wsMessage{Type: gqlws.Ping})
	if pong := p.recv(false); pong.Type != gqlws.Pong {
		t.Errorf("answer to ping: %q, want pong", pong.Type)
	}
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(stdout.String(), "POST /hook//x?y=%2F → 201 (") {
			return errors.New("still waiting for the request line on stdout")
		}
		return nil
	})
	if !strings.Contains(stderr.String(), "connected to ws://") || !strings.Contains(stderr.String(), "forwarding to http://"+target) {
		t.Errorf("stderr %q lacks the connection line", stderr.String())
	}
	if want := "(ep-1): public URL " + publicURL("ep-1") + " → http://" + target + "\n"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
	if strings.Contains(stderr.String(), "mode") {
		t.Errorf("stderr %q warns about the mode of a PROXY Endpoint", stderr.String())
	}

	// The server drops the socket: the agent reconnects by itself.
	p.conn.Close()
	p.close()
	p2 := srv.accept(t)
	p2.handshake("tok-1", "ep-1")
	if !strings.Contains(stderr.String(), "disconnected: ") || !strings.Contains(stderr.String(), "reconnecting in ") {
		t.Errorf("stderr %q lacks the reconnect line", stderr.String())
	}

	stop()
	p2.close()
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := runtime.NumGoroutine(); n > before {
			return fmt.Errorf("%d goroutines, %d before", n, before)
		}
		return nil
	})
}

// TestAgentWarnsAboutLogMode: an agent serving a LOG Endpoint would never
// see a request, so it says why and how to change it.
func TestAgentWarnsAboutLogMode(t *testing.T) {
	srv := newWSServer(t)
	var stderr safeBuffer
	startAgent(t, func(ctx context.Context) error {
		return Run(ctx, []string{"--server", srv.url, "--token", "t", "--endpoint", "ep", "--target", "127.0.0.1:9"}, io.Discard, &stderr)
	})
	p := srv.accept(t)
	p.handshakeAs("t", "ep", "LOG")
	want := "endpoint ep is in LOG mode: its deliveries are recorded and answered by the relay, not forwarded; set its mode to PROXY to forward them"
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(stderr.String(), want) {
			return errors.New("still waiting for the LOG mode warning")
		}
		return nil
	})
	if !strings.Contains(stderr.String(), "public URL "+publicURL("ep")) {
		t.Errorf("stderr %q lacks the public URL", stderr.String())
	}
	p.close()
}

func TestAgentReportsUnreachableTarget(t *testing.T) {
	srv := newWSServer(t)
	target := "127.0.0.1:1" // nothing listens on port 1
	var stdout, stderr safeBuffer
	startAgent(t, func(ctx context.Context) error {
		return Run(ctx, []string{"--server", srv.url, "--token", "t", "--endpoint", "ep", "--target", target}, &stdout, &stderr)
	})
	p := srv.accept(t)
	p.handshake("t", "ep")
	item, _ := json.Marshal(map[string]any{"data": map[string]any{"forwardRequests": forwardRequest{AttemptID: "a", Method: "POST", Path: "/x"}}})
	p.send(wsMessage{ID: subscriptionID(0), Type: gqlws.Next, Payload: item})
	m := p.recv(false)
	var req struct {
		Variables map[string]completeInput `json:"variables"`
	}
	json.Unmarshal(m.Payload, &req)
	in := req.Variables["input"]
	want := "nothing listening on 127.0.0.1:1"
	if in.AttemptID != "a" || !strings.HasPrefix(in.Error, want+": ") || in.Failure != want || in.Status != nil {
		t.Errorf("completeForward input %+v, want error %q with the detail, that failure and no status", in, want)
	}
	p.send(wsMessage{ID: m.ID, Type: gqlws.Error, Payload: json.RawMessage(`[{"message":"attempt not pending","extensions":{"code":"NOT_FOUND"}}]`)})
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(stdout.String(), "POST /x → 502 "+want) {
			return errors.New("still waiting for the failure line on stdout")
		}
		return nil
	})
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(stderr.String(), "no longer waits") {
			return errors.New("still waiting for the refused report explained")
		}
		return nil
	})
	if strings.Contains(stderr.String(), "--endpoint takes") {
		t.Errorf("a refused completeForward reads as an unknown Endpoint: %q", stderr.String())
	}
}

// TestAgentStopsOnRefusal: a refusal retrying cannot change ends the agent
// with a *RefusedError (exit code 2) and is never announced as a
// connection; a dropped connection is still retried (TestAgentDetectsSilentServer).
func TestAgentStopsOnRefusal(t *testing.T) {
	tests := []struct {
		name   string
		refuse func(p *wsPeer)
		want   string
	}{
		{"close 4403", func(p *wsPeer) {
			p.recv(false)
			p.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(gqlws.CloseForbidden, "Forbidden"))
		}, "4403 Forbidden"},
		{"bad token", func(p *wsPeer) {
			p.recv(false)
			p.send(wsMessage{Type: gqlws.ConnectionAck})
			q := p.recv(false)
			p.send(wsMessage{ID: q.ID, Type: gqlws.Next, Payload: json.RawMessage(`{"data":{"endpoint":null},"errors":[{"message":"unauthenticated","extensions":{"code":"UNAUTHENTICATED"}}]}`)})
		}, "check --token"},
		{"unknown endpoint", func(p *wsPeer) {
			p.recv(false)
			p.send(wsMessage{Type: gqlws.ConnectionAck})
			q := p.recv(false)
			p.send(wsMessage{ID: q.ID, Type: gqlws.Next, Payload: json.RawMessage(`{"data":{"endpoint":null}}`)})
		}, `endpoint "ep" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newWSServer(t)
			var stderr safeBuffer
			done := make(chan error, 1)
			go func() {
				a := testAgent(t, srv.url, &stderr)
				a.backoffBase = 20 * time.Millisecond
				done <- a.run(t.Context())
			}()
			tt.refuse(srv.accept(t))
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the agent did not stop on a refusal")
			}
			var refused *RefusedError
			if !errors.As(err, &refused) || refused.ExitCode() != 2 || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run returned %v, want a refusal (exit code 2) naming %q", err, tt.want)
			}
			if strings.Contains(stderr.String(), "connected to") {
				t.Errorf("a refused agent announced a connection: %q", stderr.String())
			}
		})
	}
}

// TestAgentWarnsAboutOtherAgents: an Endpoint other agents serve already
// is named on connect, since deliveries are then shared.
func TestAgentWarnsAboutOtherAgents(t *testing.T) {
	srv := newWSServer(t)
	var stderr safeBuffer
	startAgent(t, func(ctx context.Context) error {
		return Run(ctx, []string{"--server", srv.url, "--token", "t", "--endpoint", "ep", "--target", "127.0.0.1:1"}, io.Discard, &stderr)
	})
	p := srv.accept(t)
	p.recv(false)
	p.send(wsMessage{Type: gqlws.ConnectionAck})
	p.describe("ep", endpointInfo{URL: publicURL("ep"), Mode: "PROXY", AgentCount: 1})
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(stderr.String(), "note: 1 other listener already serves endpoint") {
			return errors.New("still waiting for the warning")
		}
		return nil
	})
}

func TestAgentDetectsSilentServer(t *testing.T) {
	srv := newWSServer(t)
	var stderr safeBuffer
	startAgent(t, func(ctx context.Context) error {
		a := testAgent(t, srv.url, &stderr)
		a.pingInterval, a.readTimeout, a.backoffBase = 50*time.Millisecond, 300*time.Millisecond, 20*time.Millisecond
		return a.run(ctx)
	})
	p := srv.accept(t)
	p.handshake("t", "ep")
	// Never answer the agent's pings: it must give up on this socket.
	if m := p.recv(true); m.Type != gqlws.Ping {
		t.Fatalf("got %q, want the agent's ping", m.Type)
	}
	srv.accept(t).handshake("t", "ep")
	if !strings.Contains(stderr.String(), "no message from server within 300ms") {
		t.Errorf("stderr %q, want the silence to be named", stderr.String())
	}
}

// TestRefusedHandshakeSaysWhatAnswered: when --server names something that
// answers the WebSocket upgrade with an error page, the agent says which
// status and text it got instead of only "bad handshake".
func TestRefusedHandshakeSaysWhatAnswered(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "No agent for client\nunknown address", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	var stderr safeBuffer
	startAgent(t, func(ctx context.Context) error {
		return Run(ctx, []string{"--server", srv.URL, "--token", "t", "--endpoint", "ep", "--target", "127.0.0.1:9"}, io.Discard, &stderr)
	})
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(stderr.String(), "503 Service Unavailable") || !strings.Contains(stderr.String(), "No agent for client") {
			return errors.New("still waiting for the refusal on stderr")
		}
		return nil
	})
}
