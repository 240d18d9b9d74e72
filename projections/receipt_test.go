package projections

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// TestReceiptWithItsRequestReadsAsTwoEvents: a delivery whose receipt
// carries its first attempt's request (as the recorder appends a proxied
// delivery now) reads exactly as one recorded the older way, a receipt and
// a ForwardRequested, with the same outcome.
func TestReceiptWithItsRequestReadsAsTwoEvents(t *testing.T) {
	e := newEnv(t, Options{})
	received := func(id string) domain.DeliveryReceived {
		return domain.DeliveryReceived{DeliveryID: id, Address: "ep-1", AddressKind: domain.AddressEndpoint, AccountID: "acct-1",
			Method: "POST", Target: "/hook", Host: "ep-1.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
			Headers: []domain.Header{{Name: "Content-Type", Value: "text/plain"}}, Body: []byte("hi"), BodySize: 2, Complete: true}
	}
	outcome := func(id string) domain.ForwardResponded {
		return domain.ForwardResponded{DeliveryID: id, AttemptID: "a-1", AgentID: "ag", Status: 201, BodySize: 0, DurationMs: 3}
	}
	old, merged := received("old"), received("new")
	merged.Forward = &domain.ReceiptForward{AttemptID: "a-1", EndpointID: "ep-1", Node: "n1"}
	e.must(e.save(e.ctx, domain.DeliveryStream("old"), domain.NoStream(), t0, old,
		domain.ForwardRequested{DeliveryID: "old", AttemptID: "a-1", EndpointID: "ep-1", Node: "n1"}))
	e.do(e.save(e.ctx, domain.DeliveryStream("new"), domain.NoStream(), t0, merged))
	open, err := e.views.OpenAttempts(e.ctx)
	if err != nil || len(open) != 2 || open[0].AttemptID != open[1].AttemptID || open[0].Node != open[1].Node {
		t.Fatalf("open attempts = %+v, %v: want both pending attempts alike", open, err)
	}
	e.must(e.save(e.ctx, domain.DeliveryStream("new"), domain.Any(), t0, outcome("new")))
	e.do(e.save(e.ctx, domain.DeliveryStream("old"), domain.Any(), t0, outcome("old")))

	a, b := e.delivery("old"), e.delivery("new")
	for _, d := range []*readmodel.Delivery{&a, &b} {
		d.ID, d.Position, d.UpdatedPosition, d.Cursor = "", 0, 0, ""
	}
	if len(a.Attempts) != 1 || a.ResponseStatus == nil || *a.ResponseStatus != 201 {
		t.Fatalf("older shape read as %+v", a)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("receipt with its request read as\n%+v\nthe older two events as\n%+v", b, a)
	}
}

// TestReceiptWithItsRequestEqualsRebuild: a receipt with its request and
// the older two events give the views that a rebuild of the log gives.
func TestReceiptWithItsRequestEqualsRebuild(t *testing.T) {
	e := newEnv(t, Options{})
	for i, merged := range []bool{false, true, true} {
		id := fmt.Sprintf("d-%d", i)
		d, err := domain.ReceiveDelivery(id, "ep-1", domain.AddressEndpoint, "acct-1", request("/hook", "x"))
		if err != nil {
			t.Fatal(err)
		}
		if merged {
			err = d.RequestForwardAtReceipt("a-1", "ep-1")
		} else {
			err = d.RequestForward("a-1", "ep-1", false)
		}
		if err != nil {
			t.Fatal(err)
		}
		pos := e.must(e.save(e.ctx, domain.DeliveryStream(id), d.Expected(), t0, d.Changes()...))
		if i < 2 {
			e.must(e.save(e.ctx, domain.DeliveryStream(id), domain.Any(), t0,
				domain.ForwardResponded{DeliveryID: id, AttemptID: "a-1", Status: 200, DurationMs: 1}))
		}
		_ = pos
	}
	sameAsRebuilt(t, e)
}

// TestReceiptWithItsAnswerReadsAsThreeEvents: a delivery whose receipt
// records its first attempt's answer (record.ReceiptHold) reads exactly as
// one recorded as a receipt with its request and a ForwardResponded, with
// the response read back from the log alike, the answer timed when it
// came, and the views rebuilt from the log the same.
func TestReceiptWithItsAnswerReadsAsThreeEvents(t *testing.T) {
	e := newEnv(t, Options{})
	received := func(id string) domain.DeliveryReceived {
		return domain.DeliveryReceived{DeliveryID: id, Address: "ep-1", AddressKind: domain.AddressEndpoint, AccountID: "acct-1",
			Method: "POST", Target: "/hook", Host: "ep-1.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
			Headers: []domain.Header{{Name: "Content-Type", Value: "text/plain"}}, Body: []byte("hi"), BodySize: 2, Complete: true,
			Forward: &domain.ReceiptForward{AttemptID: "a-1", EndpointID: "ep-1", Node: "n1"}}
	}
	outcome := func(id string) domain.ForwardResponded {
		return domain.ForwardResponded{DeliveryID: id, AttemptID: "a-1", AgentID: "ag", Status: 201, DurationMs: 3,
			Headers: []domain.Header{{Name: "X-Made", Value: "yes"}}, Body: []byte("made"), BodySize: 4, Captured: true, Signature: "stripe valid"}
	}
	answered := t0.Add(3 * time.Millisecond)
	e.must(e.save(e.ctx, domain.DeliveryStream("two"), domain.NoStream(), t0, received("two")))
	e.must(e.save(e.ctx, domain.DeliveryStream("two"), domain.Any(), answered, outcome("two")))
	one := received("one")
	r := outcome("one")
	one.Forward.Responded = &r
	e.do(e.save(e.ctx, domain.DeliveryStream("one"), domain.NoStream(), t0, one))

	a, b := e.delivery("two"), e.delivery("one")
	if len(b.Attempts) != 1 || b.ResponseStatus == nil || *b.ResponseStatus != 201 || string(b.ResponseBody) != "made" ||
		len(b.ResponseHeaders) != 1 || !b.Attempts[0].OutcomeAt.Equal(answered) {
		t.Fatalf("receipt with its answer read as %+v", b)
	}
	for _, d := range []*readmodel.Delivery{&a, &b} {
		d.ID, d.Position, d.UpdatedPosition, d.Cursor = "", 0, 0, ""
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("receipt with its answer read as\n%+v\nthe receipt and its answer as two events as\n%+v", b, a)
	}
	open, err := e.views.OpenAttempts(e.ctx)
	if err != nil || len(open) != 0 {
		t.Errorf("open attempts = %+v, %v: want none", open, err)
	}
	for _, id := range []string{"one", "two"} {
		got, err := e.views.History.AttemptResponses(e.ctx, id, MaxAttemptResponseBytes)
		if err != nil || len(got) != 1 || got["a-1"].Status != 201 || string(got["a-1"].Body) != "made" {
			t.Errorf("%s: attempt responses %+v, %v", id, got, err)
		}
	}

	sameAsRebuilt(t, e)
}

