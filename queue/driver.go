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
	DueQueue(ctx context.Context, now, orphanBefore time.Time, limit int) ([]readmodel.QueueEntry, error)
	QueueHead(ctx context.Context, endpointID string) (readmodel.QueueEntry, bool, error)
	WaitFor(ctx context.Context, position uint64) error
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

// Endpoints loads an Endpoint from the log.
type Endpoints func(ctx context.Context, id string) (*domain.Endpoint, error)

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
	// Batch bounds the due deliveries one read returns; default 256.
	Batch int
	// ForwardTimeout is how long the local process may take; default 30 s.
	ForwardTimeout time.Duration
	// OrphanAfter is how long an attempt may stay in flight without a
	// decision before the driver sends it again, marked a possible
	// duplicate (another node drove it and went, or a decision was lost);
	// default ForwardTimeout + 15 s.
	OrphanAfter time.Duration
	Logger      *slog.Logger
	// MayStore tells whether an account may store more (false: it is at
	// its storage quota); an attempt for one that may not records its
	// answer without the body (not captured). nil: always.
	MayStore func(ctx context.Context, accountID string) bool
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
}

// endpointState is the driver's knowledge of one Endpoint: its settings
// (read again after a second) and what it has in flight.
type endpointState struct {
	ep       *domain.Endpoint
	policy   domain.QueuePolicy
	loadedAt time.Time
	inflight int
	limiter  *rate.Limiter
	rate     int
}

// settingsTTL is how long the driver trusts an Endpoint's settings read
// from the log: a change applies within it.
const settingsTTL = time.Second

// New makes a Driver.
func New(cfg Config) *Driver {
	if cfg.Poll <= 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
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
	leading := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-d.wake:
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
// allow.
func (d *Driver) Tick(ctx context.Context) error {
	now := d.cfg.Recorder.Now()
	read := time.Now()
	due, err := d.cfg.Views.DueQueue(ctx, now, now.Add(-d.cfg.OrphanAfter), d.cfg.Batch)
	if err != nil {
		return err
	}
	d.forget(read.Add(-time.Minute))
	heads := map[string]string{} // strict Endpoints: the delivery that may go
	// An Endpoint's attempts of one tick are recorded one after the other,
	// in receipt order, so they reach the local process oldest first even
	// when several are in flight (goroutines started together run in no
	// set order).
	turns := map[string]<-chan struct{}{}
	blocked := map[string]bool{} // Endpoints at a bound for this tick
	for _, e := range due {
		if blocked[e.EndpointID] || d.busy(e.DeliveryID, read) {
			continue
		}
		st, err := d.endpoint(ctx, e.EndpointID, e.AccountID, now)
		if err != nil {
			d.log.WarnContext(ctx, "queue: read endpoint", "endpoint_id", e.EndpointID, "error", err)
			blocked[e.EndpointID] = true
			continue
		}
		if st == nil {
			blocked[e.EndpointID] = true // deleted, or no longer in QUEUE mode: its queue waits
			continue
		}
		p := st.policy
		if age := time.Duration(p.MaxAgeMs) * time.Millisecond; now.Sub(e.Since) > age {
			d.start(ctx, e, st, func(ctx context.Context) {
				d.dead(ctx, e, "", e.Failures, fmt.Sprintf("dead: older than %s before delivery", age))
			})
			continue
		}
		if p.Ordering == domain.OrderStrict {
			head, ok := heads[e.EndpointID]
			if !ok {
				h, found, err := d.cfg.Views.QueueHead(ctx, e.EndpointID)
				if err != nil {
					return err
				}
				head = ""
				if found {
					head = h.DeliveryID
				}
				heads[e.EndpointID] = head
			}
			if head != e.DeliveryID || d.inFlight(st) > 0 {
				blocked[e.EndpointID] = true
				continue
			}
		}
		if d.inFlight(st) >= p.MaxInFlight {
			blocked[e.EndpointID] = true
			continue
		}
		if d.cfg.Forwarder.Connected(e.EndpointID) == 0 && !p.Counts(domain.FailNoListener) {
			blocked[e.EndpointID] = true // waits for a listener, spending no attempt
			continue
		}
		if !st.limiter.Allow() {
			blocked[e.EndpointID] = true
			continue
		}
		duplicate := e.Duplicate || e.State == readmodel.QueueInFlight
		after, mine := turns[e.EndpointID], make(chan struct{})
		turns[e.EndpointID] = mine
		d.start(ctx, e, st, func(ctx context.Context) { d.attempt(ctx, e, st, duplicate, turn{after: after, done: mine}) })
	}
	return nil
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

// endpoint returns the Endpoint's state, its settings read from the log at
// most settingsTTL ago; nil when it is not a QUEUE Endpoint of accountID.
func (d *Driver) endpoint(ctx context.Context, id, accountID string, now time.Time) (*endpointState, error) {
	d.mu.Lock()
	st, ok := d.endpoints[id]
	d.mu.Unlock()
	if ok && now.Sub(st.loadedAt) < settingsTTL {
		return st.usable(accountID), nil
	}
	ep, err := d.cfg.Endpoints(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		ep, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if st == nil {
		st = &endpointState{}
		d.endpoints[id] = st
	}
	st.ep, st.loadedAt = ep, now
	if ep != nil {
		st.policy = ep.Settings().Queue.Effective()
		if st.limiter == nil || st.rate != st.policy.RatePerSecond {
			st.rate = st.policy.RatePerSecond
			st.limiter = rate.NewLimiter(rate.Limit(st.rate), max(1, st.rate/10))
		}
	}
	return st.usable(accountID), nil
}

func (st *endpointState) usable(accountID string) *endpointState {
	if st.ep == nil || !st.ep.OwnedBy(accountID) || st.ep.Settings().Mode != domain.ModeQueue {
		return nil
	}
	return st
}

// attempt sends one attempt and records what follows it.
