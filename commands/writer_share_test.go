package commands_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
)

// appendMany appends n delivery streams of accountID's Endpoint received
// at at, each made by events(id), 16 at a time (so the writer's group
// commit shares their fsyncs), and waits until the views show them.
func (e *env) appendMany(t *testing.T, n int, events func(id string) []domain.Event) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		last uint64
		errs []error
		next = make(chan int)
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				id := commands.NewDeliveryID()
				data, _, err := e.codec.EncodeAll(nil, commands.NewEventID, events(id), time.Now(), domain.Trace{CorrelationID: id})
				if err == nil {
					var res domain.AppendResult
					if res, err = e.store.Append(context.Background(), domain.DeliveryStream(id), domain.NoStream(), data...); err == nil {
						mu.Lock()
						last = max(last, res.Position)
						mu.Unlock()
						continue
					}
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("append %d deliveries: %d failed, the first: %v", n, len(errs), errs[0])
	}
	if err := e.views.WaitFor(ctx(t), last); err != nil {
		t.Fatal(err)
	}
}

// othersAppends records deliveries of another account's Endpoint one after
// another, about a millisecond apart, as its senders would, until stop is
// closed, and returns for each the log's newest position when it was
// queued and the position it was committed at, in order.
func (e *env) othersAppends(t *testing.T, endpointID, accountID string, stop <-chan struct{}) func() []span {
	t.Helper()
	done := make(chan []span, 1)
	go func() {
		var out []span
		for {
			select {
			case <-stop:
				done <- out
				return
			default:
			}
			id := commands.NewDeliveryID()
			d, err := domain.ReceiveAndAnswer(id, endpointID, domain.AddressEndpoint, accountID, request("/other", webhookBody, len(webhookBody)), 204, "")
			if err != nil {
				t.Error(err)
				done <- out
				return
			}
			data, _, err := e.codec.EncodeAll(nil, commands.NewEventID, d.Changes(), time.Now(), domain.Trace{CorrelationID: id})
			var queued uint64
			if err == nil {
				queued, err = e.store.LastPosition(context.Background())
			}
			if err == nil {
				var res domain.AppendResult
				if res, err = e.store.Append(context.Background(), domain.DeliveryStream(id), domain.NoStream(), data...); err == nil {
					out = append(out, span{queued: queued, committed: res.Position})
					// A sender's pace, not a loop as fast as the writer:
					// on a loaded machine that left the views minutes
					// behind and the bulk work past its bounds.
					time.Sleep(time.Millisecond)
					continue
				}
			}
			t.Error(err)
			done <- out
			return
		}
	}()
	return func() []span { return <-done }
}

// span is one of the other account's appends: the log's newest position
// as it was queued, and its own.
type span struct{ queued, committed uint64 }

// waitedBehind counts, for each of the other account's appends, the events
// of kind typ committed after it was queued and before it: those it waited
// behind. It returns the most and the mean, over the appends made while
// such events were being committed.
func waitedBehind(t *testing.T, e *env, others []span, typ string) (most int, mean float64, appends int) {
	t.Helper()
	var theirs []uint64
	for _, ev := range e.allEvents(t) {
		if ev.Type == typ {
			theirs = append(theirs, ev.Position)
		}
	}
	if len(theirs) == 0 {
		t.Fatalf("no %s in the log", typ)
	}
	total := 0
	for _, o := range others {
		if o.committed < theirs[0] || o.queued > theirs[len(theirs)-1] {
			continue // before or after the bulk work
		}
		lo := sort.Search(len(theirs), func(k int) bool { return theirs[k] > o.queued })
		hi := sort.Search(len(theirs), func(k int) bool { return theirs[k] > o.committed })
		n := hi - lo
		most, total, appends = max(most, n), total+n, appends+1
	}
	if appends > 0 {
		mean = float64(total) / float64(appends)
	}
	return most, mean, appends
}

