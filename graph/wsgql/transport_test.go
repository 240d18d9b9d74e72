package wsgql

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/gorilla/websocket"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/relayhq/relay/graph/answersize"
	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/internal/testwait"
)

// flood is a schema whose subscription sends 64 KiB results as fast as the
// transport takes them, counting them.
type flood struct{ produced atomic.Int64 }

func (f *flood) server(cfg Config) *handler.Server {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: `
		type Query { name: String! }
		type Subscription { flood: String! }
	`})
	big, _ := json.Marshal(map[string]string{"flood": strings.Repeat("x", 64<<10)})
	srv := handler.New(&graphql.ExecutableSchemaMock{
		ExecFunc: func(ctx context.Context) graphql.ResponseHandler {
			if graphql.GetOperationContext(ctx).Operation.Operation != ast.Subscription {
				return graphql.OneShot(&graphql.Response{Data: []byte(`{"name":"n"}`)})
			}
			return func(ctx context.Context) *graphql.Response {
				if ctx.Err() != nil {
					return nil
				}
				f.produced.Add(1)
				return &graphql.Response{Data: big}
			}
		},
		SchemaFunc:     func() *ast.Schema { return schema },
		ComplexityFunc: func(context.Context, string, string, int, map[string]any) (int, bool) { return 0, false },
	})
	srv.AddTransport(New(cfg))
	return srv
}

// serve runs h and counts the requests it is still serving.
func serve(t *testing.T, h http.Handler) (url string, active *atomic.Int64) {
	t.Helper()
	active = &atomic.Int64{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		active.Add(1)
		defer active.Add(-1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return "ws" + strings.TrimPrefix(ts.URL, "http"), active
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	return dialAs(t, url, gqlws.Subprotocol)
}

// dialAs dials offering subprotocol and waits for connection_ack.
func dialAs(t *testing.T, url, subprotocol string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{subprotocol}}
	c, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WriteJSON(map[string]any{"type": "connection_init"}); err != nil {
		t.Fatal(err)
	}
	var ack message
	if err := c.ReadJSON(&ack); err != nil || ack.Type != gqlws.ConnectionAck {
		t.Fatalf("ack: %v %+v", err, ack)
	}
	return c
}

// TestSlowReaderIsDroppedWithBoundedWork: a client that never reads gets
// its socket closed, and the server produced only what its send queue and
// the kernel's buffers hold, not results without end.
func TestSlowReaderIsDroppedWithBoundedWork(t *testing.T) {
	f := &flood{}
	url, active := serve(t, f.server(Config{KeepAlive: time.Second, WriteTimeout: time.Second, SendQueueBytes: 256 << 10}))
	c := dial(t, url)
	if err := c.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": "subscription{ flood }"}}); err != nil {
		t.Fatal(err)
	}
	// Keep talking so that only the write side can end the socket.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if c.WriteJSON(map[string]any{"type": "pong"}) != nil {
					return
				}
			}
		}
	}()
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if active.Load() != 0 {
			return errors.New("still waiting for the server to drop the socket")
		}
		return nil
	})
	// The queue and loopback buffers hold a few MiB: well under 200 results
	// of 64 KiB (without the queue bound: about 850 in the same time).
	if n := f.produced.Load(); n > 200 {
		t.Errorf("produced %d results for a client that reads nothing, want the queue and socket buffers' worth", n)
	}
	t.Logf("produced %d results of 64 KiB before the close", f.produced.Load())
}

// TestCompleteAndCloseReleaseOperations: an operation ends when the
// client completes it and when the socket closes.
func TestCompleteAndCloseReleaseOperations(t *testing.T) {
	var running atomic.Int64
	srv := waitingServer(&running, false)
	srv.AddTransport(New(Config{}))
	url, active := serve(t, srv)
	c := dial(t, url)
	for _, id := range []string{"a", "b"} {
		if err := c.WriteJSON(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": "subscription{ wait }"}}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if running.Load() != 2 {
			return errors.New("still waiting for two operations")
		}
		return nil
	})
	if err := c.WriteJSON(map[string]any{"id": "a", "type": "complete"}); err != nil {
		t.Fatal(err)
	}
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if running.Load() != 1 {
			return errors.New("still waiting for the completed operation to end")
		}
		return nil
	})
	c.Close()
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if running.Load() != 0 || active.Load() != 0 {
			return errors.New("still waiting for the socket's operation to end")
		}
		return nil
	})
}

