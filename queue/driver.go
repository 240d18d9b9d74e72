package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
)

// Views is what the driver reads of the queue view.
type Views interface {
	// DueEndpoints walks at most limit Endpoints with queued deliveries
	// from the first after after, and returns those with one due, those
	// with an attempt left open since before orphanBefore, and the last
	// Endpoint walked ("" at the end of the walk).
	DueEndpoints(ctx context.Context, now, orphanBefore time.Time, after string, limit int) (due, orphaned []string, last string, err error)
	// DueOf returns up to limit of an Endpoint's due deliveries after the
	// receipt position afterSeq, oldest first, with their sizes.
	DueOf(ctx context.Context, endpointID string, now, orphanBefore time.Time, afterSeq int64, limit int) ([]readmodel.QueueEntry, error)
	QueueHead(ctx context.Context, endpointID string) (readmodel.QueueEntry, bool, error)
	WaitFor(ctx context.Context, position uint64) error
	// QueueVersion moves whenever the view's queue changes, and
	// QueueChanged then receives; QueueLive tells whether any delivery is
	// queued or in flight. Together they let an idle driver read nothing
	// until something is queued, and read at once when it is.
	QueueVersion() uint64
	QueueChanged() <-chan struct{}
	QueueLive(ctx context.Context) (bool, error)
}

// Bodies is the memory budget the forwarded bodies share
// (ingress.BodyBudget): an attempt holds its request's size of it, under
// its account's key, from before it is recorded until the Hub is done
// with it.
type Bodies interface {
	Reserve(key string, n int64) bool
	Release(key string, n int64)
	// Share is the most one key may hold at once.
	Share() int64
}

// Recorder records the attempts and the decisions.
type Recorder interface {
	RequestQueued(ctx context.Context, deliveryID string, t record.QueuedTarget) (domain.ForwardCommand, error)
	RecordQueueDecision(ctx context.Context, deliveryID string, ev domain.Event) (uint64, error)
	RecordOutcome(ctx context.Context, cmd domain.ForwardCommand, out domain.ForwardOutcome) (uint64, error)
	RecordedOutcome(ctx context.Context, deliveryID, attemptID string) (domain.ForwardOutcome, error)
	Now() time.Time
}

// Forwarder sends an attempt through a listener (the tunnel's Hub) and
// tells whether an Endpoint has one, on any node.
type Forwarder interface {
	Forward(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error)
	Connected(endpointID string) int
}

// Endpoints reads an Endpoint's row from the views (its owner, mode,
// response capture and queue policy): one indexed row, however long its
// stream in the log; domain.ErrNotFound when there is none or it is
// deleted.
type Endpoints func(ctx context.Context, id string) (readmodel.Endpoint, error)

// Config wires a Driver.
type Config struct {
	Views     Views
	Recorder  Recorder
	Forwarder Forwarder
	Endpoints Endpoints
	// Leader tells whether this node drives the queues now; nil: always
	// (one process).
	Leader func() bool
	// Poll is how often an idle driver reads the view; default 100 ms.
	Poll time.Duration
	// Batch bounds the due deliveries one tick reads, over all Endpoints;
	// default 256.
	Batch int
	// Round bounds the Endpoints one tick walks to find those with due
	// deliveries; the next tick goes on after the last one served.
	// Default 256.
	Round int
	// Bodies is the budget an attempt's request is held within while it is
	// out; nil: none (tests).
	Bodies Bodies
	// AttemptBytes is what an attempt is taken to hold when the view no
	// longer knows its request's size; default 320 KiB (the default
	// capture cap and header bytes).
	AttemptBytes int64
	// ForwardTimeout is how long the local process may take; default 30 s.
	ForwardTimeout time.Duration
	// OrphanAfter is how long an attempt may stay in flight without a
	// decision before the driver sends it again, marked a possible
	// duplicate (another node drove it and went, or a decision was lost);
	// default ForwardTimeout + 15 s.
	OrphanAfter time.Duration
	Logger      *slog.Logger
}

