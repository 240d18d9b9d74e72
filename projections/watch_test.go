package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

func TestWatchReceivesChangesInOrderAndUnregisters(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.newInspector(e.ctx, "insp-a", time.Hour, t0))
	e.do(e.newInspector(e.ctx, "insp-b", time.Hour, t0))
	changes, cancel := e.views.Watch("insp-a")
	other, cancelOther := e.views.Watch("insp-a") // a second watcher of the same address
	defer cancelOther()

	answer := func(d *domain.Delivery) error { d.Answer(204, ""); return nil }
	// Each step is its own batch (do waits for it), so each gives one change.
	p1 := e.do(e.receive(e.ctx, "d-1", "insp-a", domain.AddressInspector, "", request("/1", ""), t0))
	e.do(e.receive(e.ctx, "d-b", "insp-b", domain.AddressInspector, "", request("/b", ""), t0))
	p3 := e.do(e.receive(e.ctx, "d-2", "insp-a", domain.AddressInspector, "", request("/2", ""), t0))
	p4 := e.do(e.onDelivery(e.ctx, "d-1", t0, answer))
	want := []readmodel.Change{{DeliveryID: "d-1", Position: p1, New: true}, {DeliveryID: "d-2", Position: p3, New: true}, {DeliveryID: "d-1", Position: p4, New: false}}
	for _, ch := range []<-chan readmodel.Change{changes, other} {
		for i, w := range want {
			if got := recvChange(t, ch); got != w {
				t.Errorf("change %d = %+v, want %+v", i, got, w)
			}
		}
	}

	p5 := e.do(e.receive(e.ctx, "d-3", "insp-a", domain.AddressInspector, "", request("/3", ""), t0))
	p6 := e.do(e.onDelivery(e.ctx, "d-3", t0, answer))
	p7 := e.do(e.onDelivery(e.ctx, "d-2", t0, answer))
	for i, w := range []readmodel.Change{{DeliveryID: "d-3", Position: p5, New: true}, {DeliveryID: "d-3", Position: p6, New: false}, {DeliveryID: "d-2", Position: p7, New: false}} {
		if got := recvChange(t, changes); got != w {
			t.Errorf("change %d = %+v, want %+v", i, got, w)
		}
	}

	// The whole log in one batch: one change per delivery, at its latest
	// position, New because the batch created it, in position order.
	manual := e.open("manual.db", Options{})
	all, cancelAll := manual.Watch("insp-a")
	defer cancelAll()
	applyTB(t, manual, e.allEvents())
	for i, w := range []readmodel.Change{{DeliveryID: "d-1", Position: p4, New: true}, {DeliveryID: "d-3", Position: p6, New: true}, {DeliveryID: "d-2", Position: p7, New: true}} {
		if got := recvChange(t, all); got != w {
			t.Errorf("one-batch change %d = %+v, want %+v", i, got, w)
		}
	}

	cancel()
	cancel() // idempotent
	for range changes {
		t.Error("change after cancel")
	}
	if n := e.views.hub.count(); n != 1 {
		t.Errorf("%d watchers registered after cancel, want 1", n)
	}
	// The remaining watcher still works.
	for range 3 {
		recvChange(t, other)
	}
	pos := e.do(e.receive(e.ctx, "d-4", "insp-a", domain.AddressInspector, "", request("/4", ""), t0))
	if c := recvChange(t, other); c.DeliveryID != "d-4" || c.Position != pos {
		t.Errorf("after cancel of the other watcher: %+v", c)
	}
}

func TestWatchDropsAWatcherThatFallsBehind(t *testing.T) {
	e := newEnv(t, Options{WatchBacklog: 3})
	e.do(e.newInspector(e.ctx, "insp-a", time.Hour, t0))
	changes, cancel := e.views.Watch("insp-a")
	defer cancel()
	// Nobody reads; Run must not block, and the watcher is dropped.
	for i := range 10 {
		e.do(e.receive(e.ctx, fmt.Sprintf("d-%d", i), "insp-a", domain.AddressInspector, "", request("/", ""), t0))
	}
	received, behind := 0, 0
	timeout := time.After(waitTimeout)
	for open := true; open; {
		var c readmodel.Change
		select {
		case c, open = <-changes:
			switch {
			case open && c.Behind:
				behind++
			case open:
				received++
			}
		case <-timeout:
			t.Fatal("channel of a watcher past its backlog was not closed")
		}
	}
	if received > 3 {
		t.Errorf("received %d changes from a dropped watcher, want at most the backlog", received)
	}
	if behind != 1 {
		t.Errorf("a dropped watcher's channel said it fell behind %d times, want once before closing", behind)
	}
	if n := e.views.hub.count(); n != 0 {
		t.Errorf("%d watchers registered, want 0", n)
	}
}

func TestWatchAfterCloseIsClosed(t *testing.T) {
	e := newEnv(t, Options{})
	changes, cancel := e.views.Watch("insp-a")
	defer cancel()
	e.stop()
	if err := e.views.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-changes; ok {
		t.Error("watch channel open after Close")
	}
	late, cancelLate := e.views.Watch("insp-a")
	defer cancelLate()
	if _, ok := <-late; ok {
		t.Error("Watch after Close returned an open channel")
	}
}