// TestAwaitRoomOutsideAWebSocket returns at once.
func TestAwaitRoomOutsideAWebSocket(t *testing.T) {
	turn, err := AwaitRoom(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	turn.HandOn()
	turn.Release()
}

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
		typ, id string
	}{
		{in: `{"type":"connection_init"}`, typ: gqlws.ConnectionInit},
		{in: `{"type":"connection_init","payload":null}`, typ: gqlws.ConnectionInit},
		{in: `{"type":"connection_init","payload":{"Authorization":"Bearer t"}}`, typ: gqlws.ConnectionInit},
		{in: `{"type":"connection_init","payload":"Bearer t"}`, wantErr: "payload must be an object"},
		{in: `{"type":"ping","payload":[]}`, wantErr: "payload must be an object"},
		{in: `{"type":"subscribe","id":"1","payload":{"query":"{a}","variables":null}}`, typ: gqlws.Subscribe, id: "1"},
		{in: `{"type":"subscribe","payload":{"query":"{a}"}}`, wantErr: "non-empty string id"},
		{in: `{"type":"subscribe","id":1,"payload":{"query":"{a}"}}`, wantErr: "non-empty string id"},
		{in: `{"type":"subscribe","id":"1","payload":{}}`, wantErr: "query string"},
		{in: `{"type":"subscribe","id":"1","payload":{"query":1}}`, wantErr: "query string"},
		{in: `{"type":"complete","id":"1"}`, typ: gqlws.Complete, id: "1"},
		{in: `{"type":"complete"}`, wantErr: "non-empty string id"},
		{in: `{"type":"next","id":"1"}`, wantErr: "unexpected message type"},
		{in: `{"type":true}`, wantErr: "type must be a string"},
		{in: `{}`, wantErr: "type must be a string"},
		{in: `null`, wantErr: "type must be a string"},
		{in: `[1]`, wantErr: "not a JSON object"},
	}
	for _, tt := range tests {
		f, err := parse([]byte(tt.in), DefaultMaxValues)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("parse(%s) = %v, want error with %q", tt.in, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || f.typ != tt.typ || f.id != tt.id):
			t.Errorf("parse(%s) = %+v, %v; want %s %q", tt.in, f, err, tt.typ, tt.id)
		}
	}
}

// FuzzParse: parse never panics, and what it accepts is what the protocol
// allows.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"type":"connection_init","payload":{}}`, `{"type":"subscribe","id":"1","payload":{"query":"{a}"}}`, `{"type":"complete","id":"x"}`, `{"type":"ping"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := parse(data, DefaultMaxValues)
		if err != nil {
			return
		}
		switch fr.typ {
		case gqlws.Subscribe:
			if fr.id == "" || (fr.subscribe.Query == nil && !fr.tooManyValues) {
				t.Fatalf("accepted subscribe without id or query: %s", data)
			}
		case gqlws.Complete:
			if fr.id == "" {
				t.Fatalf("accepted complete without id: %s", data)
			}
		case gqlws.ConnectionInit, gqlws.Ping, gqlws.Pong:
		default:
			t.Fatalf("accepted type %q", fr.typ)
		}
	})
}

// TestEncode: frames are the JSON json.Marshal would write.
func TestEncode(t *testing.T) {
	for _, m := range []message{
		{Type: gqlws.Ping},
		{Type: gqlws.Complete, ID: `a"b\u2028`},
		{Type: gqlws.Next, ID: "1", Payload: json.RawMessage(`{"data":{"x":1}}`)},
	} {
		b, err := encode(m)
		if err != nil {
			t.Fatal(err)
		}
		var got, want map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("encode(%+v) = %s: %v", m, b, err)
		}
		wb, _ := json.Marshal(m)
		_ = json.Unmarshal(wb, &want)
		if gs, ws := mustJSON(got), mustJSON(want); gs != ws {
			t.Errorf("encode(%+v) = %s, want %s", m, gs, ws)
		}
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestSenderWaitingForRoomIsWoken: with a queue that holds one result,
// every send waits for the writer to make room; a client that reads gets
// them all: a sender the writer did not wake would wait out WriteTimeout
// and close the socket (the writer wakes the senders that wait, though it
// makes no new channel per message otherwise).
func TestSenderWaitingForRoomIsWoken(t *testing.T) {
	f := &flood{}
	url, _ := serve(t, f.server(Config{KeepAlive: time.Minute, WriteTimeout: 5 * time.Second, SendQueueBytes: 1}))
	c := dial(t, url)
	if err := c.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": "subscription{ flood }"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		var m message
		if err := c.ReadJSON(&m); err != nil || m.Type != gqlws.Next {
			t.Fatalf("result %d: %v %+v", i, err, m.Type)
		}
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond) // the queue fills and senders wait
		}
	}
}