// TestFastReceivedReadsTheAnswerInTheReceipt: a receipt that records its
// answer takes the fast decoder, not encoding/json, and decodes alike.
func TestFastReceivedReadsTheAnswerInTheReceipt(t *testing.T) {
	r := domain.ForwardResponded{DeliveryID: "d", AttemptID: "a", AgentID: "ag", Status: 200, DurationMs: 2,
		Headers: []domain.Header{{Name: "A", Value: "b"}}, Body: []byte("ok"), BodySize: 2, Captured: true,
		Fidelity: &domain.Fidelity{Agent: domain.DigestRequest("POST", "/", nil, nil), Relay: domain.DigestRequest("POST", "/", nil, nil)}}
	p := domain.DeliveryReceived{DeliveryID: "d", Address: "ep", AddressKind: domain.AddressEndpoint, Method: "POST", Target: "/",
		Headers: []domain.Header{}, Body: []byte("x"), BodySize: 1, Complete: true,
		Forward: &domain.ReceiptForward{AttemptID: "a", EndpointID: "ep", Responded: &r}}
	data, err := domain.NewCodec().Encode("id", p, t0, domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	fast, ok := fastReceived(data.Data)
	if !ok {
		t.Fatalf("fastReceived left %s to encoding/json", data.Data)
	}
	slow, err := decodeReceivedJSON(data.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fast, slow) || fast.Forward == nil || fast.Forward.Responded == nil || fast.Forward.Responded.Status != 200 {
		t.Errorf("fast %+v, encoding/json %+v", fast.Forward, slow.Forward)
	}
}

// sameAsRebuilt checks that e's views equal views built afresh from its log.
func sameAsRebuilt(t *testing.T, e *env) {
	t.Helper()
	e.sync(e.views)
	fresh := e.open("fresh.db", Options{})
	e.run(fresh)
	e.sync(fresh)
	compareDumps(t, "rebuilt from the stored events", dump(t, fresh), dump(t, e.views))
	compareHistories(t, "rebuilt from the stored events", histories(t, fresh), histories(t, e.views))
}

// TestAnswerNotStoredSaysWhy: an answer recorded without its body because
// of the storage quota reads back with its reason, as the delivery's
// latest response and as its attempt's; a stored one reads with none.
func TestAnswerNotStoredSaysWhy(t *testing.T) {
	e := newEnv(t, Options{})
	received := domain.DeliveryReceived{DeliveryID: "d1", Address: "ep-1", AddressKind: domain.AddressEndpoint, AccountID: "acct-1",
		Method: "POST", Target: "/hook", Host: "ep-1.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
		Headers: []domain.Header{}, Body: []byte("hi"), BodySize: 2, Complete: true,
		Forward: &domain.ReceiptForward{AttemptID: "a-1", EndpointID: "ep-1"}}
	e.do(e.save(e.ctx, domain.DeliveryStream("d1"), domain.NoStream(), t0, received,
		domain.ForwardResponded{DeliveryID: "d1", AttemptID: "a-1", Status: 200, Headers: []domain.Header{}, Body: []byte("kept"), BodySize: 4, Captured: true, DurationMs: 1},
		domain.ForwardRequested{DeliveryID: "d1", AttemptID: "a-2", EndpointID: "ep-1", Retry: true, Queued: true},
		domain.ForwardResponded{DeliveryID: "d1", AttemptID: "a-2", Status: 200, Headers: []domain.Header{}, BodySize: 204800, DurationMs: 1,
			NotCaptured: domain.NotCapturedStorageQuota}))
	d := e.delivery("d1")
	if d.ResponseBody != nil || d.ResponseNotCaptured != domain.NotCapturedStorageQuota {
		t.Errorf("latest response: body %q, not captured %q; want none, %q", d.ResponseBody, d.ResponseNotCaptured, domain.NotCapturedStorageQuota)
	}
	got, err := e.views.History.AttemptResponses(e.ctx, "d1", MaxAttemptResponseBytes)
	if err != nil {
		t.Fatal(err)
	}
	if a1, a2 := got["a-1"], got["a-2"]; !a1.Captured || a1.NotCaptured != "" || a2.Captured || a2.NotCaptured != domain.NotCapturedStorageQuota {
		t.Errorf("attempts' responses: a-1 %+v, a-2 %+v", a1, a2)
	}
}
