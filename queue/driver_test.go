package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
)

// fakeQueue is the queue view, the recorder and the forwarder at once:
// what the driver records changes what it reads next, as the views do.
type fakeQueue struct {
	mu       sync.Mutex
	entries  map[string]*readmodel.QueueEntry
	attempts int
	answer   func(id string, try int) int // the local status of the try-th attempt
	hold     time.Duration                // how long the local process takes
	commit   time.Duration                // how long recording an attempt takes

	out, maxOut int
	reads       int // reads of an Endpoint's due deliveries
	rowsRead    int // the deliveries they returned
	mostAsked   int // the largest limit one of them asked for
	started     []time.Time
	delivered   []string // in the order the local process answered 2xx
	forwarded   []string // in the order the attempts were sent
	version     uint64   // moved by every change the driver records
	changed     chan struct{}
	walks       int // walks of the Endpoints (DueEndpoints)
	lives       int // reads of whether anything is queued or in flight
}

func newFakeQueue(n int, answer func(string, int) int) *fakeQueue {
	q := &fakeQueue{entries: map[string]*readmodel.QueueEntry{}, answer: answer, changed: make(chan struct{}, 1)}
	for i := range n {
		id := fmt.Sprintf("d%03d", i)
		q.entries[id] = &readmodel.QueueEntry{DeliveryID: id, EndpointID: "ep", AccountID: "acc", Seq: int64(i),
			Since: time.Now(), State: readmodel.QueueQueued, NextAt: time.Now()}
	}
	return q
}

// due tells a delivery the view reads as due at now.
func due(e *readmodel.QueueEntry, now, orphan time.Time) bool {
	return e.State == readmodel.QueueQueued && !e.NextAt.After(now) ||
		e.State == readmodel.QueueInFlight && !e.InFlightAt.IsZero() && e.InFlightAt.Before(orphan)
}

func (q *fakeQueue) DueEndpoints(_ context.Context, now, orphan time.Time, after string, limit int) (dueIDs, orphaned []string, last string, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.walks++
	queued, isDue := map[string]bool{}, map[string]bool{}
	for _, e := range q.entries {
		if e.State == readmodel.QueueQueued && e.EndpointID > after {
			queued[e.EndpointID] = true
			if due(e, now, orphan) {
				isDue[e.EndpointID] = true
			}
		}
	}
	ids := slices.Sorted(maps.Keys(queued))
	if len(ids) >= limit {
		ids, last = ids[:limit], ids[limit-1]
	}
	for _, id := range ids {
		if isDue[id] {
			dueIDs = append(dueIDs, id)
		}
	}
	return dueIDs, nil, last, nil
}