// Driver drives every QUEUE Endpoint's queue of this relay.
type Driver struct {
	cfg  Config
	log  *slog.Logger
	wake chan struct{}

	mu       sync.Mutex
	inflight map[string]bool // deliveries with an attempt out from this driver
	// settled holds when this driver last finished work on a delivery: a
	// read of the view from before then may show it as it was before.
	settled   map[string]time.Time
	endpoints map[string]*endpointState
	wg        sync.WaitGroup
	// cursor is where the next tick's walk of the Endpoints starts: after
	// the last one served (only Tick uses it).
	cursor string
	// seen is whether anything was queued or in flight (live) at the view's
	// queue version a tick read it (only Tick and Run use it). Only a change
	// of the view changes that: while the version stays, ticks read nothing
	// if it was not (the driver rests), and do not ask again if it was.
	seen struct {
		version uint64
		ok      bool
		live    bool
	}
}

// endpointState is the driver's knowledge of one Endpoint: its settings
// (read again after a second) and what it has in flight.
type endpointState struct {
	ep       *readmodel.Endpoint // nil: not found
	policy   domain.QueuePolicy
	loadedAt time.Time
	inflight int
	limiter  *rate.Limiter
	rate     int
	// probeAfter is when an Endpoint that cannot send now (no listener,
	// out of rate, no longer in QUEUE mode) next reads its oldest due
	// delivery, to give it up once past its age.
	probeAfter time.Time
}

// settingsTTL is how long the driver trusts an Endpoint's settings read
// from the views: a change applies within it once the views hold it.
const settingsTTL = time.Second

// New makes a Driver.
func New(cfg Config) *Driver {
	if cfg.Poll <= 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Round <= 0 {
		cfg.Round = 256
	}
	if cfg.AttemptBytes <= 0 {
		cfg.AttemptBytes = 320 << 10
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = 30 * time.Second
	}
	if cfg.OrphanAfter <= 0 {
		cfg.OrphanAfter = cfg.ForwardTimeout + 15*time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{cfg: cfg, log: log, wake: make(chan struct{}, 1), inflight: map[string]bool{}, settled: map[string]time.Time{}, endpoints: map[string]*endpointState{}}
}

// Run drives the queues until ctx ends, then waits for the attempts out.
func (d *Driver) Run(ctx context.Context) error {
	defer d.wg.Wait()
	t := time.NewTimer(0)
	defer t.Stop()
	changed := d.cfg.Views.QueueChanged()
	leading := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-d.wake:
		case <-changed:
			if !d.resting() {
				// A live queue is read on its poll and as attempts end;
				// only a resting one is read at once when something is
				// queued, so its first attempt does not wait for the poll.
				continue
			}
		}
		leads := d.cfg.Leader == nil || d.cfg.Leader()
		if leads != leading && d.cfg.Leader != nil {
			leading = leads
			d.log.InfoContext(ctx, "queue: this node drives the queues", "driving", leads)
		}
		if leads {
			if err := d.Tick(ctx); err != nil && ctx.Err() == nil {
				d.log.WarnContext(ctx, "queue: read due deliveries", "error", err)
			}
		}
		t.Reset(d.cfg.Poll)
	}
}

// Wake asks for a read of the view now (a delivery was queued, an attempt
// ended).
func (d *Driver) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Tick reads the due deliveries once and starts the attempts the bounds
// allow. It reads Endpoint by Endpoint, in turn, and of each only what it
// can take now (its free in-flight slots and rate, or its oldest due
// delivery to check its age), so one Endpoint's due deliveries, however
// many and whatever holds them, never keep another's from being read.
func (d *Driver) Tick(ctx context.Context) error {
	// Read before the walk: a change landing during it moves the version,
	// and the next tick walks again.
	version := d.cfg.Views.QueueVersion()
	if d.seen.ok && d.seen.version != version {
		d.seen.ok = false
	}
	if d.resting() {
		return nil // nothing queued or in flight, and the view has not moved
	}
	now := d.cfg.Recorder.Now()
	read := time.Now()
	orphanBefore := now.Add(-d.cfg.OrphanAfter)
	due, orphaned, last, err := d.cfg.Views.DueEndpoints(ctx, now, orphanBefore, d.cursor, d.cfg.Round)
	if err != nil {
		return err
	}
	if !d.seen.ok && len(due) == 0 && len(orphaned) == 0 && last == "" && d.cursor == "" && !d.working() {
		// An idle relay would otherwise walk the view every Poll for
		// nothing (the walk and the orphans' read, ten times a second).
		live, err := d.cfg.Views.QueueLive(ctx)
		if err != nil {
			return err
		}
		d.seen.version, d.seen.ok, d.seen.live = version, true, live
	}
	d.forget(read.Add(-time.Minute))
	rows := d.cfg.Batch
	next := last
	for i, id := range append(due, orphaned...) {
		if rows <= 0 {
			if i < len(due) && i > 0 {
				next = due[i-1] // the rest of the walk goes first next tick
			}
			break
		}
		n, err := d.serve(ctx, id, now, orphanBefore, read, rows)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			d.log.WarnContext(ctx, "queue: read an Endpoint's due deliveries", "endpoint_id", id, "error", err)
		}
		rows -= n
	}
	d.cursor = next
	return nil
}