// TestBinaryReplyIsQueuedBeforeThen: a binary frame's reply is queued
// before the handler's then runs (then wakes whoever waits on the frame,
// and the reply must not wait behind it). then here waits until the client
// has the reply: were it run first, the reply would never come.
func TestBinaryReplyIsQueuedBeforeThen(t *testing.T) {
	got := make(chan []byte, 1)
	thenDone := make(chan bool, 1)
	f := &flood{}
	url, _ := serve(t, f.server(Config{
		KeepAlive: time.Hour, WriteTimeout: 5 * time.Second,
		Binary: BinaryConfig{Subprotocol: "test-binary", Handle: func(_ context.Context, _ string, frame []byte) ([]byte, func(), error) {
			return append([]byte("re:"), frame...), func() {
				select {
				case <-got:
					thenDone <- true
				case <-time.After(5 * time.Second):
					thenDone <- false
				}
			}, nil
		}},
	}))
	c := dialAs(t, url, "test-binary")
	if err := c.WriteMessage(websocket.BinaryMessage, []byte("frame")); err != nil {
		t.Fatal(err)
	}
	typ, reply, err := c.ReadMessage()
	if err != nil || typ != websocket.BinaryMessage || string(reply) != "re:frame" {
		t.Fatalf("reply: %d %q %v", typ, reply, err)
	}
	got <- reply
	if !<-thenDone {
		t.Fatal("then ran before the reply was queued")
	}
}

// TestBinaryHandleGetsTheAgreedSubprotocol: Handle is told which version
// a socket agreed on, so that it can answer each version's frames as that
// version says.
func TestBinaryHandleGetsTheAgreedSubprotocol(t *testing.T) {
	f := &flood{}
	url, _ := serve(t, f.server(Config{
		KeepAlive: time.Hour, WriteTimeout: 5 * time.Second,
		Binary: BinaryConfig{Subprotocol: "test-binary.v2", Older: []string{"test-binary.v1"},
			Handle: func(_ context.Context, proto string, frame []byte) ([]byte, func(), error) {
				return []byte(proto + ":" + string(frame)), nil, nil
			}},
	}))
	for _, proto := range []string{"test-binary.v2", "test-binary.v1"} {
		c := dialAs(t, url, proto)
		if err := c.WriteMessage(websocket.BinaryMessage, []byte("frame")); err != nil {
			t.Fatal(err)
		}
		typ, reply, err := c.ReadMessage()
		if err != nil || typ != websocket.BinaryMessage || string(reply) != proto+":frame" {
			t.Fatalf("%s: reply %d %q %v", proto, typ, reply, err)
		}
	}
}

// TestBinaryThenRunsFirstWhenTheQueueIsFull: a client that reads nothing
// fills the send queue; a binary frame's then still runs at once, not
// after its reply has waited for room (up to WriteTimeout, here 30 s).
func TestBinaryThenRunsFirstWhenTheQueueIsFull(t *testing.T) {
	thenRan := make(chan struct{}, 1)
	f := &flood{}
	url, _ := serve(t, f.server(Config{
		KeepAlive: time.Hour, WriteTimeout: 30 * time.Second, SendQueueBytes: 1,
		Binary: BinaryConfig{Subprotocol: "test-binary", Handle: func(context.Context, string, []byte) ([]byte, func(), error) {
			return []byte("reply"), func() { thenRan <- struct{}{} }, nil
		}},
	}))
	c := dialAs(t, url, "test-binary")
	if err := c.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": "subscription{ flood }"}}); err != nil {
		t.Fatal(err)
	}
	// The queue is full once the flood stops producing: the kernel's
	// buffers hold what the client does not read.
	last := int64(-1)
	testwait.CheckFor(t, 20*time.Second, 200*time.Millisecond, func() error {
		n := f.produced.Load()
		if n == 0 || n != last {
			last = n
			return errors.New("the flood still produces")
		}
		return nil
	})
	if err := c.WriteMessage(websocket.BinaryMessage, []byte("frame")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-thenRan:
	case <-time.After(10 * time.Second):
		t.Fatal("then waited for room in the send queue")
	}
}

