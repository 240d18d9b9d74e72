package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// listenersOf is fakeQueue with listeners per Endpoint.
type listenersOf struct {
	*fakeQueue
	connected map[string]int
}

func (q *listenersOf) Connected(id string) int { return q.connected[id] }

// TestEachEndpointIsReadWhateverAnotherHasDue: account "busy" has 300
// deliveries due on one QUEUE Endpoint that cannot send them now (no
// listener; a listener but 1 a second; an Endpoint switched to LOG mode
// since); account "other" has one delivery due, received after them, its
// listener connected. The driver reads Endpoint by Endpoint, so the other
// account's delivery goes within a few ticks, and the deliveries of an
// Endpoint no longer in QUEUE mode still age out.
func TestEachEndpointIsReadWhateverAnotherHasDue(t *testing.T) {
	for _, tc := range []struct {
		name      string
		connected map[string]int
		policy    domain.QueuePolicy
		busyMode  domain.EndpointMode
		age       time.Duration
	}{
		{"no listener (the default policy waits for one)", map[string]int{"other": 1}, domain.QueuePolicy{}, domain.ModeQueue, 0},
		{"a listener, 1 a second", map[string]int{"other": 1, "busy": 1}, domain.QueuePolicy{RatePerSecond: 1, MaxInFlight: 1}, domain.ModeQueue, 0},
		{"switched to LOG mode, 40 days old", map[string]int{"other": 1}, domain.QueuePolicy{}, domain.ModeLog, 40 * 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fq := &fakeQueue{entries: map[string]*readmodel.QueueEntry{}, answer: func(string, int) int { return 200 }}
			now := time.Now()
			for i := range 300 {
				id := fmt.Sprintf("b%03d", i)
				fq.entries[id] = &readmodel.QueueEntry{DeliveryID: id, EndpointID: "busy", AccountID: "busy", Seq: int64(i),
					Since: now.Add(-tc.age), State: readmodel.QueueQueued, NextAt: now}
			}
			fq.entries["o"] = &readmodel.QueueEntry{DeliveryID: "o", EndpointID: "other", AccountID: "other", Seq: 1000,
				Since: now, State: readmodel.QueueQueued, NextAt: now}
			q := &listenersOf{fakeQueue: fq, connected: tc.connected}
			eps := map[string]readmodel.Endpoint{}
			for _, id := range []string{"busy", "other"} {
				p, mode := domain.QueuePolicy{}, domain.ModeQueue
				if id == "busy" {
					p, mode = tc.policy, tc.busyMode
				}
				ep := readmodel.Endpoint{ID: id + "aaaaaaaaaaaaaaaaaaaa"[:16-len(id)], AccountID: id, Name: id, Mode: mode, Queue: &p}
				if mode != domain.ModeQueue {
					ep.Queue = nil
				}
				eps[id] = ep
			}
			d := New(Config{Views: q, Recorder: q, Forwarder: q, Poll: 5 * time.Millisecond,
				Endpoints: func(_ context.Context, id string) (readmodel.Endpoint, error) { return eps[id], nil }})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = d.Run(ctx); close(done) }()
			time.Sleep(3 * time.Second)
			cancel()
			<-done
			q.mu.Lock()
			defer q.mu.Unlock()
			if st := q.entries["o"].State; st != readmodel.QueueDone {
				t.Fatalf("the other account's delivery still %q after 3 s (its listener connected, answering 200) behind 300 due deliveries of an Endpoint that cannot send them (%d attempts in all; the oldest of those %q)",
					st, q.attempts, q.entries["b000"].State)
			}
			if tc.age > 0 {
				for id, e := range q.entries {
					if e.EndpointID == "busy" && e.State != readmodel.QueueDead {
						t.Fatalf("%s, 40 days old on an Endpoint no longer in QUEUE mode (age limit 1 d), is %q, want dead", id, e.State)
					}
				}
			}
		})
	}
}

// TestTicksReadWithinTheirBounds: 300 Endpoints with 3 deliveries due
// each, at most 2 in flight each. A tick walks at most Round Endpoints and
// reads at most Batch deliveries, of each Endpoint at most what it can take
// now; the next tick goes on where the last stopped, so every delivery
// goes, each once.
func TestTicksReadWithinTheirBounds(t *testing.T) {
	q := &fakeQueue{entries: map[string]*readmodel.QueueEntry{}, answer: func(string, int) int { return 200 }}
	eps := map[string]readmodel.Endpoint{}
	now := time.Now()
	for i := range 300 {
		ep := fmt.Sprintf("e%03d", i)
		eps[ep] = readmodel.Endpoint{ID: ep + "aaaaaaaaaaaa", AccountID: "acc", Name: ep, Mode: domain.ModeQueue,
			Queue: &domain.QueuePolicy{MaxInFlight: 2, RatePerSecond: 1000}}
		for j := range 3 {
			id := fmt.Sprintf("%s-%d", ep, j)
			q.entries[id] = &readmodel.QueueEntry{DeliveryID: id, EndpointID: ep, AccountID: "acc", Seq: int64(i*3 + j),
				Since: now, State: readmodel.QueueQueued, NextAt: now}
		}
	}
	d := New(Config{Views: q, Recorder: q, Forwarder: q, Batch: 100, Round: 50,
		Endpoints: func(_ context.Context, id string) (readmodel.Endpoint, error) { return eps[id], nil }})
	ctx := context.Background()
	for tick := 0; q.count(readmodel.QueueDone) < 900; tick++ {
		if tick > 200 {
			t.Fatalf("%d of 900 delivered after 200 ticks", q.count(readmodel.QueueDone))
		}
		q.mu.Lock()
		q.rowsRead = 0
		q.mu.Unlock()
		if err := d.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		d.wg.Wait()
		q.mu.Lock()
		read, asked := q.rowsRead, q.mostAsked
		q.mu.Unlock()
		if read > 100 || asked > 2 {
			t.Fatalf("tick %d read %d deliveries (at most 100), one Endpoint asked for %d (at most 2 in flight)", tick, read, asked)
		}
	}
	if q.attempts != 900 {
		t.Fatalf("%d attempts for 900 deliveries answered 200", q.attempts)
	}
}
