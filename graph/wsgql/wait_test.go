package wsgql

import (
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/internal/testwait"
)

// answerServer is a GraphQL server whose completeForward mutation, like an
// agent's answer being recorded, runs until gate closes (or its socket
// does), counted in executed; a query answers at once, a subscription runs
// until its context ends.
func answerServer(gate <-chan struct{}, executed *atomic.Int64, cfg Config) *handler.Server {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: `
		type Query { name: String! }
		type Mutation { completeForward(body: String!): Boolean! }
		type Subscription { wait: String! }
	`})
	srv := handler.New(&graphql.ExecutableSchemaMock{
		ExecFunc: func(ctx context.Context) graphql.ResponseHandler {
			switch graphql.GetOperationContext(ctx).Operation.Operation {
			case ast.Query:
				return graphql.OneShot(&graphql.Response{Data: []byte(`{"name":"n"}`)})
			case ast.Subscription:
				return func(ctx context.Context) *graphql.Response {
					<-ctx.Done()
					return nil
				}
			}
			executed.Add(1)
			answered := false
			return func(ctx context.Context) *graphql.Response {
				if answered {
					return nil
				}
				answered = true
				select {
				case <-gate:
					return &graphql.Response{Data: []byte(`{"completeForward":true}`)}
				case <-ctx.Done():
					return nil
				}
			}
		},
		SchemaFunc:     func() *ast.Schema { return schema },
		ComplexityFunc: func(context.Context, string, string, int, map[string]any) (int, bool) { return 0, false },
	})
	srv.AddTransport(New(cfg))
	return srv
}

// peer is a client socket that records, per operation id, what the server
// sent for it: "next", "complete", or "error:" and the error's code and
// message.
type peer struct {
	t   *testing.T
	c   *websocket.Conn
	got map[string][]string
}

func dialPeer(t *testing.T, url string) *peer {
	t.Helper()
	return &peer{t: t, c: dial(t, url), got: map[string][]string{}}
}

// answer sends a completeForward mutation with a body of size bytes.
func (p *peer) answer(id string, size int) {
	p.t.Helper()
	p.subscribe(id, map[string]any{
		"query":     "mutation($body: String!){ completeForward(body: $body) }",
		"variables": map[string]any{"body": strings.Repeat("x", size)},
	})
}

func (p *peer) subscribe(id string, payload map[string]any) {
	p.t.Helper()
	if err := p.c.WriteJSON(map[string]any{"id": id, "type": "subscribe", "payload": payload}); err != nil {
		p.t.Fatal(err)
	}
}

func (p *peer) complete(id string) {
	p.t.Helper()
	if err := p.c.WriteJSON(map[string]any{"id": id, "type": "complete"}); err != nil {
		p.t.Fatal(err)
	}
}

// sync pings and records what comes until the pong: the server reads in
// order, so everything sent before has been started, queued to wait or
// refused by then.
func (p *peer) sync() {
	p.t.Helper()
	if err := p.c.WriteJSON(map[string]any{"type": "ping"}); err != nil {
		p.t.Fatal(err)
	}
	p.readUntil(func(m message) bool { return m.Type == gqlws.Pong })
}

// readUntil records messages until done is true of one (10 s at most).
func (p *peer) readUntil(done func(m message) bool) {
	p.t.Helper()
	_ = p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var m message
		if err := p.c.ReadJSON(&m); err != nil {
			p.t.Fatalf("reading: %v; so far %v", err, p.got)
		}
		switch m.Type {
		case gqlws.Next, gqlws.Complete:
			p.got[m.ID] = append(p.got[m.ID], m.Type)
		case gqlws.Error:
			var errs []struct {
				Message    string
				Extensions struct{ Code string }
			}
			_ = json.Unmarshal(m.Payload, &errs)
			for _, e := range errs {
				p.got[m.ID] = append(p.got[m.ID], "error:"+e.Extensions.Code+": "+e.Message)
			}
		}
		if done(m) {
			return
		}
	}
}

// settle reads until every id in ids got complete or an error.
func (p *peer) settle(ids ...string) {
	p.t.Helper()
	ended := func(id string) bool {
		got := p.got[id]
		return len(got) > 0 && (got[len(got)-1] == gqlws.Complete || strings.HasPrefix(got[len(got)-1], "error:"))
	}
	all := func() bool {
		for _, id := range ids {
			if !ended(id) {
				return false
			}
		}
		return true
	}
	if all() {
		return
	}
	p.readUntil(func(message) bool { return all() })
}

