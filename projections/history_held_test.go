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
	if _, err := s.store.DeleteStream(t.Context(), domain.DeliveryStream("gone"), domain.Any()); err != nil {
		t.Fatal(err)
	}
	events = append(events, s.take()...)

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
	compareHistories(t, "one batch", histories(t, split), histories(t, whole))
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
