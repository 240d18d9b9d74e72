package projections

import (
	"sync"
	"sync/atomic"

	"github.com/relayhq/relay/readmodel"
)

// Watch delivers a Change for every delivery of address that a committed
// batch created or updated, in position order, from the next batch on (a
// batch committing while Watch registers may be announced too: a reader that
// also lists the history de-duplicates by Position). Read the delivery itself
// with Delivery: it is committed when the change arrives. Call cancel to
// unregister; it closes the channel.
//
// Run never waits for a watcher: each watcher has its own queue, drained by
// its own goroutine into the channel. A watcher is dropped when it falls
// behind: when its queue would pass Options.WatchBacklog changes, or when
// all watchers together hold Options.WatchBudget and it holds watchFloor or
// more (one that keeps up holds fewer, and is never dropped for the
// budget). A dropped watcher's queue is let go at once; its channel gets one
// last Change with Behind set, then closes, so a stuck reader costs bounded
// memory and learns it missed changes (it should read the history again and
// watch anew). Without the budget, one client's 3 200 subscriptions of an
// address it floods queued up to 10 000 notes each.
func (v *History) Watch(address string) (<-chan readmodel.Change, func()) {
	w := &watcher{
		hub:       &v.hub,
		address:   address,
		backlog:   v.backlog,
		signal:    make(chan struct{}, 1),
		done:      make(chan struct{}),
		cancelled: make(chan struct{}),
		out:       make(chan readmodel.Change),
	}
	if !v.hub.add(w) {
		close(w.out) // closed views: nothing will ever arrive
		return w.out, func() {}
	}
	go w.pump()
	var once sync.Once
	return w.out, func() {
		once.Do(func() {
			v.hub.remove(w)
			close(w.cancelled)
			w.stop()
		})
	}
}

// watchFloor is what a watcher may hold however full the budget: a reader
// that keeps up holds a batch's changes for a moment, rarely more.
const watchFloor = 64

// hub holds the watchers by address.
type hub struct {
	mu     sync.Mutex
	byAddr map[string]map[*watcher]struct{}
	closed bool
	budget int64        // see Options.WatchBudget
	queued atomic.Int64 // notes all watchers hold, queued or being handed on
}

func (h *hub) init(budget int) {
	h.byAddr = map[string]map[*watcher]struct{}{}
	h.budget = int64(budget)
}

func (h *hub) add(w *watcher) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	set := h.byAddr[w.address]
	if set == nil {
		set = map[*watcher]struct{}{}
		h.byAddr[w.address] = set
	}
	set[w] = struct{}{}
	return true
}

func (h *hub) remove(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(w)
}

func (h *hub) removeLocked(w *watcher) {
	set := h.byAddr[w.address]
	delete(set, w)
	if len(set) == 0 {
		delete(h.byAddr, w.address)
	}
}

// count is the number of registered watchers (for tests and metrics).
func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, set := range h.byAddr {
		n += len(set)
	}
	return n
}

// publish queues each address's changes on its watchers; it never blocks on
// a reader.
func (h *hub) publish(changes map[string][]readmodel.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for address, cs := range changes {
		for w := range h.byAddr[address] {
			full := h.queued.Load()+int64(len(cs)) > h.budget
			if !w.enqueue(cs, full) {
				h.removeLocked(w)
				w.stop()
			}
		}
	}
}

// closeAll stops every watcher; later Watch calls get a closed channel.
func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, set := range h.byAddr {
		for w := range set {
			w.stop()
		}
	}
	h.byAddr = map[string]map[*watcher]struct{}{}
}

// watcher is one Watch call: a guarded queue and the goroutine that drains it.
type watcher struct {
	hub     *hub
	address string
	backlog int

	mu     sync.Mutex
	queue  []readmodel.Change
	held   int  // changes queued or taken by pump and not yet handed on
	behind bool // dropped for falling behind: pump says so before closing

	signal    chan struct{} // capacity 1: "the queue is not empty"
	done      chan struct{} // closed by stop
	cancelled chan struct{} // closed by the reader's cancel
	stopOnce  sync.Once
	out       chan readmodel.Change
}

// enqueue adds changes; it reports false, and marks the watcher behind,
// when its backlog would overflow, or when the hub's budget is full and it
// already holds watchFloor changes or more.
func (w *watcher) enqueue(cs []readmodel.Change, full bool) bool {
	w.mu.Lock()
	if w.held+len(cs) > w.backlog || (full && w.held >= watchFloor) {
		w.queue = nil
		w.behind = true
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, cs...)
	w.held += len(cs)
	w.mu.Unlock()
	w.hub.queued.Add(int64(len(cs)))
	select {
	case w.signal <- struct{}{}:
	default: // already signalled
	}
	return true
}

func (w *watcher) stop() { w.stopOnce.Do(func() { close(w.done) }) }

// pump moves queued changes to the reader until stopped, then closes out
// (after a last Behind change if the watcher was dropped for falling
// behind and the reader has not cancelled). What it still holds then is
// given back to the hub's budget.
func (w *watcher) pump() {
	defer close(w.out)
	defer func() {
		w.mu.Lock()
		n, behind := w.held, w.behind
		w.queue, w.held = nil, 0
		w.mu.Unlock()
		w.hub.queued.Add(-int64(n))
		if behind {
			select {
			case w.out <- readmodel.Change{Behind: true}:
			case <-w.cancelled:
			}
		}
	}()
	for {
		w.mu.Lock()
		pending := w.queue
		w.queue = nil
		w.mu.Unlock()
		for i, c := range pending {
			select {
			case w.out <- c:
				pending[i] = readmodel.Change{} // let its id go
				w.mu.Lock()
				w.held--
				w.mu.Unlock()
				w.hub.queued.Add(-1)
			case <-w.done:
				return
			}
		}
		select {
		case <-w.signal:
		case <-w.done:
			return
		}
	}
}
