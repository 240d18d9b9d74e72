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
	d, err := ReceiveDelivery("d", "ep", AddressEndpoint, "acc", CapturedRequest{Method: "POST", Target: "/", Complete: true})
	if err != nil {
		t.Fatal(err)
	}
	events := d.Changes()
	d = LoadDelivery(events)
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
	err = d.RequestRetry("one-more", "acc", ep, nil)
	if !errors.Is(err, ErrAttemptLimit) || !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("retry past the bound: %v, want ErrAttemptLimit and ErrInvalidInput", err)
	}
	if err := d.RequestQueuedAttempt("queued", "ep", false); !errors.Is(err, ErrAttemptLimit) {
		t.Fatalf("queued attempt past the bound: %v, want ErrAttemptLimit", err)
	}
	if err := d.Requeue("acc", "mem-1"); !errors.Is(err, ErrAttemptLimit) || !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("redrive at the bound: %v, want ErrAttemptLimit and ErrInvalidInput", err)
	}
	if len(d.Changes()) != 0 {
		t.Fatalf("refused attempts raised %v", d.Changes())
	}
}