// refused lists the ids refused so far.
func (p *peer) refused() []string {
	var ids []string
	for id, got := range p.got {
		for _, g := range got {
			if strings.HasPrefix(g, "error:") {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// answered reports whether id got its result and complete, nothing else.
func (p *peer) answered(id string) bool {
	got := p.got[id]
	return len(got) == 2 && got[0] == gqlws.Next && got[1] == gqlws.Complete
}

func heapNow() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestLargeAnswersOnOneSocketWait: an agent answers several forwards at
// once on one socket with completeForward mutations over the held bytes
// (1 MiB). One runs beside the held bytes, the others wait for that place
// and run in turn; every one is answered. Before, all but the first were
// refused REQUEST_TOO_LARGE.
func TestLargeAnswersOnOneSocketWait(t *testing.T) {
	tests := []struct {
		name    string
		answers int
		size    int
		running int64 // at once while the first is held: held bytes and the place beside them
	}{
		{"two answers of 1.5 MiB", 2, 3 << 19, 1},
		{"three answers of 1.5 MiB", 3, 3 << 19, 1},
		{"six answers of 600 KiB", 6, 600 << 10, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gate := make(chan struct{})
			var executed atomic.Int64
			url, _ := serve(t, answerServer(gate, &executed, Config{MaxMessage: 4 << 20}))
			p := dialPeer(t, url)
			var ids []string
			for i := range tc.answers {
				ids = append(ids, fmt.Sprint("a", i))
				p.answer(ids[i], tc.size)
			}
			p.sync()
			if r := p.refused(); len(r) > 0 {
				t.Fatalf("%d answers of %d KiB at once: %v refused: %v", tc.answers, tc.size>>10, r, p.got)
			}
			if n := executed.Load(); n != tc.running {
				t.Fatalf("%d answers running at once, want %d (the rest waiting)", n, tc.running)
			}
			// A small query does not wait behind them.
			p.subscribe("small", map[string]any{"query": "{ name }"})
			p.settle("small")
			if !p.answered("small") {
				t.Fatalf("a query beside the waiting answers: %v", p.got["small"])
			}
			close(gate)
			p.settle(ids...)
			for _, id := range ids {
				if !p.answered(id) {
					t.Errorf("%s: %v, want next and complete", id, p.got[id])
				}
			}
		})
	}
}

// TestWaitingAnswersAreBounded: past what the waiting operations may hold
// (the socket's message limit, 4 MiB here), answers are refused as before
// and the socket stays; the heap grows by less than the socket's bound,
// HeldBytes and twice its message limit (9 MiB).
func TestWaitingAnswersAreBounded(t *testing.T) {
	const limit, size, answers = 4 << 20, 3 << 19, 10
	gate := make(chan struct{})
	var executed atomic.Int64
	url, _ := serve(t, answerServer(gate, &executed, Config{MaxMessage: limit}))
	p := dialPeer(t, url)
	before := heapNow()
	for i := range answers {
		p.answer(fmt.Sprint("a", i), size)
	}
	p.sync()
	grew := int64(heapNow()) - int64(before)
	refused := p.refused()
	t.Logf("%d answers of %d KiB at once on a socket of %d MiB messages: %d running, %d refused; the heap grew %.1f MiB",
		answers, size>>10, limit>>20, executed.Load(), len(refused), float64(grew)/(1<<20))
	if executed.Load() != 1 || len(refused) != answers-3 {
		t.Fatalf("%d running and %d refused, want 1 running, 2 waiting and %d refused", executed.Load(), len(refused), answers-3)
	}
	for _, id := range refused {
		if g := p.got[id][0]; !strings.Contains(g, "REQUEST_TOO_LARGE") || !strings.Contains(g, "waiting") {
			t.Fatalf("%s: %s, want REQUEST_TOO_LARGE naming the waiting bound", id, g)
		}
	}
	if bound := int64(DefaultHeldBytes + 2*limit); grew > bound {
		t.Fatalf("the heap grew %.1f MiB, past the socket's bound of %d MiB", float64(grew)/(1<<20), bound>>20)
	}
	close(gate)
	p.settle("a0", "a1", "a2")
	for _, id := range []string{"a0", "a1", "a2"} {
		if !p.answered(id) {
			t.Errorf("%s: %v, want next and complete", id, p.got[id])
		}
	}
}

// TestCompleteRemovesAWaitingOperation: a waiting answer the client
// completes never runs, gets nothing, and gives its room back to the next.
func TestCompleteRemovesAWaitingOperation(t *testing.T) {
	const size = 3 << 19
	gate := make(chan struct{})
	var executed atomic.Int64
	url, _ := serve(t, answerServer(gate, &executed, Config{MaxMessage: 4 << 20}))
	p := dialPeer(t, url)
	for _, id := range []string{"a0", "a1", "a2", "a3"} {
		p.answer(id, size)
	}
	p.sync()
	if r := p.refused(); len(r) != 1 || r[0] != "a3" {
		t.Fatalf("refused %v, want a3 alone (a0 running, a1 and a2 waiting)", r)
	}
	p.complete("a1")
	p.answer("a4", size) // in a1's room
	p.sync()
	if r := p.refused(); len(r) != 1 {
		t.Fatalf("refused %v once a1 was completed, want a3 alone", r)
	}
	close(gate)
	p.settle("a0", "a2", "a4")
	for _, id := range []string{"a0", "a2", "a4"} {
		if !p.answered(id) {
			t.Errorf("%s: %v, want next and complete", id, p.got[id])
		}
	}
	// a1 would have run before a2: it is gone, and its id is free again.
	if got := p.got["a1"]; len(got) != 0 {
		t.Fatalf("a1, completed while waiting: %v, want nothing", got)
	}
	if n := executed.Load(); n != 3 {
		t.Fatalf("%d answers executed, want 3", n)
	}
	p.answer("a1", size)
	p.settle("a1")
	if !p.answered("a1") {
		t.Fatalf("a1 again: %v", p.got["a1"])
	}
}

// TestWaitingOperationsEndWithTheSocket: closing a socket with answers
// waiting forgets them: none runs after, and the socket's goroutines end.
func TestWaitingOperationsEndWithTheSocket(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	var executed atomic.Int64
	url, active := serve(t, answerServer(gate, &executed, Config{MaxMessage: 4 << 20, WaitTimeout: time.Minute}))
	before := runtime.NumGoroutine()
	p := dialPeer(t, url)
	for _, id := range []string{"a0", "a1", "a2"} {
		p.answer(id, 3<<19)
	}
	p.sync()
	if r := p.refused(); len(r) != 0 || executed.Load() != 1 {
		t.Fatalf("refused %v, %d running; want a0 running, a1 and a2 waiting", r, executed.Load())
	}
	p.c.Close()
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := runtime.NumGoroutine(); active.Load() != 0 || n > before {
			return fmt.Errorf("%d requests served, %d goroutines (%d before the socket)", active.Load(), n, before)
		}
		return nil
	})
	if n := executed.Load(); n != 1 {
		t.Fatalf("%d answers executed, want 1: the waiting ones started after the socket closed", n)
	}
}

// TestWaitingIsBoundedInTime: an answer that waits past
// Config.WaitTimeout is refused, saying it waited, and the socket stays.
func TestWaitingIsBoundedInTime(t *testing.T) {
	gate := make(chan struct{})
	var executed atomic.Int64
	url, _ := serve(t, answerServer(gate, &executed, Config{MaxMessage: 4 << 20, WaitTimeout: 200 * time.Millisecond}))
	p := dialPeer(t, url)
	start := time.Now()
	p.answer("a0", 3<<19)
	p.answer("a1", 3<<19)
	p.settle("a1")
	waited := time.Since(start)
	if g := p.got["a1"]; len(g) != 1 || !strings.Contains(g[0], "REQUEST_TOO_LARGE") || !strings.Contains(g[0], "waited 200ms") || waited < 200*time.Millisecond {
		t.Fatalf("a1 after %v: %v, want REQUEST_TOO_LARGE after waiting 200ms", waited, g)
	}
	close(gate)
	p.settle("a0")
	if !p.answered("a0") {
		t.Fatalf("a0: %v", p.got["a0"])
	}
}