// emptyObjects is a subscribe message whose variables are n empty header
// objects: two bytes of JSON each, a map each once decoded generically.
func emptyObjects(id string, n int) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"subscribe","id":"` + id + `","payload":{"query":"{ name }","variables":{"input":{"headers":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("{}")
	}
	b.WriteString(`]}}}}`)
	return []byte(b.String())
}

// TestSubscribeValuesCountedBeforeDecode: a subscribe of 14 MiB of empty
// objects (what an agent's socket takes) is refused before its variables
// are decoded, with little more than the message itself allocated; before,
// the decode took about twenty times the message.
func TestSubscribeValuesCountedBeforeDecode(t *testing.T) {
	msg := emptyObjects("1", 14<<20/3)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f, err := parse(msg, DefaultMaxValues)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("parse of a %d-byte subscribe: %.1f MiB allocated", len(msg), float64(allocated)/(1<<20))
	if !f.tooManyValues || f.subscribe.Variables != nil {
		t.Fatalf("the variables were decoded: tooManyValues %v, %d variables", f.tooManyValues, len(f.subscribe.Variables))
	}
	// The payload is copied once (json.RawMessage); nothing more.
	if allocated > 2*uint64(len(msg)) {
		t.Fatalf("parse allocated %d bytes for a %d-byte message", allocated, len(msg))
	}
	// At the bound the payload is decoded: the payload, its query, the
	// variables, input and the array are 5 values beside the headers.
	if f, err := parse(emptyObjects("1", DefaultMaxValues-5), DefaultMaxValues); err != nil || f.tooManyValues || f.subscribe.Query == nil {
		t.Fatalf("at the bound: %+v, %v", f.tooManyValues, err)
	}
	if f, err := parse(emptyObjects("1", DefaultMaxValues-4), DefaultMaxValues); err != nil || !f.tooManyValues {
		t.Fatalf("one past the bound: %v, %v", f.tooManyValues, err)
	}
}

// TestSubscribeOverTheValuesBound: the operation is refused with an error
// for its id, and the socket goes on serving the next one.
func TestSubscribeOverTheValuesBound(t *testing.T) {
	url, _ := serve(t, (&flood{}).server(Config{MaxMessage: 1 << 20, MaxValues: 1000}))
	c := dial(t, url)
	if err := c.WriteMessage(websocket.TextMessage, emptyObjects("big", 1000)); err != nil {
		t.Fatal(err)
	}
	var m message
	if err := c.ReadJSON(&m); err != nil {
		t.Fatal(err)
	}
	if m.Type != gqlws.Error || m.ID != "big" || !strings.Contains(string(m.Payload), `"code":"REQUEST_TOO_LARGE"`) {
		t.Fatalf("got %s %s %s; want an error for big with REQUEST_TOO_LARGE", m.Type, m.ID, m.Payload)
	}
	if err := c.WriteMessage(websocket.TextMessage, emptyObjects("small", 10)); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadJSON(&m); err != nil || m.Type != gqlws.Next || m.ID != "small" {
		t.Fatalf("the next operation: %v %s %s %s", err, m.Type, m.ID, m.Payload)
	}
}

// TestStoppingClosesSocketsGoingAway: when the relay shuts down, its
// sockets end with a close frame 1001 and its reason, not dropped (1006),
// so a client can tell a relay going away from a network that failed;
// Stop returns once every socket has ended, and a socket asked for after
// it is refused.
func TestStoppingClosesSocketsGoingAway(t *testing.T) {
	g := NewGoAway()
	f := &flood{}
	url, active := serve(t, f.server(Config{GoAway: g}))
	clients := []*websocket.Conn{dial(t, url), dial(t, url), dial(t, url)}
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- g.Stop(ctx)
	}()
	for i, c := range clients {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var ce *websocket.CloseError
		for {
			_, _, err := c.ReadMessage()
			if err == nil {
				continue
			}
			if !errors.As(err, &ce) {
				t.Fatalf("socket %d ended with %v, want a close frame", i, err)
			}
			break
		}
		if ce.Code != websocket.CloseGoingAway || ce.Text != ReasonShuttingDown {
			t.Fatalf("socket %d closed with %d %q, want %d %q", i, ce.Code, ce.Text, websocket.CloseGoingAway, ReasonShuttingDown)
		}
		c.Close()
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	g.mu.Lock()
	live := g.live
	g.mu.Unlock()
	if live != 0 {
		t.Errorf("Stop returned with %d sockets not ended", live)
	}
	// The handlers return right after their sockets end.
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := active.Load(); n != 0 {
			return errors.New("sockets still served")
		}
		return nil
	})
	d := websocket.Dialer{Subprotocols: []string{gqlws.Subprotocol}}
	if c, resp, err := d.Dial(url, nil); err == nil {
		c.Close()
		t.Error("a socket was opened after Stop")
	} else if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a socket asked for after Stop: %v, want 503", err)
	}
}

