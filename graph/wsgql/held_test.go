package wsgql

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/internal/testwait"
)

// TestRunningOperationsHoldBoundedMessages: a client sends 100
// subscriptions on one socket, each with 256 KiB of extensions that the
// operation keeps for as long as it runs. Those that fit in
// Config.HeldBytes (1 MiB) run, the others are refused REQUEST_TOO_LARGE
// and the socket stays; beside them one query of 3 MiB still runs. Before,
// all 100 ran and held their messages: the heap grew by 25 MiB and more,
// and a socket of an agent (14.3 MiB a message) could hold 1.4 GiB.
func TestRunningOperationsHoldBoundedMessages(t *testing.T) {
	var running atomic.Int64
	srv := waitingServer(&running, true)
	srv.AddTransport(New(Config{MaxMessage: 4 << 20}))
	url, _ := serve(t, srv)
	c := dial(t, url)

	const ops, pad = 100, 256 << 10
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := range ops {
		payload := map[string]any{"query": "subscription{ wait }", "extensions": map[string]any{"pad": strings.Repeat("x", pad)}}
		if err := c.WriteJSON(map[string]any{"id": fmt.Sprint("s", i), "type": "subscribe", "payload": payload}); err != nil {
			t.Fatal(err)
		}
	}
	// Each is either running or refused.
	var refused atomic.Int64
	others := make(chan message, 16)
	go func() {
		defer close(others)
		for {
			var m message
			if err := c.ReadJSON(&m); err != nil {
				return
			}
			switch {
			case m.Type == gqlws.Ping:
			case m.Type == gqlws.Error && strings.Contains(string(m.Payload), `"code":"REQUEST_TOO_LARGE"`):
				refused.Add(1)
			default:
				others <- m
			}
		}
	}()
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := running.Load() + refused.Load(); n < ops {
			return fmt.Errorf("%d of %d subscriptions running or refused", n, ops)
		}
		return nil
	})
	held := heap() - min(before, heap())
	t.Logf("%d subscriptions of %d KiB on one socket: %d running, %d refused; the heap grew %.1f MiB", ops, pad>>10, running.Load(), refused.Load(), float64(held)/(1<<20))
	if n := running.Load(); n == 0 || n*pad > DefaultHeldBytes {
		t.Fatalf("%d subscriptions of %d KiB run on one socket, want some and at most %d KiB of them", n, pad>>10, DefaultHeldBytes>>10)
	}
	if held > 8<<20 {
		t.Fatalf("the heap grew %.1f MiB with the subscriptions running, past what one socket may hold", float64(held)/(1<<20))
	}

	// A query larger than the rest, beside them, runs and answers.
	big := map[string]any{"query": "{ name }", "extensions": map[string]any{"pad": strings.Repeat("x", 3<<20)}}
	if err := c.WriteJSON(map[string]any{"id": "big", "type": "subscribe", "payload": big}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-others:
		if m.Type != gqlws.Next || m.ID != "big" {
			t.Fatalf("the query beside them: %s %s %.200s", m.Type, m.ID, m.Payload)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the query beside them")
	}
	// Completed, the subscriptions give their room back.
	for i := range ops {
		if err := c.WriteJSON(map[string]any{"id": fmt.Sprint("s", i), "type": "complete"}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if running.Load() != 0 {
			return errors.New("still waiting for the completed subscriptions to end")
		}
		return nil
	})
	if err := c.WriteJSON(map[string]any{"id": "again", "type": "subscribe", "payload": map[string]any{"query": "subscription{ wait }", "extensions": map[string]any{"pad": strings.Repeat("x", pad)}}}); err != nil {
		t.Fatal(err)
	}
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if running.Load() != 1 {
			return errors.New("still waiting for a subscription once the others ended")
		}
		return nil
	})

	// A subscription's message counts within the bound even alone: one of
	// 2 MiB on a socket that holds nothing is refused, a query of 2 MiB runs.
	c2 := dial(t, url)
	for _, tc := range []struct{ query, want string }{
		{"subscription{ wait }", gqlws.Error},
		{"{ name }", gqlws.Next},
	} {
		payload := map[string]any{"query": tc.query, "extensions": map[string]any{"pad": strings.Repeat("x", 2<<20)}}
		if err := c2.WriteJSON(map[string]any{"id": "alone", "type": "subscribe", "payload": payload}); err != nil {
			t.Fatal(err)
		}
		var m message
		if err := c2.ReadJSON(&m); err != nil || m.Type != tc.want || m.ID != "alone" {
			t.Fatalf("%s of 2 MiB alone on a socket: %v %s %s %.200s, want %s", tc.query, err, m.Type, m.ID, m.Payload, tc.want)
		}
		if tc.want == gqlws.Next {
			_ = c2.ReadJSON(&m) // its complete
		}
	}
}
