package cluster

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// heartbeatSubject prefixes the subject each node beats on (one token more:
// the node's name).
const heartbeatSubject = "relay.nodes.heartbeat."

// DefaultLease is how long a node may go unheard before the others take it
// for gone.
const DefaultLease = 10 * time.Second

// Leases tracks which nodes are alive from heartbeats on NATS core: each
// node publishes one every fifth of the lease, and a node unheard for a
// whole lease has lapsed. Nothing is stored: a node that starts knows of
// the others within one beat, and judges none before a lease has passed
// since its start (until then every node counts as alive). A node that
// does not hear its own beats (its NATS connection is down) judges no one:
// the fault may be its own.
type Leases struct {
	conn    *nats.Conn
	self    string
	lapse   time.Duration
	log     *slog.Logger
	now     func() time.Time
	started time.Time

	incarnation string // this process's incarnation, sent in every beat

	mu      sync.Mutex
	seen    map[string]time.Time // last heartbeat of each other node (or when it was first asked about)
	runs    map[string]string    // each other node's incarnation
	heard   time.Time            // last heartbeat of this node heard back
	lapsed  map[string]bool
	onLapse []func(node string)

	sub  *nats.Subscription
	stop chan struct{}
	done chan struct{}
}

// StartLeases beats for self on conn and listens to the other nodes' beats
// until Stop.
func StartLeases(conn *nats.Conn, self string, lapse time.Duration, log *slog.Logger) (*Leases, error) {
	if lapse <= 0 {
		return nil, fmt.Errorf("start leases: lease %s must be positive", lapse)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Leases{
		conn: conn, self: self, lapse: lapse, log: log, now: time.Now,
		seen: map[string]time.Time{}, runs: map[string]string{}, lapsed: map[string]bool{},
		incarnation: nuid.Next(),
		stop:        make(chan struct{}), done: make(chan struct{}),
	}
	l.started = l.now()
	sub, err := conn.Subscribe(heartbeatSubject+"*", l.beat)
	if err != nil {
		return nil, fmt.Errorf("start leases: %w", err)
	}
	l.sub = sub
	if err := conn.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("start leases: %w", err)
	}
	l.publish()
	go l.run()
	return l, nil
}

// OnLapse calls fn (on the lease goroutine) for each node whose lease
// lapses after this call. Register before the first lease can lapse.
func (l *Leases) OnLapse(fn func(node string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onLapse = append(l.onLapse, fn)
}

// Self is this node's name.
func (l *Leases) Self() string { return l.self }

// Alive reports whether node holds its lease: this node always does;
// another does when it was heard within the lease, or when this node has
// not yet run a whole lease (it could not know otherwise), or when this
// node cannot hear itself (it cannot judge).
func (l *Leases) Alive(node string) bool {
	if node == l.self {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	last, ok := l.seen[node]
	if !ok {
		// A node named by the views but never heard: it lapses one lease
		// after this node started, like one heard then.
		last = l.started
		l.seen[node] = last
	}
	if now.Sub(last) <= l.lapse {
		return true
	}
	return !l.judging(now)
}

// judging tells whether this node may take unheard nodes for gone. l.mu held.
func (l *Leases) judging(now time.Time) bool {
	return now.Sub(l.started) > l.lapse && now.Sub(l.heard) <= l.lapse/2
}

// Live lists the nodes holding their lease that this node has heard (and
// itself), sorted.
func (l *Leases) Live() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	out := []string{l.self}
	for node, last := range l.seen {
		if now.Sub(last) <= l.lapse {
			out = append(out, node)
		}
	}
	slices.Sort(out)
	return out
}

// Leader reports whether this node is the first of the live ones by name:
// the one node that does the cluster's chores (closing lapsed nodes'
// sessions), so they are not done by every node at once.
func (l *Leases) Leader() bool { return l.Live()[0] == l.self }

// Stop ends the beats; the others take this node for gone one lease later.
func (l *Leases) Stop() {
	close(l.stop)
	<-l.done
	_ = l.sub.Unsubscribe()
}

// beat takes a heartbeat. A node heard with a new incarnation restarted
// within its lease: what was sent to its previous run is lost as if its
// lease had lapsed.
func (l *Leases) beat(m *nats.Msg) {
	node, run := m.Subject[len(heartbeatSubject):], string(m.Data)
	l.mu.Lock()
	now := l.now()
	if node == l.self {
		if run == l.incarnation {
			l.heard = now
		}
		l.mu.Unlock()
		return
	}
	restarted := l.runs[node] != "" && l.runs[node] != run
	if l.lapsed[node] {
		delete(l.lapsed, node)
		l.log.Info("relay node is back", "node", node)
	} else if l.runs[node] == "" {
		l.log.Info("relay node heard", "node", node)
	}
	l.seen[node], l.runs[node] = now, run
	fns := slices.Clone(l.onLapse)
	l.mu.Unlock()
	if restarted {
		l.log.Warn("relay node restarted within its lease", "node", node)
		for _, fn := range fns {
			fn(node)
		}
	}
}

func (l *Leases) publish() {
	if err := l.conn.Publish(heartbeatSubject+l.self, []byte(l.incarnation)); err != nil {
		l.log.Warn("node heartbeat not sent", "error", err)
	}
}

func (l *Leases) run() {
	defer close(l.done)
	beat := time.NewTicker(l.lapse / 5)
	defer beat.Stop()
	check := time.NewTicker(l.lapse / 10)
	defer check.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-beat.C:
			l.publish()
		case <-check.C:
			for _, node := range l.check() {
				l.log.Warn("relay node lost: its lease lapsed", "node", node, "lease", l.lapse)
				l.mu.Lock()
				fns := slices.Clone(l.onLapse)
				l.mu.Unlock()
				for _, fn := range fns {
					fn(node)
				}
			}
		}
	}
}

// check returns the nodes whose lease lapsed since the last check.
func (l *Leases) check() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.judging(now) {
		return nil
	}
	var out []string
	for node, last := range l.seen {
		if now.Sub(last) > l.lapse && !l.lapsed[node] {
			l.lapsed[node] = true
			out = append(out, node)
		}
	}
	slices.Sort(out)
	return out
}

// Lease is how long a node may go unheard before it has lapsed.
func (l *Leases) Lease() time.Duration { return l.lapse }
