package projections

import (
	"slices"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestDueEndpointsAndTheirDeliveries: the walk of the Endpoints with queued
// deliveries returns those with one due, goes on from where the last walk
// stopped, and names apart those with an attempt left open; an Endpoint's
// due deliveries come oldest first from a receipt position, each with its
// stored size, at most as many as asked.
func TestDueEndpointsAndTheirDeliveries(t *testing.T) {
	s := newSynth(t, []byte(`{"a":"0123456789"}`))
	v := s.open("views.db")
	receive := func(ep string) string {
		id := s.nextID()
		s.queue(domain.DeliveryStream(id), domain.DeliveryReceived{DeliveryID: id, Address: ep, AddressKind: domain.AddressEndpoint,
			AccountID: "acct-1", Method: "POST", Target: "/q", Body: s.body, BodySize: int64(len(s.body)), Complete: true, Queued: true})
		return id
	}
	var a []string
	for range 5 {
		a = append(a, receive("ep-a"))
	}
	receive("ep-b")
	later := receive("ep-c") // due in a day
	s.queue(domain.DeliveryStream(later), domain.DeliveryRetryScheduled{DeliveryID: later, Failures: 1,
		NextAt: t0.Add(24 * time.Hour).Format(time.RFC3339Nano), Reason: "500"})
	open := receive("ep-d") // in flight
	s.queue(domain.DeliveryStream(open), domain.ForwardRequested{DeliveryID: open, AttemptID: "at-1", EndpointID: "ep-d", Queued: true})
	applyTB(t, v, s.take())

	now := t0.Add(time.Hour)
	due, orphaned, last, err := v.DueEndpoints(t.Context(), now, t0, "", 10)
	if err != nil || !slices.Equal(due, []string{"ep-a", "ep-b"}) || len(orphaned) != 0 || last != "" {
		t.Fatalf("walk: due %v, orphaned %v, last %q, %v; want [ep-a ep-b], none, \"\" (the end)", due, orphaned, last, err)
	}
	due, _, last, err = v.DueEndpoints(t.Context(), now, t0, "", 2)
	if err != nil || !slices.Equal(due, []string{"ep-a", "ep-b"}) || last != "ep-b" {
		t.Fatalf("walk of 2: due %v, last %q, %v; want [ep-a ep-b], ep-b", due, last, err)
	}
	due, _, last, err = v.DueEndpoints(t.Context(), now, t0, "ep-b", 2)
	if err != nil || len(due) != 0 || last != "" {
		t.Fatalf("walk on from ep-b: due %v, last %q, %v; want none (ep-c's is not due), the end", due, last, err)
	}
	_, orphaned, _, err = v.DueEndpoints(t.Context(), now, now, "", 10)
	if err != nil || !slices.Equal(orphaned, []string{"ep-d"}) {
		t.Fatalf("attempts left open before now: %v, %v; want [ep-d]", orphaned, err)
	}

	first, err := v.DueOf(t.Context(), "ep-a", now, t0, -1, 3)
	if err != nil || len(first) != 3 {
		t.Fatalf("ep-a's first 3: %d, %v", len(first), err)
	}
	rest, err := v.DueOf(t.Context(), "ep-a", now, t0, first[2].Seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range append(first, rest...) {
		got = append(got, e.DeliveryID)
		if e.Bytes < int64(len(s.body)) {
			t.Errorf("%s: %d bytes stored, want at least its body's %d", e.DeliveryID, e.Bytes, len(s.body))
		}
	}
	if !slices.Equal(got, a) {
		t.Fatalf("ep-a's due deliveries %v, want %v", got, a)
	}
	if none, err := v.DueOf(t.Context(), "ep-c", now, t0, -1, 10); err != nil || len(none) != 0 {
		t.Fatalf("ep-c (due in a day): %d, %v", len(none), err)
	}
	if left, err := v.DueOf(t.Context(), "ep-d", now, now, -1, 10); err != nil || len(left) != 1 || left[0].DeliveryID != open {
		t.Fatalf("ep-d's attempt left open: %v, %v", left, err)
	}
}

// TestQueueVersionMovesWithTheQueue: the queue's version moves (and
// QueueChanged receives) with each batch that changes the queue view (a
// delivery queued, its attempt, its end) and with a reset, and with no
// other; QueueLive tells whether a delivery is queued or in flight.
func TestQueueVersionMovesWithTheQueue(t *testing.T) {
	s := newSynth(t, []byte(`{"a":"0123456789"}`))
	v := s.open("views.db")
	live := func() bool {
		t.Helper()
		ok, err := v.QueueLive(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	v0 := v.QueueVersion()
	if live() {
		t.Fatal("an empty queue is live")
	}

	s.delivery("ep-proxy") // a proxied delivery: not the queue's
	applyTB(t, v, s.take())
	if v.QueueVersion() != v0 {
		t.Fatalf("a proxied delivery moved the queue's version %d → %d", v0, v.QueueVersion())
	}
	select {
	case <-v.QueueChanged():
		t.Fatal("a proxied delivery told QueueChanged")
	default:
	}

	id := s.nextID()
	s.queue(domain.DeliveryStream(id), domain.DeliveryReceived{DeliveryID: id, Address: "ep-q", AddressKind: domain.AddressEndpoint,
		AccountID: "acct-1", Method: "POST", Target: "/q", Body: s.body, BodySize: int64(len(s.body)), Complete: true, Queued: true})
	applyTB(t, v, s.take())
	v1 := v.QueueVersion()
	if v1 == v0 || !live() {
		t.Fatalf("a queued delivery: version %d → %d, live %v; want moved, live", v0, v1, live())
	}
	select {
	case <-v.QueueChanged():
	default:
		t.Fatal("a queued delivery did not tell QueueChanged")
	}

	s.queue(domain.DeliveryStream(id), domain.ForwardRequested{DeliveryID: id, AttemptID: "at-1", EndpointID: "ep-q", Queued: true})
	applyTB(t, v, s.take())
	v2 := v.QueueVersion()
	if v2 == v1 || !live() {
		t.Fatalf("its attempt: version %d → %d, live %v; want moved, live (in flight)", v1, v2, live())
	}

	s.queue(domain.DeliveryStream(id), domain.DeliveryDelivered{DeliveryID: id, Status: 200})
	applyTB(t, v, s.take())
	v3 := v.QueueVersion()
	if v3 == v2 || live() {
		t.Fatalf("delivered: version %d → %d, live %v; want moved, not live", v2, v3, live())
	}

	if err := v.reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v.QueueVersion() == v3 {
		t.Fatal("a reset did not move the queue's version")
	}
}
