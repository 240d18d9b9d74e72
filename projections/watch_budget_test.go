package projections

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
)

// heapInUse is the live heap after a collection.
func heapInUse(t *testing.T) uint64 {
	t.Helper()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestWatchQueuesHaveARelayWideBudget: watchers that never read (one
// client's thousand live subscriptions of an address it floods) hold at
// most the relay's budget of queued change notes, not a backlog each.
func TestWatchQueuesHaveARelayWideBudget(t *testing.T) {
	e := newEnv(t, Options{})
	e.do(e.newInspector(e.ctx, "insp-a", time.Hour, t0))
	const watchers, deliveries = 1000, 2000
	held := make([]func(), 0, watchers)
	for range watchers {
		_, cancel := e.views.Watch("insp-a")
		held = append(held, cancel)
	}
	t.Cleanup(func() {
		for _, cancel := range held {
			cancel()
		}
	})
	before := heapInUse(t)
	var last uint64
	for i := range deliveries {
		last = e.must(e.receive(e.ctx, fmt.Sprintf("d-%d", i), "insp-a", domain.AddressInspector, "", request("/", ""), t0))
	}
	e.waitFor(e.views, last)
	after := heapInUse(t)
	grown := int64(after) - int64(before)
	t.Logf("%d stalled watchers, %d deliveries: heap grew %.1f MiB", watchers, deliveries, float64(grown)/(1<<20))
	// 2 000 000 notes of 32 bytes held without a budget: at least 61 MiB.
	if grown > 24<<20 {
		t.Errorf("%d stalled watchers of %d deliveries grew the heap %.1f MiB, want under 24 MiB", watchers, deliveries, float64(grown)/(1<<20))
	}
	// What the hub counts: the budget, and past it at most what each
	// watcher under the floor took from one batch.
	if n := e.views.hub.queued.Load(); n > DefaultWatchBudget+watchers*(watchFloor+rebuildBatch) {
		t.Errorf("watchers hold %d notes, want at most the budget %d and a batch each", n, DefaultWatchBudget)
	}
	t.Logf("watchers hold %d notes (budget %d); %d of %d still registered", e.views.hub.queued.Load(), DefaultWatchBudget, e.views.hub.count(), watchers)
	runtime.KeepAlive(held)
}

// TestWatchBudgetSparesReadersThatKeepUp: with the budget full of a
// stalled watcher's notes, a watcher that reads every change is not dropped;
// the stalled one is, with a last Behind note, and its notes are given back.
func TestWatchBudgetSparesReadersThatKeepUp(t *testing.T) {
	e := newEnv(t, Options{WatchBudget: watchFloor})
	e.do(e.newInspector(e.ctx, "insp-a", time.Hour, t0))
	stalled, cancelStalled := e.views.Watch("insp-a")
	defer cancelStalled()
	reader, cancelReader := e.views.Watch("insp-a")
	defer cancelReader()
	for i := range 3 * watchFloor {
		e.do(e.receive(e.ctx, fmt.Sprintf("d-%d", i), "insp-a", domain.AddressInspector, "", request("/", ""), t0))
		if c := recvChange(t, reader); c.Behind || c.DeliveryID != fmt.Sprintf("d-%d", i) {
			t.Fatalf("reader that keeps up got %+v after delivery %d", c, i)
		}
	}
	got := 0
	for c := range stalled {
		if c.Behind {
			break
		}
		got++
	}
	if got > watchFloor+1 {
		t.Errorf("stalled watcher was handed %d changes before Behind, want at most %d", got, watchFloor+1)
	}
	cancelStalled()
	cancelReader()
	testwait.CheckFor(t, waitTimeout, time.Millisecond, func() error {
		if n := e.views.hub.queued.Load(); n != 0 {
			return fmt.Errorf("cancelled watchers hold %d notes, want 0", n)
		}
		return nil
	})
}
