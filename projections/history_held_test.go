package projections

import (
	"fmt"
	"testing"

	"github.com/relayhq/relay/domain"
)

// TestHeldDeliveriesEqualEventByEvent applies deliveries a batch creates and
// changes again in the same batch — whose attempts and final columns are
// held in memory and written once at flush (history_held.go) — once as a
// single batch and once an event per batch, where every event goes through
// the tables. Every view row, the rollup included, must be the same.
func TestHeldDeliveriesEqualEventByEvent(t *testing.T) {
	s := newSynth(t, []byte(`{"a":1}`))
	edit := &domain.RequestEdit{Method: "PUT"}
	receipt := func(id string, answer *domain.ReceiptAnswer, forward *domain.ReceiptForward) domain.DeliveryReceived {
		return domain.DeliveryReceived{DeliveryID: id, Address: "ep-1", AddressKind: domain.AddressEndpoint, AccountID: "acct-1",
			Method: "POST", Target: "/hook", Body: s.body, BodySize: int64(len(s.body)), Complete: true, Answer: answer, Forward: forward}
	}
	cases := map[string][]domain.Event{
		// The proxied path: the receipt carries its request; the answer follows.
		"proxied": {
			receipt("proxied", nil, &domain.ReceiptForward{AttemptID: "a1", EndpointID: "ep-1", Node: "n1"}),
			domain.ForwardResponded{DeliveryID: "proxied", AttemptID: "a1", AgentID: "ag", Status: 201, DurationMs: 4, Signature: "valid"},
		},
		// A copy's answer never decides what the sender got.
		"copy": {
			receipt("copy", nil, &domain.ReceiptForward{AttemptID: "a1", EndpointID: "ep-1"}),
			domain.ForwardRequested{DeliveryID: "copy", AttemptID: "c1", Copy: true, AgentID: "ag2"},
			domain.ForwardResponded{DeliveryID: "copy", AttemptID: "c1", AgentID: "ag2", Status: 500, Copy: true},
			domain.ForwardResponded{DeliveryID: "copy", AttemptID: "a1", AgentID: "ag", Status: 204},
		},
		// The relay answered 504; the late answer is recorded but the sender
		// got the 504; a retry after it decides again.
		"late": {
			receipt("late", nil, &domain.ReceiptForward{AttemptID: "a1", EndpointID: "ep-1"}),
			domain.DeliveryAnswered{DeliveryID: "late", Status: 504, Reason: "timeout"},
			domain.ForwardResponded{DeliveryID: "late", AttemptID: "a1", Status: 200},
			domain.ForwardRequested{DeliveryID: "late", AttemptID: "a2", Retry: true, Edit: edit},
			domain.ForwardFailed{DeliveryID: "late", AttemptID: "a2", Status: 502, Error: "refused"},
			domain.ForwardResponded{DeliveryID: "late", AttemptID: "a2", Status: 202},
		},
		// An outcome recorded before its request: the request brings its
		// edit and queue marks to the attempt the outcome made.
		"outcome first": {
			receipt("first", &domain.ReceiptAnswer{Status: 202, Reason: "queued"}, nil),
			domain.ForwardResponded{DeliveryID: "first", AttemptID: "q1", Status: 500},
			domain.ForwardRequested{DeliveryID: "first", AttemptID: "q1", Edit: edit, Queued: true, PossibleDuplicate: true},
		},
		// Answered at receipt, then forwarded: a 2xx answer at receipt
		// then the local 404.
		"answered at receipt": {
			receipt("logged", &domain.ReceiptAnswer{Status: 200}, &domain.ReceiptForward{AttemptID: "a1", EndpointID: "ep-1"}),
			domain.ForwardResponded{DeliveryID: "logged", AttemptID: "a1", Status: 404},
		},
		// Received, never answered in the batch.
		"open": {receipt("open", nil, &domain.ReceiptForward{AttemptID: "a1", EndpointID: "ep-1"})},
	}
	// The same events as Run receives them: by subscription, from the log's
	// tail, with the payloads they were encoded from.
	live, err := s.store.SubscribeAll(t.Context(), s.last)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var received []domain.RecordedEvent
	receive := func(until uint64) {
		for len(received) == 0 || received[len(received)-1].Position < until {
			evs, err := live.Recv(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			received = append(received, evs...)
		}
	}
	for _, evs := range cases {
		id := evs[0].(domain.DeliveryReceived).DeliveryID
		for _, ev := range evs {
			s.queue(domain.DeliveryStream(id), ev)
		}
	}
	// Enough plain ones for the multi-row inserts of every size (32 + 8 + 1).
	for range 41 {
		s.delivery("ep-2")
	}
	// A delivery created, answered and deleted in the same batch.
	s.queue(domain.DeliveryStream("gone"), receipt("gone", nil, &domain.ReceiptForward{AttemptID: "a1", EndpointID: "ep-1"}),
		domain.ForwardResponded{DeliveryID: "gone", AttemptID: "a1", Status: 500, DurationMs: 9})
	// Read before the deletion, as a batch that holds the delivery and its
	// tombstone is (the deletion removes the stream's events from the log).
	events := s.take()
	receive(s.last)
	if _, err := s.store.DeleteStream(t.Context(), domain.DeliveryStream("gone"), domain.Any()); err != nil {
		t.Fatal(err)
	}
	events = append(events, s.take()...)
	receive(s.last)
	payloads := 0
	for _, e := range received {
		if e.Payload != nil {
			payloads++
		}
	}
	if len(received) != len(events) || payloads < len(events)-1 {
		t.Fatalf("received %d events, %d with their payloads; want the %d read back, all but the tombstone with payloads", len(received), payloads, len(events))
	}

	whole, split := s.open("whole.db"), s.open("split.db")
	applyTB(t, whole, events)
	for i := range events {
		applyTB(t, split, events[i:i+1])
	}
	want := dump(t, split)
	if len(want["deliveries"]) != len(cases)+41 || len(want["attempts"]) != 8+41 {
		t.Fatalf("split views hold %d deliveries and %d attempts, want %d and %d", len(want["deliveries"]), len(want["attempts"]), len(cases)+41, 8+41)
	}
	compareDumps(t, "one batch", want, dump(t, whole))
	fromPayloads := s.open("payloads.db")
	applyTB(t, fromPayloads, received)
	compareDumps(t, "from payloads", want, dump(t, fromPayloads))
	compareHistories(t, "one batch", histories(t, split), histories(t, whole))
	// Cut in two: the later events of a delivery received in the first
	// batch update a row that was there before theirs (prefetch).
	for cut := 1; cut < 24; cut += 2 {
		two := s.open(fmt.Sprintf("cut-%d.db", cut))
		applyTB(t, two, events[:cut])
		applyTB(t, two, events[cut:])
		compareDumps(t, fmt.Sprintf("cut after %d events", cut), want, dump(t, two))
	}
	for id, status := range map[string]string{"proxied": "201", "copy": "204", "late": "202", "first": "500", "logged": "404", "open": "nil"} {
		d, err := whole.Delivery(t.Context(), id)
		if err != nil || status != statusOrNil(d.ResponseStatus) {
			t.Errorf("%s: status %s, %v; want %s", id, statusOrNil(d.ResponseStatus), err, status)
		}
	}
}

func statusOrNil(p *int) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// TestPrefetchedDeliveriesEqualEventByEvent applies receipts in one batch
// and their later events (answers, the relay's own answer, retries,
// failures, a deletion) in the next, as when an agent answers after the
// receipt's batch: the second batch reads its deliveries in one statement
// and updates them many to a statement (prefetch, flushUpdates). Every
// table must equal an event-by-event apply.
func TestPrefetchedDeliveriesEqualEventByEvent(t *testing.T) {
	s := newSynth(t, []byte(`{"a":1}`))
	const n = 41 // every chunk size (32 + 8 + 1)
	id := func(i int) string { return fmt.Sprintf("p-%02d", i) }
	for i := range n {
		s.queue(domain.DeliveryStream(id(i)), domain.DeliveryReceived{DeliveryID: id(i), Address: fmt.Sprintf("ep-%d", i%3),
			AddressKind: domain.AddressEndpoint, AccountID: "acct-1", Method: "POST", Target: "/hook", Body: s.body,
			BodySize: int64(len(s.body)), Complete: true, Forward: &domain.ReceiptForward{AttemptID: "a1", EndpointID: "ep-1"}})
	}
	events := s.take()
	receipts := len(events)
	for i := range n {
		stream := domain.DeliveryStream(id(i))
		switch i % 5 {
		case 0:
			s.queue(stream, domain.ForwardResponded{DeliveryID: id(i), AttemptID: "a1", Status: 200, DurationMs: 3})
		case 1:
			s.queue(stream, domain.DeliveryAnswered{DeliveryID: id(i), Status: 504, Reason: "timeout"},
				domain.ForwardResponded{DeliveryID: id(i), AttemptID: "a1", Status: 201, DurationMs: 40})
		case 2:
			s.queue(stream, domain.ForwardFailed{DeliveryID: id(i), AttemptID: "a1", Status: 502, Error: "refused"},
				domain.ForwardRequested{DeliveryID: id(i), AttemptID: "a2", Retry: true},
				domain.ForwardResponded{DeliveryID: id(i), AttemptID: "a2", Status: 204, DurationMs: 7})
		case 3:
			s.queue(stream, domain.ForwardRequested{DeliveryID: id(i), AttemptID: "c1", Copy: true, AgentID: "ag2"},
				domain.ForwardResponded{DeliveryID: id(i), AttemptID: "c1", Status: 500, Copy: true, AgentID: "ag2"})
		case 4:
			s.queue(stream, domain.DeliveryAnswered{DeliveryID: id(i), Status: 202, Reason: "queued"})
		}
	}
	events = append(events, s.take()...)
	if _, err := s.store.DeleteStream(t.Context(), domain.DeliveryStream(id(0)), domain.Any()); err != nil {
		t.Fatal(err)
	}
	events = append(events, s.take()...)

	two, split := s.open("two.db"), s.open("split.db")
	applyTB(t, two, events[:receipts])
	applyTB(t, two, events[receipts:])
	for i := range events {
		applyTB(t, split, events[i:i+1])
	}
	want := dump(t, split)
	if len(want["deliveries"]) != n-1 {
		t.Fatalf("split views hold %d deliveries, want %d", len(want["deliveries"]), n-1)
	}
	compareDumps(t, "two batches", want, dump(t, two))
	compareHistories(t, "two batches", histories(t, split), histories(t, two))
}