// TestRedriveSharesTheWriterWithOthers measures what one account's redrive
// of 1 000 dead deliveries costs another account's deliveries recorded
// meanwhile: the redrive appends one delivery after another, so each of
// the other's appends waits behind at most a few of them, never behind the
// whole call. What bounds the calls themselves is the bulk rate (graph's
// TestBulkMutationsAreRatedPerAccount).
func TestRedriveSharesTheWriterWithOthers(t *testing.T) {
	e := newEnv(t, defaultConfig())
	ada, _ := e.account(t, "Ada")
	ep := e.endpoint(t, ada.ID, domain.EndpointSettings{Name: "orders", Mode: domain.ModeQueue, Target: "127.0.0.1:3000"})
	bob, _ := e.account(t, "Bob")
	other := e.endpoint(t, bob.ID, domain.EndpointSettings{Name: "other", Mode: domain.ModeLog})
	e.appendMany(t, commands.MaxRedrive, func(id string) []domain.Event {
		d, err := domain.ReceiveAndAnswer(id, ep.ID, domain.AddressEndpoint, ada.ID, request("/q", webhookBody, len(webhookBody)), 202, "")
		if err != nil {
			t.Fatal(err)
		}
		changes := d.Changes()
		r := changes[0].(domain.DeliveryReceived)
		r.Queued = true
		return []domain.Event{r, domain.DeliveryDead{DeliveryID: id, Failures: 3, Reason: "dead after 3 attempts"}}
	})

	stop := make(chan struct{})
	others := e.othersAppends(t, other.ID, bob.ID, stop)
	redrive, cancel := context.WithTimeout(t.Context(), 4*testTimeout) // 1 000 appends one after another
	defer cancel()
	res, err := e.svc.RedriveDead(redrive, ada.ID, "", ep.ID, "")
	close(stop)
	positions := others()
	if err != nil || res.Count != commands.MaxRedrive {
		t.Fatalf("redrive: %+v, %v", res, err)
	}
	most, mean, n := waitedBehind(t, e, positions, domain.TypeDeliveryRequeued)
	t.Logf("during a redrive of %d, %d deliveries of another account were recorded: each waited behind at most %d of its appends (%.2f on average)",
		res.Count, n, most, mean)
	// One at a time they are about one each (a busy machine's scheduling
	// adds a few); a redrive that held the writer would pass hundreds.
	if n == 0 || most >= commands.MaxRedrive/10 {
		t.Errorf("during a redrive of %d the other account recorded %d deliveries, one waiting behind %d of its appends; want some, each behind fewer than %d",
			res.Count, n, most, commands.MaxRedrive/10)
	}
}

// TestRetentionSweepSharesTheWriterWithOthers measures what a retention
// sweep deleting 1 500 delivery streams costs another account's
// deliveries recorded meanwhile: the sweep has 8 deletions in flight at
// once on the writer's queue, so each of the other's appends waits behind
// at most a batch of them, never behind a page or the sweep. Only Ada's
// Endpoint is past its window at the sweeps' now: were the other's too,
// its deliveries recorded during a sweep would fall before the decision's
// cutoff, and the sweep would chase them page after page for as long as a
// page took longer than an append (on a loaded machine, for minutes).
func TestRetentionSweepSharesTheWriterWithOthers(t *testing.T) {
	cfg := defaultConfig()
	cfg.Retention = domain.RetentionLimits{Default: time.Hour, Min: time.Second, Max: time.Hour}
	e := newEnv(t, cfg)
	ada, _ := e.account(t, "Ada")
	ep := e.endpoint(t, ada.ID, domain.EndpointSettings{Name: "old", Mode: domain.ModeLog, Retention: time.Second})
	bob, _ := e.account(t, "Bob")
	other := e.endpoint(t, bob.ID, domain.EndpointSettings{Name: "other", Mode: domain.ModeLog})
	const streams = 1_500 // three pages of 500
	e.appendMany(t, streams, func(id string) []domain.Event {
		d, err := domain.ReceiveAndAnswer(id, ep.ID, domain.AddressEndpoint, ada.ID, request("/old", webhookBody, len(webhookBody)), 204, "")
		if err != nil {
			t.Fatal(err)
		}
		return d.Changes()
	})
	// Ada's window of a second has passed for all of hers at now; the
	// other's hour has not for any of its.
	now := time.Now().Add(2 * time.Second)

	stop := make(chan struct{})
	others := e.othersAppends(t, other.ID, bob.ID, stop)
	deleted := 0
	for deleted < streams {
		// A sweep deletes them all: on a loaded machine that takes longer
		// than one call's usual bound.
		sweep, cancel := context.WithTimeout(t.Context(), 10*testTimeout)
		res, err := e.svc.SweepEndpointRetention(sweep, now)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if res.Deleted == 0 {
			break
		}
		deleted += res.Deleted
	}
	close(stop)
	positions := others()
	if deleted != streams {
		t.Fatalf("the sweeps deleted %d streams, want Ada's %d", deleted, streams)
	}
	most, mean, n := waitedBehind(t, e, positions, domain.TypeStreamDeleted)
	t.Logf("during a sweep deleting %d streams, %d deliveries of another account were recorded: each waited behind at most %d deletions (%.2f on average)",
		deleted, n, most, mean)
	// Eight in flight make a batch of about eight (a busy machine's
	// scheduling adds a few batches); a page committed at once would pass
	// its 500.
	if n == 0 || most >= 100 {
		t.Errorf("during a sweep deleting %d streams the other account recorded %d deliveries, one waiting behind %d deletions; want some, each behind fewer than 100",
			deleted, n, most)
	}
}
