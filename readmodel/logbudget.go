package readmodel

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
)

// LogBudget bounds the bytes of the log that the reads of stored requests
// and answers made for one API answer (an HTTP response, or one message of
// a subscription) read: each attempt's response read by its position, and
// a delivery's request with its latest answer. Each such read is run
// through Read, which runs it only while the bytes read under the budget
// are below its limit and charges it what it read. One read's bounds
// (projections) hold per read; without a budget an operation of many
// aliases made one read each, each up to its own bounds.
//
// The reads under one budget run at once while their sizes fit in it:
// each reserves, before it reads, the most it may read (the size the views
// give for the events it reads), and starts beside the reads running only
// when the bytes read and reserved, its own included, are within the
// limit; otherwise it waits for a running read to settle, and starts alone
// once none runs (refused if the budget is spent by then). A read of
// unknown size (Unsized) runs alone. So the answer reads at most the limit
// and what the one read that crossed it read past it, however many reads
// gqlgen resolves at once, as when they ran one at a time; a read that
// reads more than it reserved passes the limit by the difference at most.
//
// The reads that wait start in the order they came: one that fits does not
// start while an earlier one waits, so a large read (or an Unsized one)
// is not kept waiting by smaller ones that came after it and keep fitting
// beside the reads running. This is golang.org/x/sync/semaphore.Weighted's
// queue; Weighted itself does not fit, as what its reads read stays spent,
// an Unsized read or one larger than what is left runs once none runs, and
// the reads waiting are refused once the budget is spent.
type LogBudget struct {
	limit int64

	mu       sync.Mutex
	spent    int64     // bytes read by the reads settled
	reserved int64     // sizes reserved by the reads running
	running  int       // reads running
	alone    bool      // the read running is Unsized
	waiters  list.List // of *logWaiter, in the order they came
}

// logWaiter is a read waiting to start.
type logWaiter struct {
	size int64
	// reserve is what it reserved once started, -1 when refused (the
	// budget spent); set before ready is closed.
	reserve int64
	ready   chan struct{}
}

// Unsized is the size of a read that does not know ahead how much of the
// log it reads: it runs alone.
const Unsized int64 = -1

// NewLogBudget is a budget of limit bytes of the log.
func NewLogBudget(limit int64) *LogBudget {
	return &LogBudget{limit: limit}
}

// Read runs read, a read of stored answers from the log that returns the
// bytes of the events it read, and charges them to the budget. size is the
// most read may read (Unsized when not known): it runs beside the reads
// running while the bytes read and reserved stay within the limit and no
// earlier read waits, else waits its turn. ok is false (and read not run)
// once the bytes read reach the limit; err is ctx's when it ends while the
// read waits. read must not itself read under b: it would wait for itself.
// On a nil budget read runs unbounded: the relay's own reads name none.
func (b *LogBudget) Read(ctx context.Context, size int64, read func() (int64, error)) (ok bool, err error) {
	if b == nil {
		_, err := read()
		return true, err
	}
	reserve, err := b.admit(ctx, size)
	if err != nil || reserve < 0 {
		return false, err
	}
	var n int64
	// Deferred so that a read that panics still gives back its room: the
	// reads waiting behind it would otherwise wait for their contexts.
	defer func() { b.settle(size, reserve, n) }()
	n, err = read()
	return true, err
}

// admit waits until a read of size may start and reserves it; reserve is
// what it reserved (-1: refused, the budget spent).
func (b *LogBudget) admit(ctx context.Context, size int64) (reserve int64, err error) {
	b.mu.Lock()
	if b.spent >= b.limit {
		b.mu.Unlock()
		return -1, nil
	}
	if b.waiters.Len() == 0 && b.fits(size) {
		reserve = b.start(size)
		b.mu.Unlock()
		return reserve, nil
	}
	w := &logWaiter{size: size, ready: make(chan struct{})}
	elem := b.waiters.PushBack(w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return w.reserve, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Started (or refused) as ctx ended: give back what it reserved,
		// which may let the reads behind it start.
		if w.reserve >= 0 {
			b.end(size, w.reserve, 0)
			b.wake()
		}
	default:
		head := b.waiters.Front() == elem
		b.waiters.Remove(elem)
		if head { // the next may fit where this one did not
			b.wake()
		}
	}
	return -1, fmt.Errorf("wait for room in the answer's log budget: %w", ctx.Err())
}

// fits says whether a read of size may start now, b.mu held.
func (b *LogBudget) fits(size int64) bool {
	return b.running == 0 || (size >= 0 && !b.alone && b.spent+b.reserved+size <= b.limit)
}

// start starts a read of size and returns what it reserved, b.mu held.
func (b *LogBudget) start(size int64) (reserve int64) {
	b.running++
	if size < 0 {
		b.alone = true
		return 0
	}
	b.reserved += size
	return size
}

// end ends a read of size that reserved reserve and read n bytes, b.mu
// held.
func (b *LogBudget) end(size, reserve, n int64) {
	b.running--
	b.reserved -= reserve
	if size < 0 {
		b.alone = false
	}
	b.spent += max(n, 0) // a negative count would give back what was read
}

// wake starts the reads waiting at the head of the queue while they fit,
// and refuses them all once the budget is spent, b.mu held. It stops at
// the first that does not fit: those behind it wait their turn.
func (b *LogBudget) wake() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*logWaiter)
		switch {
		case b.spent >= b.limit:
			w.reserve = -1
		case b.fits(w.size):
			w.reserve = b.start(w.size)
		default:
			return
		}
		b.waiters.Remove(e)
		close(w.ready)
	}
}

// settle ends a read that reserved reserve and read n bytes, and starts
// the reads waiting that now may.
func (b *LogBudget) settle(size, reserve, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.end(size, reserve, n)
	b.wake()
}

// Limit is the budget's limit in bytes of the log; Spent what its reads
// have read so far (those settled).
func (b *LogBudget) Limit() int64 { return b.limit }
func (b *LogBudget) Spent() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}

// NotReadLogBudget is AttemptResponse.NotRead of a response not read
// because the answer's LogBudget was spent.
const NotReadLogBudget = "not read: the stored requests and responses read for this answer already read its budget of the log"

// ErrLogBudget refuses a read of a delivery's request and latest answer
// once the answer's LogBudget is spent.
var ErrLogBudget = errors.New(NotReadLogBudget + "; ask for fewer deliveries' headers, bodies or responses in one query")

type logBudgetKey struct{}

// WithLogBudget returns ctx whose reads of stored answers are charged to b.
func WithLogBudget(ctx context.Context, b *LogBudget) context.Context {
	return context.WithValue(ctx, logBudgetKey{}, b)
}

// LogBudgetOf is the budget WithLogBudget set, nil for none.
func LogBudgetOf(ctx context.Context) *LogBudget {
	b, _ := ctx.Value(logBudgetKey{}).(*LogBudget)
	return b
}
