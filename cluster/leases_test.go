package cluster

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/internal/testwait"
)

const testLease = 300 * time.Millisecond

func startLeases(t *testing.T, url, node string) *Leases {
	t.Helper()
	conn, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	l, err := StartLeases(conn, node, testLease, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// lapses records the nodes an OnLapse callback was told about.
type lapses struct {
	mu    sync.Mutex
	nodes []string
}

func (l *lapses) add(node string) { l.mu.Lock(); l.nodes = append(l.nodes, node); l.mu.Unlock() }
func (l *lapses) has(node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.nodes, node)
}

// A node that stops beating lapses one lease later: OnLapse is told, it
// is no longer Alive or Live, and the first live node by name leads.
func TestLeaseLapsesWhenANodeStopsBeating(t *testing.T) {
	url := natstest.Start(t).URL()
	a, b := startLeases(t, url, "a"), startLeases(t, url, "b")
	t.Cleanup(b.Stop)
	var lost lapses
	a.OnLapse(lost.add)
	check(t, "a hears b", func() bool { return slices.Equal(a.Live(), []string{"a", "b"}) && a.Leader() && !b.Leader() })

	a.Stop()
	check(t, "b takes a for gone", func() bool { return !b.Alive("a") && slices.Equal(b.Live(), []string{"b"}) && b.Leader() })
	if lost.has("b") {
		t.Error("a was told b lapsed")
	}
}

func TestLapseIsReported(t *testing.T) {
	url := natstest.Start(t).URL()
	a, b := startLeases(t, url, "a"), startLeases(t, url, "b")
	t.Cleanup(a.Stop)
	var lost lapses
	a.OnLapse(lost.add)
	check(t, "a hears b", func() bool { return slices.Contains(a.Live(), "b") })
	b.Stop()
	check(t, "a told that b lapsed", func() bool { return lost.has("b") && !a.Alive("b") })
}

// A node the views name but that never beats (it died before this node
// started) counts as alive for one lease, then lapses and is reported, so
// forwards sent to it end.
func TestNodeNeverHeardLapsesAfterOneLease(t *testing.T) {
	a := startLeases(t, natstest.Start(t).URL(), "a")
	t.Cleanup(a.Stop)
	var lost lapses
	a.OnLapse(lost.add)
	if !a.Alive("ghost") {
		t.Fatal("a node never heard is taken for gone before this node ran one lease")
	}
	check(t, "the ghost lapses", func() bool { return !a.Alive("ghost") && lost.has("ghost") })
}

// A node heard with a new incarnation restarted within its lease: what was
// sent to its previous run is reported lost.
func TestRestartWithinTheLeaseIsReported(t *testing.T) {
	url := natstest.Start(t).URL()
	a := startLeases(t, url, "a")
	t.Cleanup(a.Stop)
	var lost lapses
	a.OnLapse(lost.add)
	b1 := startLeases(t, url, "b")
	check(t, "a hears b", func() bool { return slices.Contains(a.Live(), "b") })
	b1.Stop()
	b2 := startLeases(t, url, "b")
	t.Cleanup(b2.Stop)
	check(t, "b's restart reported", func() bool { return lost.has("b") })
}

func check(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !cond() {
			return fmt.Errorf("waiting until %s", what)
		}
		return nil
	})
}