func (q *fakeQueue) DueOf(_ context.Context, endpointID string, now, orphan time.Time, afterSeq int64, limit int) ([]readmodel.QueueEntry, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reads++
	var out []readmodel.QueueEntry
	for _, e := range q.entries {
		if e.EndpointID == endpointID && e.Seq > afterSeq && due(e, now, orphan) {
			out = append(out, *e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	out = out[:min(len(out), limit)]
	q.rowsRead += len(out)
	q.mostAsked = max(q.mostAsked, limit)
	return out, nil
}

func (q *fakeQueue) QueueHead(_ context.Context, endpointID string) (readmodel.QueueEntry, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var head *readmodel.QueueEntry
	for _, e := range q.entries {
		if e.EndpointID == endpointID && (e.State == readmodel.QueueQueued || e.State == readmodel.QueueInFlight) && (head == nil || e.Seq < head.Seq) {
			head = e
		}
	}
	if head == nil {
		return readmodel.QueueEntry{}, false, nil
	}
	return *head, true, nil
}

func (q *fakeQueue) QueueVersion() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.version
}

// moved moves the version and tells the driver, as the views do; q.mu is
// held.
func (q *fakeQueue) moved() {
	q.version++
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

func (q *fakeQueue) QueueChanged() <-chan struct{} { return q.changed }

func (q *fakeQueue) QueueLive(context.Context) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lives++
	for _, e := range q.entries {
		if e.State == readmodel.QueueQueued || e.State == readmodel.QueueInFlight {
			return true, nil
		}
	}
	return false, nil
}

// add queues a delivery as an event applied to the view would.
func (q *fakeQueue) add(e readmodel.QueueEntry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.entries[e.DeliveryID] = &e
	q.moved()
}

func (q *fakeQueue) WaitFor(context.Context, uint64) error { return nil }
func (q *fakeQueue) Now() time.Time                        { return time.Now() }
func (q *fakeQueue) Connected(string) int                  { return 1 }

func (q *fakeQueue) RequestQueued(_ context.Context, id string, t record.QueuedTarget) (domain.ForwardCommand, error) {
	time.Sleep(q.commit)
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.entries[id]
	e.State, e.Tries = readmodel.QueueInFlight, e.Tries+1
	q.moved()
	q.attempts++
	return domain.ForwardCommand{DeliveryID: id, AttemptID: fmt.Sprintf("%s-%d", id, e.Tries), EndpointID: t.EndpointID}, nil
}

func (q *fakeQueue) Forward(_ context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error) {
	q.mu.Lock()
	q.out++
	q.maxOut = max(q.maxOut, q.out)
	q.started = append(q.started, time.Now())
	q.forwarded = append(q.forwarded, cmd.DeliveryID)
	try := q.entries[cmd.DeliveryID].Tries
	q.mu.Unlock()
	time.Sleep(q.hold)
	status := q.answer(cmd.DeliveryID, try)
	q.mu.Lock()
	q.out--
	if status < 300 {
		q.delivered = append(q.delivered, cmd.DeliveryID)
	}
	q.mu.Unlock()
	return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: status}, nil
}

func (q *fakeQueue) RecordQueueDecision(_ context.Context, id string, ev domain.Event) (uint64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.moved()
	e := q.entries[id]
	switch ev := ev.(type) {
	case domain.DeliveryDelivered:
		e.State = readmodel.QueueDone
	case domain.DeliveryDead:
		e.State, e.Failures, e.Reason = readmodel.QueueDead, ev.Failures, ev.Reason
	case domain.DeliveryRetryScheduled:
		next, _ := time.Parse(time.RFC3339Nano, ev.NextAt)
		e.State, e.Failures, e.NextAt, e.Reason = readmodel.QueueQueued, ev.Failures, next, ev.Reason
	}
	return 1, nil
}

func (q *fakeQueue) RecordOutcome(context.Context, domain.ForwardCommand, domain.ForwardOutcome) (uint64, error) {
	return 0, nil
}

func (q *fakeQueue) RecordedOutcome(context.Context, string, string) (domain.ForwardOutcome, error) {
	return domain.ForwardOutcome{}, domain.ErrNotFound
}

func (q *fakeQueue) count(state string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, e := range q.entries {
		if e.State == state {
			n++
		}
	}
	return n
}

// run drives q with policy p until cond holds.
func run(t *testing.T, q *fakeQueue, p domain.QueuePolicy, cond func() bool) {
	t.Helper()
	ep := readmodel.Endpoint{ID: "abcdefghijklmnop", AccountID: "acc", Name: "q", Mode: domain.ModeQueue, Queue: &p}
	d := New(Config{Views: q, Recorder: q, Forwarder: q, Poll: 5 * time.Millisecond,
		Endpoints: func(context.Context, string) (readmodel.Endpoint, error) { return ep, nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up: %d delivered, %d dead, %d attempts", q.count(readmodel.QueueDone), q.count(readmodel.QueueDead), q.attempts)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInFlightBound(t *testing.T) {
	q := newFakeQueue(40, func(string, int) int { return 200 })
	q.hold = 10 * time.Millisecond
	run(t, q, domain.QueuePolicy{MaxInFlight: 3, RatePerSecond: 1000}, func() bool { return q.count(readmodel.QueueDone) == 40 })
	if q.maxOut > 3 || q.maxOut < 2 {
		t.Fatalf("%d attempts out at once, want at most 3 (and more than one: unordered)", q.maxOut)
	}
	if q.attempts != 40 {
		t.Fatalf("%d attempts for 40 deliveries answered 200", q.attempts)
	}
}

func TestStrictOrderBlocksOnTheHead(t *testing.T) {
	// The head fails twice: nothing behind it goes before it is delivered.
	q := newFakeQueue(10, func(id string, try int) int {
		if id == "d000" && try <= 2 {
			return 503
		}
		return 200
	})
	run(t, q, domain.QueuePolicy{Ordering: domain.OrderStrict, MaxInFlight: 10, RatePerSecond: 1000, BackoffBaseMs: 100},
		func() bool { return q.count(readmodel.QueueDone) == 10 })
	want := []string{"d000", "d001", "d002", "d003", "d004", "d005", "d006", "d007", "d008", "d009"}
	if !slices.Equal(q.delivered, want) || q.maxOut != 1 {
		t.Fatalf("delivered %v with %d at once, want %v one at a time", q.delivered, q.maxOut, want)
	}
	if q.attempts != 12 {
		t.Fatalf("%d attempts, want 12 (the head three times)", q.attempts)
	}
}

func TestRateBound(t *testing.T) {
	q := newFakeQueue(30, func(string, int) int { return 200 })
	run(t, q, domain.QueuePolicy{MaxInFlight: 100, RatePerSecond: 10}, func() bool { return q.count(readmodel.QueueDone) >= 6 })
	q.mu.Lock()
	defer q.mu.Unlock()
	// 10 a second in bursts of 1: the k-th attempt starts at least
	// (k-1)/10 s after the first (a slow machine only spreads them more).
	for k, at := range q.started {
		if min := time.Duration(k-1) * 100 * time.Millisecond; k > 0 && at.Sub(q.started[0]) < min-10*time.Millisecond {
			t.Fatalf("attempt %d started %s after the first, want at least %s at 10/s", k+1, at.Sub(q.started[0]), min)
		}
	}
}

func TestDeadAfterMaxAttempts(t *testing.T) {
	q := newFakeQueue(3, func(string, int) int { return 500 })
	run(t, q, domain.QueuePolicy{MaxAttempts: 2, BackoffBaseMs: 100, RatePerSecond: 1000}, func() bool { return q.count(readmodel.QueueDead) == 3 })
	for _, e := range q.entries {
		if e.Failures != 2 || e.Reason != "dead after 2 attempts: last 500" {
			t.Fatalf("%s: %d failures, reason %q", e.DeliveryID, e.Failures, e.Reason)
		}
	}
	if q.attempts != 6 {
		t.Fatalf("%d attempts, want 2 each", q.attempts)
	}
}

// TestUnorderedSendsOldestFirst: several attempts in flight at once still
// leave in receipt order (goroutines started together would run in any).
func TestUnorderedSendsOldestFirst(t *testing.T) {
	q := newFakeQueue(20, func(string, int) int { return 200 })
	// A commit well past a goroutine's start, even on a loaded machine:
	// what orders the sends is one attempt's commit between two of them.
	q.hold, q.commit = 50*time.Millisecond, 10*time.Millisecond
	run(t, q, domain.QueuePolicy{MaxInFlight: 20, RatePerSecond: 1000}, func() bool { return q.count(readmodel.QueueDone) == 20 })
	q.mu.Lock()
	defer q.mu.Unlock()
	if !slices.IsSortedFunc(q.forwarded, strings.Compare) || q.maxOut < 2 {
		t.Fatalf("sent %v with %d at once, want receipt order with several in flight", q.forwarded, q.maxOut)
	}
}

// budget is a body budget of total bytes with no share per key.
type budget struct {
	mu          sync.Mutex
	total, used int64
	most        int64 // the most ever held
	refused     int
}

func (b *budget) Reserve(_ string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.total {
		b.refused++
		return false
	}
	b.used += n
	b.most = max(b.most, b.used)
	return true
}

func (b *budget) Release(_ string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

func (b *budget) Share() int64 { return b.total }

// TestAttemptsHoldTheirBodiesWithinTheBudget: 20 deliveries of 100 bytes
// each, maxInFlight 20, a local process that takes 50 ms, a body budget of
// 300 bytes: at most three attempts are out at once, each holding its
// request's size until the Hub is done with it; the others wait for a
// later tick and spend no attempt, and all are delivered once.
func TestAttemptsHoldTheirBodiesWithinTheBudget(t *testing.T) {
	q := newFakeQueue(20, func(string, int) int { return 200 })
	for _, e := range q.entries {
		e.Bytes = 100
	}
	q.hold = 50 * time.Millisecond
	b := &budget{total: 300}
	ep := readmodel.Endpoint{ID: "abcdefghijklmnop", AccountID: "acc", Name: "q", Mode: domain.ModeQueue,
		Queue: &domain.QueuePolicy{MaxInFlight: 20, RatePerSecond: 1000}}
	d := New(Config{Views: q, Recorder: q, Forwarder: q, Poll: 5 * time.Millisecond, Bodies: b,
		Endpoints: func(context.Context, string) (readmodel.Endpoint, error) { return ep, nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for q.count(readmodel.QueueDone) < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	q.mu.Lock()
	defer q.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(q.delivered); n != 20 || q.attempts != 20 {
		t.Fatalf("%d delivered in %d attempts, want 20 in 20", n, q.attempts)
	}
	if q.maxOut > 3 || b.most > 300 || b.used != 0 {
		t.Fatalf("%d attempts out at once holding at most %d bytes (%d still held), want at most 3 within 300, none held after", q.maxOut, b.most, b.used)
	}
	if b.refused == 0 {
		t.Fatal("the budget never refused an attempt: the test did not reach its bound")
	}
}

// hourlyDriver is a driver polling an empty queue once an hour: what it
// reads before is read for another reason.
func hourlyDriver() (*fakeQueue, *Driver) {
	q := newFakeQueue(0, func(string, int) int { return 200 })
	ep := readmodel.Endpoint{ID: "ep", AccountID: "acc", Name: "q", Mode: domain.ModeQueue,
		Queue: &domain.QueuePolicy{MaxInFlight: 1, RatePerSecond: 1000}}
	return q, New(Config{Views: q, Recorder: q, Forwarder: q, Poll: time.Hour,
		Endpoints: func(context.Context, string) (readmodel.Endpoint, error) { return ep, nil }})
}

// walked counts the walks of the Endpoints so far.
func (q *fakeQueue) walked() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.walks
}

// livesRead counts the reads of whether anything is queued or in flight.
func (q *fakeQueue) livesRead() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lives
}

// TestIdleDriverReadsNothingUntilTheQueueMoves: once a tick finds nothing
// queued or in flight, ticks read nothing while the view's queue version
// stays; a delivery queued after moves it, and it is sent. A delivery
// waiting for its retry keeps the driver reading (time alone makes it
// due).
func TestIdleDriverReadsNothingUntilTheQueueMoves(t *testing.T) {
	q, d := hourlyDriver()
	ctx := t.Context()
	walks := q.walked
	tick := func() {
		t.Helper()
		if err := d.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}

	for range 5 {
		tick()
	}
	if n := walks(); n != 1 {
		t.Fatalf("%d walks of an empty queue in 5 ticks, want 1", n)
	}

	q.add(readmodel.QueueEntry{DeliveryID: "d1", EndpointID: "ep", AccountID: "acc", Seq: 1,
		Since: time.Now(), State: readmodel.QueueQueued, NextAt: time.Now()})
	tick()
	d.wg.Wait()
	if got := q.count(readmodel.QueueDone); got != 1 || walks() != 2 {
		t.Fatalf("after a delivery was queued: %d delivered, %d walks; want 1 and 2", got, walks())
	}
	tick() // the view moved with the attempt: one more walk finds it empty
	tick()
	if n := walks(); n != 3 {
		t.Fatalf("%d walks, want 3 (one after the delivery, then rest)", n)
	}

	// Queued for later: not due now, but live, so every tick walks; whether
	// it is live is read once, not again while the view stays.
	q.add(readmodel.QueueEntry{DeliveryID: "d2", EndpointID: "ep", AccountID: "acc", Seq: 2,
		Since: time.Now(), State: readmodel.QueueQueued, NextAt: time.Now().Add(time.Hour)})
	lives := q.livesRead()
	for range 3 {
		tick()
	}
	lives = q.livesRead() - lives
	if n := walks(); n != 6 || lives != 1 {
		t.Fatalf("with a delivery waiting for its time: %d walks, %d reads of liveness; want 6 (one a tick) and 1", n, lives)
	}
}

// TestRestingDriverSendsAtOnceWhenTheQueueMoves: a driver resting on an
// empty queue reads the view as soon as it moves, not at its next poll
// (an hour here): a delivery queued then is sent at once.
func TestRestingDriverSendsAtOnceWhenTheQueueMoves(t *testing.T) {
	q, d := hourlyDriver()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if q.walked() == 0 {
			return errors.New("the driver never read the view")
		}
		return nil
	})
	q.add(readmodel.QueueEntry{DeliveryID: "d1", EndpointID: "ep", AccountID: "acc", Seq: 1,
		Since: time.Now(), State: readmodel.QueueQueued, NextAt: time.Now()})
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if q.count(readmodel.QueueDone) == 0 {
			return fmt.Errorf("a delivery queued beside a resting driver not sent (poll: an hour; %d walks)", q.walked())
		}
		return nil
	})
}
