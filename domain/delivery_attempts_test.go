package domain

import (
	"errors"
	"fmt"
	"testing"
)

// TestDeliveryAttemptsBounded: a delivery has at most MaxDeliveryAttempts
// attempts (copies apart); a retry, a queued attempt or a redrive past
// them is refused as invalid input, matching ErrAttemptLimit, and raises
// nothing.
func TestDeliveryAttemptsBounded(t *testing.T) {
	d, events := receivedForAttempts(t)
	ep := EndpointStatus{Mode: ModeProxy, AgentConnected: true}
	for i := range MaxDeliveryAttempts {
		id := fmt.Sprint("a", i)
		if err := d.RequestRetry(id, "acc", ep, nil); err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		if err := d.RequestCopy("copy-"+id, "ep", "agent-2"); err != nil {
			t.Fatal(err)
		}
		d.RecordResponse(ForwardResponded{AttemptID: "copy-" + id, Status: 500, Copy: true})
		d.RecordResponse(ForwardResponded{AttemptID: id, Status: 500})
		events = append(events, d.Changes()...)
		d = LoadDelivery(events)
	}
	if d.attempts != MaxDeliveryAttempts {
		t.Fatalf("%d attempts counted, want %d (copies apart)", d.attempts, MaxDeliveryAttempts)
	}
	err := d.RequestRetry("one-more", "acc", ep, nil)
	if !errors.Is(err, ErrAttemptLimit) || !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("retry past the bound: %v, want ErrAttemptLimit and ErrInvalidInput", err)
	}
	if err := d.RequestQueuedAttempt("queued", "ep", false); !errors.Is(err, ErrAttemptLimit) {
		t.Fatalf("queued attempt past the bound: %v, want ErrAttemptLimit", err)
	}
	if err := LoadDelivery(append(events, DeliveryDead{DeliveryID: "d"})).Requeue("acc", "mem-1"); !errors.Is(err, ErrAttemptLimit) || !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("redrive at the bound: %v, want ErrAttemptLimit and ErrInvalidInput", err)
	}
	if len(d.Changes()) != 0 {
		t.Fatalf("refused attempts raised %v", d.Changes())
	}
}

// TestRequeueOnlyADeadDelivery: only a dead delivery goes back in its
// queue. One never queued, one queued and not yet settled, one delivered
// and one already put back are refused (ErrNotDead, invalid input) and
// raise nothing, whatever a view listed as dead a moment before; a dead
// one is put back once.
func TestRequeueOnlyADeadDelivery(t *testing.T) {
	received := func(t *testing.T, queued bool) []Event {
		t.Helper()
		d, err := ReceiveAndAnswer("d", "ep", AddressEndpoint, "acc", CapturedRequest{Method: "POST", Target: "/", Complete: true}, 202, "")
		if err != nil {
			t.Fatal(err)
		}
		evs := d.Changes()
		r := evs[0].(DeliveryReceived)
		r.Queued = queued
		evs[0] = r
		return evs
	}
	dead := DeliveryDead{DeliveryID: "d", Failures: 1, Reason: "dead after 1 attempts"}
	requeued := DeliveryRequeued{DeliveryID: "d", AccountID: "acc"}
	for _, c := range []struct {
		name   string
		queued bool
		then   []Event
		want   error
	}{
		{"never queued", false, nil, ErrNotDead},
		{"queued", true, nil, ErrNotDead},
		{"queued and failed once", true, []Event{DeliveryRetryScheduled{DeliveryID: "d", Failures: 1, NextAt: "2026-01-01T00:00:00Z"}}, ErrNotDead},
		{"delivered", true, []Event{DeliveryDelivered{DeliveryID: "d", AttemptID: "a", Status: 200}}, ErrNotDead},
		{"put back already", true, []Event{dead, requeued}, ErrNotDead},
		{"dead", true, []Event{dead}, nil},
		{"dead again after a redrive", true, []Event{dead, requeued, dead}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := LoadDelivery(append(received(t, c.queued), c.then...))
			err := d.Requeue("acc", "mem-1")
			if c.want == nil {
				if err != nil || len(d.Changes()) != 1 {
					t.Fatalf("Requeue = %v raising %v, want one DeliveryRequeued", err, d.Changes())
				}
				return
			}
			if !errors.Is(err, c.want) || !errors.Is(err, ErrInvalidInput) || len(d.Changes()) != 0 {
				t.Fatalf("Requeue = %v raising %v, want %v (invalid input) and nothing raised", err, d.Changes(), c.want)
			}
		})
	}
}

// TestDeliveryCopiesBounded: a delivery records at most MaxDeliveryCopies
// copies, whatever its listeners and attempts: the copy past them is
// refused, and the delivery's attempts go on. Before, copies were not
// counted at all (64 listeners made 63 copies of each of 200 attempts).
func TestDeliveryCopiesBounded(t *testing.T) {
	d, events := receivedForAttempts(t)
	ep := EndpointStatus{Mode: ModeProxy, AgentConnected: true}
	const listeners = 64
	copies := 0
	for i := 0; copies < MaxDeliveryCopies; i++ {
		id := fmt.Sprint("a", i)
		if err := d.RequestRetry(id, "acc", ep, nil); err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		d.RecordResponse(ForwardResponded{AttemptID: id, Status: 200})
		for c := range listeners - 1 {
			if copies == MaxDeliveryCopies {
				break
			}
			cp := fmt.Sprintf("copy-%s-%d", id, c)
			if err := d.RequestCopy(cp, "ep", fmt.Sprint("agent-", c)); err != nil {
				t.Fatalf("copy %d: %v", copies+1, err)
			}
			d.RecordResponse(ForwardResponded{AttemptID: cp, Status: 200, Copy: true})
			copies++
		}
		events = append(events, d.Changes()...)
		d = LoadDelivery(events)
	}
	if d.copies != MaxDeliveryCopies {
		t.Fatalf("%d copies counted, want %d", d.copies, MaxDeliveryCopies)
	}
	if err := d.RequestCopy("one-more", "ep", "agent-1"); !errors.Is(err, ErrCopyLimit) {
		t.Fatalf("copy past the bound: %v, want ErrCopyLimit", err)
	}
	if len(d.Changes()) != 0 {
		t.Fatalf("the refused copy raised %v", d.Changes())
	}
	if err := d.RequestRetry("retry", "acc", ep, nil); err != nil {
		t.Fatalf("a retry once the copies are all recorded: %v", err)
	}
}

// receivedForAttempts is a delivery just received at a PROXY Endpoint,
// loaded from its events, which it also returns.
func receivedForAttempts(t *testing.T) (*Delivery, []Event) {
	t.Helper()
	d, err := ReceiveDelivery("d", "ep", AddressEndpoint, "acc", CapturedRequest{Method: "POST", Target: "/", Complete: true})
	if err != nil {
		t.Fatal(err)
	}
	events := d.Changes()
	return LoadDelivery(events), events
}