// serve starts what one Endpoint's due deliveries allow now, reading at
// most rows of them, and returns how many it read.
func (d *Driver) serve(ctx context.Context, id string, now, orphanBefore, read time.Time, rows int) (int, error) {
	st, err := d.endpoint(ctx, id, now)
	if err != nil {
		d.log.WarnContext(ctx, "queue: read endpoint", "endpoint_id", id, "error", err)
		return 0, nil
	}
	if st == nil {
		return 0, nil // deleted: the view drops its queue
	}
	p := st.policy
	age := time.Duration(p.MaxAgeMs) * time.Millisecond
	slots := p.MaxInFlight - d.inFlight(st)
	if slots <= 0 {
		return 0, nil
	}
	// An Endpoint no longer in QUEUE mode keeps its queue unsent until it
	// is switched back; its deliveries still age out.
	queueing := st.usable()
	sendable := queueing && (d.cfg.Forwarder.Connected(id) > 0 || p.Counts(domain.FailNoListener))
	n := slots
	if tokens := st.limiter.TokensAt(time.Now()); sendable && tokens >= 1 {
		n = min(n, int(tokens))
		if p.Ordering == domain.OrderStrict {
			n = 1 // only the head may go
		}
	} else {
		// Nothing can be sent now: only an age limit passed changes
		// something, and the oldest due delivery tells it.
		if read.Before(st.probeAfter) {
			return 0, nil
		}
		sendable, n = false, 1
	}
	used, after := 0, int64(-1)
	// turnAfter orders the attempts this tick starts: recorded one after the
	// other, in receipt order, so they reach the local process oldest first
	// even when several are in flight (goroutines started together run in
	// no set order).
	var turnAfter <-chan struct{}
	for n = min(n, rows); n > 0; n = min(slots, rows-used) {
		batch, err := d.cfg.Views.DueOf(ctx, id, now, orphanBefore, after, n)
		if err != nil {
			return used, err
		}
		used += len(batch)
		for _, e := range batch {
			after = e.Seq
			if d.busy(e.DeliveryID, read) {
				continue // this driver works on it, or the view does not show its end yet
			}
			if st.ep.AccountID != e.AccountID || st.ep.Deleted {
				return used, nil // deleted: the view drops its queue
			}
			if now.Sub(e.Since) > age {
				why := fmt.Sprintf("dead: older than %s before delivery", age)
				if !queueing {
					why += " (the Endpoint is no longer in QUEUE mode)"
				}
				d.start(ctx, e, st, func(ctx context.Context) { d.dead(ctx, e, "", e.Failures, why) })
				slots--
				continue
			}
			if !sendable {
				d.mu.Lock()
				st.probeAfter = read.Add(min(settingsTTL, e.Since.Add(age).Sub(now)))
				d.mu.Unlock()
				return used, nil
			}
			if p.Ordering == domain.OrderStrict {
				h, found, err := d.cfg.Views.QueueHead(ctx, id)
				if err != nil {
					return used, err
				}
				if !found || h.DeliveryID != e.DeliveryID || d.inFlight(st) > 0 {
					return used, nil
				}
			}
			if d.inFlight(st) >= p.MaxInFlight {
				return used, nil
			}
			release, ok := d.reserve(e)
			if !ok {
				return used, nil // the body budget is full: the delivery waits, spending no attempt
			}
			if !st.limiter.Allow() {
				release()
				return used, nil
			}
			duplicate := e.Duplicate || e.State == readmodel.QueueInFlight
			mine := make(chan struct{})
			t := turn{after: turnAfter, done: mine}
			turnAfter = mine
			d.start(ctx, e, st, func(ctx context.Context) { d.attempt(ctx, e, st, duplicate, t, release) })
			slots--
		}
		if len(batch) < n || sendable {
			return used, nil
		}
		// Every delivery read was past its age: the next ones may be too.
	}
	return used, nil
}

