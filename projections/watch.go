package projections

import (
	"sync"

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
// its own goroutine into the channel. The queue is unbounded up to
// Options.WatchBacklog changes; a watcher that falls further behind is
// dropped and its channel closed, so a stuck reader costs bounded memory and
// learns it missed changes (it should read the history again and watch anew).
func (v *History) Watch(address string) (<-chan readmodel.Change, func()) {
	w := &watcher{
		address: address,
		backlog: v.backlog,
		signal:  make(chan struct{}, 1),
		done:    make(chan struct{}),
		out:     make(chan readmodel.Change),
	}
	if !v.hub.add(w) {
		close(w.out) // closed views: nothing will ever arrive
		return w.out, func() {}
	}
	go w.pump()
	return w.out, func() {
		v.hub.remove(w)
		w.stop()
	}
}

// hub holds the watchers by address.
type hub struct {
	mu     sync.Mutex
	byAddr map[string]map[*watcher]struct{}
	closed bool
}

func (h *hub) init() { h.byAddr = map[string]map[*watcher]struct{}{} }

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
			if !w.enqueue(cs) {
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
	address string
	backlog int

	mu    sync.Mutex
	queue []readmodel.Change

	signal   chan struct{} // capacity 1: "the queue is not empty"
	done     chan struct{} // closed by stop
	stopOnce sync.Once
	out      chan readmodel.Change
}

// enqueue adds changes; it reports false when the backlog would overflow.
func (w *watcher) enqueue(cs []readmodel.Change) bool {
	w.mu.Lock()
	if len(w.queue)+len(cs) > w.backlog {
		w.queue = nil
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, cs...)
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default: // already signalled
	}
	return true
}

func (w *watcher) stop() { w.stopOnce.Do(func() { close(w.done) }) }

// pump moves queued changes to the reader until stopped, then closes out.
func (w *watcher) pump() {
	defer close(w.out)
	for {
		w.mu.Lock()
		pending := w.queue
		w.queue = nil
		w.mu.Unlock()
		for _, c := range pending {
			select {
			case w.out <- c:
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
