package record_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/jetstream"
	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/record"
)

// batchSessions is how many sessions one append of a history holds.
const batchSessions = 25

// appendSessions adds sessions [from, to) to ep's agent stream, each one's
// start and end with the changes of primary they make, batchSessions an
// append (to fill a stream quickly); after each append live decides the
// primary, as a relay does after every start and end.
func appendSessions(tb testing.TB, live *record.Recorder, ep string, from, to int) {
	tb.Helper()
	stream := domain.AgentStream(ep)
	var batch []domain.Event
	for i := from; i < to; i++ {
		id := fmt.Sprintf("conn-%d/%s", i, ep)
		batch = append(batch,
			domain.AgentConnected{EndpointID: ep, AgentID: id, Target: "127.0.0.1:3000", Node: "n1"},
			domain.PrimaryChanged{EndpointID: ep, AgentID: id, Reason: domain.PrimaryFirst},
			domain.AgentDisconnected{EndpointID: ep, AgentID: id, Reason: domain.SessionAgentDisconnected},
			domain.PrimaryChanged{EndpointID: ep, Previous: id, Reason: domain.PrimaryNone})
		if len(batch) >= 4*batchSessions || i == to-1 {
			if _, err := live.Record(tb.Context(), stream, domain.Any(), domain.Trace{}, batch...); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
			if _, _, err := live.ReconcilePrimary(tb.Context(), ep); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// mixedSessions adds sessions [from, to) to ep's agent stream with
// sessions left open a while and some asking to be primary, batchSessions
// an append; after each append live, when not nil, decides the primary
// (without it the stream is one a relay before snapshots wrote, with no
// decision at all).
func mixedSessions(tb testing.TB, rec, live *record.Recorder, ep string, from, to int) {
	tb.Helper()
	stream := domain.AgentStream(ep)
	id := func(i int) string { return fmt.Sprintf("s-%d/%s", i, ep) }
	var batch []domain.Event
	for i := from; i < to; i++ {
		batch = append(batch, domain.AgentConnected{EndpointID: ep, AgentID: id(i), Target: "127.0.0.1:3000", Node: "n1", Primary: i%5 == 0})
		if i%97 != 0 {
			batch = append(batch, domain.AgentDisconnected{EndpointID: ep, AgentID: id(i)})
		}
		if j := i - 970; j >= 0 && j%97 == 0 {
			// The sessions left open end some 970 sessions later.
			batch = append(batch, domain.AgentDisconnected{EndpointID: ep, AgentID: id(j)})
		}
		if (i+1)%batchSessions == 0 || i == to-1 {
			if _, err := rec.Record(tb.Context(), stream, domain.Any(), domain.Trace{}, batch...); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
			if live != nil {
				if _, _, err := live.ReconcilePrimary(tb.Context(), ep); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
}

// fullFold folds ep's whole agent stream.
func fullFold(t *testing.T, store domain.EventStore, ep string) *domain.Listeners {
	t.Helper()
	_, events, err := domain.LoadStream(t.Context(), store, domain.NewCodec(), domain.AgentStream(ep))
	if err != nil {
		t.Fatal(err)
	}
	return domain.LoadListeners(events)
}

// checkSnapshots fails unless every snapshot in ep's agent stream holds
// what the events before it fold to, and at least one is there.
func checkSnapshots(t *testing.T, store domain.EventStore, ep string) {
	t.Helper()
	_, events, err := domain.LoadStream(t.Context(), store, domain.NewCodec(), domain.AgentStream(ep))
	if err != nil {
		t.Fatal(err)
	}
	folded := domain.LoadListeners(nil)
	snapshots := 0
	for i, e := range events {
		if snap, ok := e.(domain.ListenersSnapshot); ok {
			snapshots++
			// The open sessions and the decision (which names the primary
			// last recorded when it changes it) tell the two states apart.
			from := domain.LoadListeners([]domain.Event{snap})
			want, wantChanged := folded.Decide(ep)
			got, changed := from.Decide(ep)
			if fmt.Sprint(from.Open()) != fmt.Sprint(folded.Open()) || got != want || changed != wantChanged {
				t.Fatalf("snapshot at revision %d: %+v, the events before it fold to open %v deciding %+v (%v)", i, snap, folded.Open(), want, wantChanged)
			}
		}
		folded.Fold([]domain.Event{e})
	}
	if snapshots == 0 {
		t.Fatalf("no snapshot in %d events", len(events))
	}
}

// TestColdDecisionReadsABoundedTail: a relay's first decision of an
// Endpoint's primary (after a restart, on a new node, or once the Endpoint's
// folded sessions were evicted) reads the stream from its newest snapshot,
// not the Endpoint's whole history of sessions: as much for 5 000 sessions
// as for 500.
func TestColdDecisionReadsABoundedTail(t *testing.T) {
	live, store := newRecorder(t)
	const ep = "ep"
	// A bound independent of the history: the events since the newest
	// snapshot, read back in windows of 512 (two at most), and the last one.
	const bound = 2*512 + 1
	read := map[int]int64{}
	done := 0
	for _, sessions := range []int{500, 5_000} {
		appendSessions(t, live, ep, done, sessions)
		done = sessions
		store.events.Store(0)
		cold := record.New(record.Config{Store: store})
		if _, changed, err := cold.ReconcilePrimary(t.Context(), ep); err != nil || changed {
			t.Fatalf("cold decision after %d sessions: changed %v, %v", sessions, changed, err)
		}
		read[sessions] = store.events.Load()
	}
	for sessions, n := range read {
		t.Logf("a cold decision after %d sessions (%d events) read %d events", sessions, 4*sessions, n)
		if n > bound {
			t.Errorf("a cold decision after %d sessions (%d events) read %d events, want at most %d", sessions, 4*sessions, n, bound)
		}
	}
}

// TestColdDecisionMatchesAFullFold: a decision folded from the newest
// snapshot is the one the whole stream gives, at each step of a history
// with sessions left open and sessions asking to be primary; every
// snapshot in the stream is the fold of what precedes it. On the embedded
// log and on JetStream, whose appends of several events are one message.
func TestColdDecisionMatchesAFullFold(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) (*record.Recorder, *countingStore)
	}{
		{"sqlite", newRecorder},
		{"jetstream", func(t *testing.T) (*record.Recorder, *countingStore) {
			srv := natstest.Start(t)
			store, err := jetstream.Open(t.Context(), srv.URL(), jetstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			counting := &countingStore{EventStore: store}
			return record.New(record.Config{Store: counting}), counting
		}},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			live, store := s.open(t)
			const ep = "ep"
			mixedSessions(t, live, live, ep, 0, 3_000)
			checkSnapshots(t, store, ep)
			for step := range 6 {
				// Sessions start and end with no decision after them: the
				// next decision has something to record.
				mixedSessions(t, live, nil, ep, 3_000+step*40, 3_000+(step+1)*40)
				want, wantChanged := fullFold(t, store, ep).Decide(ep)
				store.events.Store(0)
				got, changed, err := record.New(record.Config{Store: store}).ReconcilePrimary(t.Context(), ep)
				if err != nil || changed != wantChanged || got != want {
					t.Fatalf("step %d: cold decision %+v (changed %v, %v), the whole stream's %+v (changed %v)", step, got, changed, err, want, wantChanged)
				}
				if n := store.events.Load(); n > 2*512+1 {
					t.Errorf("step %d: the cold decision read %d events", step, n)
				}
				if _, changed, err := live.ReconcilePrimary(t.Context(), ep); err != nil || changed {
					t.Fatalf("step %d: the warm recorder decides again: changed %v, %v", step, changed, err)
				}
			}
			checkSnapshots(t, store, ep)
		})
	}
}

// TestLogWithoutSnapshotsFoldsTheSame: a stream a relay before snapshots
// wrote (no snapshot in it) is folded whole by the first decision, which
// decides as before and leaves a snapshot, so the next cold decision reads
// only what follows it.
func TestLogWithoutSnapshotsFoldsTheSame(t *testing.T) {
	rec, store := newRecorder(t)
	const ep = "ep"
	mixedSessions(t, rec, nil, ep, 0, 2_000)
	want, wantChanged := fullFold(t, store, ep).Decide(ep)
	got, changed, err := record.New(record.Config{Store: store}).ReconcilePrimary(t.Context(), ep)
	if err != nil || changed != wantChanged || got != want {
		t.Fatalf("decision %+v (changed %v, %v), the whole stream's %+v (changed %v)", got, changed, err, want, wantChanged)
	}
	checkSnapshots(t, store, ep)
	store.events.Store(0)
	if _, changed, err := record.New(record.Config{Store: store}).ReconcilePrimary(t.Context(), ep); err != nil || changed {
		t.Fatalf("the next cold decision: changed %v, %v", changed, err)
	}
	if n := store.events.Load(); n > 2*512+1 {
		t.Errorf("the next cold decision read %d events", n)
	}
}

// TestColdNodesDecideOnce: two nodes with nothing folded decide at once on
// a long history: one change is recorded, and both then agree there is
// nothing left to change.
func TestColdNodesDecideOnce(t *testing.T) {
	live, store := newRecorder(t)
	const ep = "ep"
	mixedSessions(t, live, live, ep, 0, 2_000)
	// The primary's end, recorded by a node that died before deciding.
	primary := fullFold(t, store, ep).Primary()
	if primary == "" {
		t.Fatal("no primary to end")
	}
	if err := live.AgentDisconnected(t.Context(), ep, primary, domain.SessionAgentDisconnected); err != nil {
		t.Fatal(err)
	}
	want, _ := fullFold(t, store, ep).Decide(ep)
	nodes := []*record.Recorder{record.New(record.Config{Store: store}), record.New(record.Config{Store: store})}
	var wg sync.WaitGroup
	results := make([]bool, len(nodes))
	for i, n := range nodes {
		wg.Go(func() {
			c, changed, err := n.ReconcilePrimary(t.Context(), ep)
			if err != nil || (changed && c != want) {
				t.Errorf("node %d: %+v changed %v, %v; want %+v", i, c, changed, err, want)
			}
			results[i] = changed
		})
	}
	wg.Wait()
	_, events, err := domain.LoadStream(t.Context(), store, domain.NewCodec(), domain.AgentStream(ep))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if c, ok := e.(domain.PrimaryChanged); ok && c == want {
			n++
		}
	}
	if n != 1 || results[0] == results[1] {
		t.Errorf("the change %+v recorded %d times (nodes say %v), want once by one node", want, n, results)
	}
	for i, node := range nodes {
		if c, changed, err := node.ReconcilePrimary(t.Context(), ep); err != nil || changed {
			t.Errorf("node %d decides again: %+v changed %v, %v", i, c, changed, err)
		}
	}
	checkSnapshots(t, store, ep)
}