// reserve takes what an attempt of e holds of the body budget (its
// request's size, within one key's share) under its account's key, and
// returns what gives it back (once, however often called).
func (d *Driver) reserve(e readmodel.QueueEntry) (release func(), ok bool) {
	b := d.cfg.Bodies
	if b == nil {
		return func() {}, true
	}
	key, n := "queue "+e.AccountID, e.Bytes
	if n <= 0 {
		n = d.cfg.AttemptBytes
	}
	n = min(n, b.Share())
	if !b.Reserve(key, n) {
		return nil, false
	}
	return sync.OnceFunc(func() { b.Release(key, n) }), true
}

// busy tells a delivery this driver works on, or finished work on after
// read (the view read then may not show it).
func (d *Driver) busy(deliveryID string, read time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inflight[deliveryID] || !d.settled[deliveryID].Before(read)
}

// forget drops what busy needs no more: work finished before the oldest
// read still in use.
func (d *Driver) forget(before time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, at := range d.settled {
		if at.Before(before) {
			delete(d.settled, id)
		}
	}
}

// resting tells that the last read found nothing queued or in flight,
// and the view has not moved since as far as Tick knows.
func (d *Driver) resting() bool { return d.seen.ok && !d.seen.live }

// working tells whether this driver has work out on any delivery.
func (d *Driver) working() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.inflight) > 0
}

func (d *Driver) inFlight(st *endpointState) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return st.inflight
}

// start runs work for a delivery in its own goroutine, holding its
// Endpoint's in-flight slot until the decision is in the views.
func (d *Driver) start(ctx context.Context, e readmodel.QueueEntry, st *endpointState, work func(context.Context)) {
	d.mu.Lock()
	d.inflight[e.DeliveryID] = true
	st.inflight++
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		work(ctx)
		d.mu.Lock()
		delete(d.inflight, e.DeliveryID)
		d.settled[e.DeliveryID] = time.Now()
		st.inflight--
		d.mu.Unlock()
		d.Wake()
	}()
}

// endpoint returns the Endpoint's state, its settings read from the views
// at most settingsTTL ago; nil when it is not there.
func (d *Driver) endpoint(ctx context.Context, id string, now time.Time) (*endpointState, error) {
	d.mu.Lock()
	st, ok := d.endpoints[id]
	d.mu.Unlock()
	if ok && now.Sub(st.loadedAt) < settingsTTL {
		return st.found(), nil
	}
	row, err := d.cfg.Endpoints(ctx, id)
	var ep *readmodel.Endpoint
	switch {
	case errors.Is(err, domain.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("endpoint %s: %w", id, err)
	default:
		ep = &row
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if st == nil {
		st = &endpointState{}
		d.endpoints[id] = st
	}
	st.ep, st.loadedAt = ep, now
	if ep != nil {
		st.policy = ep.Queue.Effective()
		if st.limiter == nil || st.rate != st.policy.RatePerSecond {
			st.rate = st.policy.RatePerSecond
			st.limiter = rate.NewLimiter(rate.Limit(st.rate), max(1, st.rate/10))
		}
	}
	return st.found(), nil
}

func (st *endpointState) found() *endpointState {
	if st.ep == nil {
		return nil
	}
	return st
}

// usable tells an Endpoint in QUEUE mode: its queue is sent (a deleted
// one owns no delivery, see serve).
func (st *endpointState) usable() bool { return st.ep.Mode == domain.ModeQueue }