// TestLateChargesHoldNothing: a subscription's resolver that charges its
// answer after the operation ended (reading its next item while the client
// completed it) holds nothing of the answer budget. Before, each such
// charge was held for the life of the process.
func TestLateChargesHoldNothing(t *testing.T) {
	budget := answersize.New(1<<20, 256<<20)
	late := make(chan error, 1)
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: `type Query { name: String! } type Subscription { wait: String! }`})
	srv := handler.New(&graphql.ExecutableSchemaMock{
		ExecFunc: func(ctx context.Context) graphql.ResponseHandler {
			go func() {
				<-ctx.Done()
				time.Sleep(50 * time.Millisecond) // the operation has returned its meter
				late <- answersize.Charge(ctx, 512<<10)
			}()
			return func(ctx context.Context) *graphql.Response {
				<-ctx.Done()
				return nil
			}
		},
		SchemaFunc:     func() *ast.Schema { return schema },
		ComplexityFunc: func(context.Context, string, string, int, map[string]any) (int, bool) { return 0, false },
	})
	srv.AddTransport(New(Config{Answers: budget}))
	url, active := serve(t, srv)
	c := dial(t, url)
	if err := c.WriteJSON(map[string]any{"id": "a", "type": "subscribe", "payload": map[string]any{"query": "subscription{ wait }"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := c.WriteJSON(map[string]any{"id": "a", "type": "complete"}); err != nil {
		t.Fatal(err)
	}
	if err := <-late; !errors.Is(err, answersize.ErrEnded) {
		t.Errorf("a charge after the operation ended: %v, want ErrEnded", err)
	}
	c.Close()
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if active.Load() != 0 {
			return errors.New("still waiting for the socket to end")
		}
		return nil
	})
	if held := budget.InUse(); held != 0 {
		t.Errorf("the answer budget holds %d bytes with no socket open, want 0", held)
	}
}

// waitingServer is a GraphQL server whose subscription (and, unless
// queriesAnswer, whose every operation) runs until its context ends,
// counted in running meanwhile; with queriesAnswer a query answers at once.
func waitingServer(running *atomic.Int64, queriesAnswer bool) *handler.Server {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: `type Query { name: String! } type Subscription { wait: String! }`})
	return handler.New(&graphql.ExecutableSchemaMock{
		ExecFunc: func(ctx context.Context) graphql.ResponseHandler {
			if queriesAnswer && graphql.GetOperationContext(ctx).Operation.Operation != ast.Subscription {
				return graphql.OneShot(&graphql.Response{Data: []byte(`{"name":"n"}`)})
			}
			return func(ctx context.Context) *graphql.Response {
				running.Add(1)
				defer running.Add(-1)
				<-ctx.Done()
				return nil
			}
		},
		SchemaFunc:     func() *ast.Schema { return schema },
		ComplexityFunc: func(context.Context, string, string, int, map[string]any) (int, bool) { return 0, false },
	})
}
