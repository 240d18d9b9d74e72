package wsgql

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/testwait"
)

// testBudget is a MessageBudget of total bytes that counts what it holds.
type testBudget struct {
	mu          sync.Mutex
	total, used int64
	most        int64
	refused     int
	calls       int
	keys        map[string]bool
}

func (b *testBudget) ReserveFor(client, key string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.used+n > b.total {
		b.refused++
		return false
	}
	b.used += n
	b.most = max(b.most, b.used)
	if b.keys == nil {
		b.keys = map[string]bool{}
	}
	b.keys[key] = true
	b.keys["client:"+client] = client != ""
	return true
}

func (b *testBudget) ReleaseFor(_, _ string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

func (b *testBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// budgetConfig is a socket whose messages may reach 16 MiB once
// initialised, as an agent's, those past 1 MiB held in b.
func budgetConfig(b *testBudget) Config {
	return Config{MaxMessage: 1 << 20, MessageLimit: func(context.Context) int64 { return 16 << 20 },
		Budget: b, BudgetKey: func(context.Context) string { return "account:a" }}
}

// TestLargeMessagesHoldTheBudget: the bytes of a message past MaxMessage
// are held in Config.Budget while the operation it started runs, and given
// back when it ends; a message the budget has no room for closes its
// socket with 1013 before the rest of it is read. Before, every socket
// held its messages up to its own limit whatever the others held: an
// account's 32 sockets from one address, ≈ 14.3 MiB each (twice that with
// those waiting).
func TestLargeMessagesHoldTheBudget(t *testing.T) {
	b := &testBudget{total: 8 << 20}
	gate := make(chan struct{})
	var executed atomic.Int64
	url, _ := serve(t, answerServer(gate, &executed, budgetConfig(b)))
	first := dialPeer(t, url)
	first.answer("a1", 5<<20)
	first.sync()
	held := b.inUse()
	if held < 4<<20 || held > 5<<20 {
		t.Fatalf("a running answer of 5 MiB holds %d bytes of the budget, want its bytes past 1 MiB", held)
	}
	if !b.keys["account:a"] || !b.keys["client:127.0.0.1"] {
		t.Errorf("reserved under %v, want the socket's BudgetKey and its client", b.keys)
	}
	second := dialPeer(t, url)
	second.answer("b1", 5<<20)
	_ = second.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := second.c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseTryAgainLater {
		t.Fatalf("a second answer past the budget: %v, want close 1013", err)
	}
	t.Logf("an answer of 5 MiB held %d bytes; a second, beside it in a budget of 8 MiB, closed its socket: %v", held, err)
	if n := executed.Load(); n != 1 {
		t.Errorf("%d answers ran, want the first only", n)
	}
	close(gate)
	first.settle("a1")
	if !first.answered("a1") {
		t.Errorf("a1: %v, want next and complete", first.got["a1"])
	}
	testwait.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if n := b.inUse(); n != 0 {
			return fmt.Errorf("%d bytes of the budget held once every answer ended", n)
		}
		return nil
	})
	// Messages up to MaxMessage take none of it.
	b.mu.Lock()
	calls := b.calls
	b.mu.Unlock()
	first.answer("small", 900<<10)
	first.settle("small")
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls != calls {
		t.Errorf("an answer under MaxMessage asked the budget %d times", b.calls-calls)
	}
}

// TestWaitingMessagesGiveTheBudgetBack: operations that wait for room, or
// whose socket closes while they wait or run, give back what their
// messages hold of the budget.
func TestWaitingMessagesGiveTheBudgetBack(t *testing.T) {
	b := &testBudget{total: 64 << 20}
	gate := make(chan struct{}) // never opens: the first answer runs until the socket goes
	var executed atomic.Int64
	url, _ := serve(t, answerServer(gate, &executed, budgetConfig(b)))
	p := dialPeer(t, url)
	p.answer("a1", 3<<20) // runs beside the held bytes
	p.answer("a2", 3<<20) // waits for that place (the socket's 16 MiB may wait)
	p.answer("a3", 3<<20) // and so does this one
	p.answer("a4", 2<<20)
	p.complete("a4") // a waiting one completed gives its bytes back at once
	p.sync()
	if n := executed.Load(); n != 1 {
		t.Fatalf("%d answers ran, want 1 (the others wait)", n)
	}
	if held := b.inUse(); held < 6<<20 || held > 7<<20 {
		t.Fatalf("one answer running and two waiting, of 3 MiB each, hold %d bytes of the budget, want their bytes past 1 MiB each", held)
	}
	p.c.Close()
	testwait.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if n := b.inUse(); n != 0 {
			return fmt.Errorf("%d bytes of the budget held once the socket closed", n)
		}
		return nil
	})
}
