package domain

import (
	"reflect"
	"testing"
)

// TestReceiptWithItsAnswer: a receipt not yet appended records its first
// attempt's answer in one event, which replays as the receipt, the request
// and the answer would (the attempt is no longer pending), and expands to
// exactly those three events; anything else is left to RecordResponse.
func TestReceiptWithItsAnswer(t *testing.T) {
	req := CapturedRequest{Method: "POST", Target: "/", Proto: "HTTP/1.1"}
	fresh := func(t *testing.T) *Delivery {
		t.Helper()
		d, err := ReceiveDelivery("d1", "ep", AddressEndpoint, "acc", req)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.RequestForwardAtReceipt("a1", "ep"); err != nil {
			t.Fatal(err)
		}
		return d
	}
	answer := ForwardResponded{AttemptID: "a1", AgentID: "ag", Status: 201, DurationMs: 3}

	d := fresh(t)
	if !d.RespondAtReceipt(answer) || d.Pending("a1") {
		t.Fatal("a fresh receipt did not take its attempt's answer")
	}
	changes := d.Changes()
	r, ok := changes[0].(DeliveryReceived)
	if len(changes) != 1 || !ok || r.Forward.Responded == nil || r.Forward.Responded.DeliveryID != "d1" {
		t.Fatalf("changes = %+v, want one receipt recording its answer", changes)
	}
	if LoadDelivery(changes).Pending("a1") {
		t.Error("replayed, the answered attempt is still pending")
	}
	want := answer
	want.DeliveryID = "d1"
	plain := r
	plain.Forward = nil
	if got := Expand(r); !reflect.DeepEqual(got, []Event{plain, ForwardRequested{DeliveryID: "d1", AttemptID: "a1", EndpointID: "ep"}, want}) {
		t.Errorf("expanded to %+v", got)
	}

	for name, refuse := range map[string]func(*Delivery) ForwardResponded{
		"another attempt": func(*Delivery) ForwardResponded { a := answer; a.AttemptID = "a2"; return a },
		"a copy":          func(*Delivery) ForwardResponded { a := answer; a.Copy = true; return a },
		"answered already": func(d *Delivery) ForwardResponded {
			d.RespondAtReceipt(answer)
			return answer
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := fresh(t)
			a := refuse(d)
			before := d.Changes()[0]
			if d.RespondAtReceipt(a) {
				t.Fatalf("took %+v", a)
			}
			if !reflect.DeepEqual(d.Changes()[0], before) {
				t.Error("a refused answer changed the receipt")
			}
		})
	}
	loaded := LoadDelivery(fresh(t).Changes())
	if loaded.RespondAtReceipt(answer) {
		t.Error("a delivery already recorded took an answer into its receipt")
	}
}
