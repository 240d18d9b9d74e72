package projections

import (
	"bytes"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// TestDeliveryReadsReserveWhatTheyRead: a delivery's read of its request,
// of its latest answer or of both reserves of the answer's log budget
// (deliveryRefs.readSize) at least what it reads, and a read of the
// receipt alone exactly its bytes; a read of one part reserves none of
// the other where the log holds it apart. Before, every read reserved the
// delivery's stored bytes: its request alone (2 bytes of body) the 1.4 MB
// of its answers.
func TestDeliveryReadsReserveWhatTheyRead(t *testing.T) {
	e := newEnv(t, Options{})
	const big = 1 << 20
	received := func(id string, body int) domain.DeliveryReceived {
		return domain.DeliveryReceived{DeliveryID: id, Address: "ep-1", AddressKind: domain.AddressEndpoint, AccountID: "acct-1",
			Method: "POST", Target: "/hook", Host: "ep-1.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
			Headers: []domain.Header{{Name: "Content-Type", Value: "text/plain"}}, Body: bytes.Repeat([]byte{'q'}, body),
			BodySize: int64(body), Complete: true}
	}
	answer := func(id, attempt string, body int) domain.ForwardResponded {
		return domain.ForwardResponded{DeliveryID: id, AttemptID: attempt, Status: 200, Body: bytes.Repeat([]byte{'a'}, body),
			BodySize: int64(body), Captured: true, DurationMs: 1}
	}
	held := func(id string, body, answered int) domain.DeliveryReceived {
		r := answer(id, id+"-a0", answered)
		d := received(id, body)
		d.Forward = &domain.ReceiptForward{AttemptID: id + "-a0", EndpointID: "ep-1", Responded: &r}
		return d
	}
	requested := func(id, attempt string, retry bool) domain.ForwardRequested {
		return domain.ForwardRequested{DeliveryID: id, AttemptID: attempt, EndpointID: "ep-1", Retry: retry}
	}
	shapes := []struct {
		id     string
		events []domain.Event
		// apart: the request and the latest answer are events of their
		// own, so a read of either reserves none of the other.
		apart bool
	}{
		{"small-request", []domain.Event{received("small-request", 2), requested("small-request", "a0", false),
			answer("small-request", "a0", big), requested("small-request", "a1", true), answer("small-request", "a1", big/2)}, true},
		{"large-request", []domain.Event{received("large-request", big), requested("large-request", "a0", false),
			answer("large-request", "a0", 2)}, true},
		{"next-to-it", []domain.Event{held("next-to-it", 2, 0)}, false},
		{"in-receipt", []domain.Event{held("in-receipt", big, big)}, false},
		{"first-in-receipt", []domain.Event{held("first-in-receipt", 2, big), requested("first-in-receipt", "a1", true),
			answer("first-in-receipt", "a1", 2)}, true},
		{"unanswered", []domain.Event{received("unanswered", big)}, false},
	}
	for _, s := range shapes {
		e.must(e.save(e.ctx, domain.DeliveryStream(s.id), domain.NoStream(), t0, s.events...))
	}
	e.sync(e.views)
	v := e.views.History
	for _, s := range shapes {
		_, refs, err := scanDelivery(e.views.r.QueryRowContext(e.ctx, qDelivery, s.id))
		if err != nil {
			t.Fatal(err)
		}
		if refs.requestBytes <= 0 || refs.requestBytes > refs.stored {
			t.Fatalf("%s: request bytes %d of %d stored", s.id, refs.requestBytes, refs.stored)
		}
		sizes := map[string]int64{}
		for _, part := range []struct {
			name              string
			request, response bool
		}{{"request", true, false}, {"answer", false, true}, {"both", true, true}} {
			r := refs
			if !part.response {
				r.response = nil
			}
			if !part.request && r.response == nil {
				continue // nothing to read
			}
			size := r.readSize(part.request)
			sizes[part.name] = size
			d := readmodel.Delivery{ID: s.id}
			n, err := v.readPayload(e.ctx, &d, r, part.request)
			if err != nil {
				t.Fatalf("%s, %s: %v", s.id, part.name, err)
			}
			t.Logf("%s, %s: reserved %d, read %d (stored %d, receipt %d)", s.id, part.name, size, n, refs.stored, refs.requestBytes)
			if size < n {
				t.Errorf("%s, %s: reserved %d bytes of the budget and read %d", s.id, part.name, size, n)
			}
			if receiptAlone := r.response == nil || *r.response == r.request; receiptAlone && size != n {
				t.Errorf("%s, %s: the receipt alone read %d bytes, reserved %d", s.id, part.name, n, size)
			}
			if part.request != (d.Body != nil) {
				t.Errorf("%s, %s: body %d bytes read, want it read: %v", s.id, part.name, len(d.Body), part.request)
			}
			if part.response && refs.response != nil && d.ResponseBody == nil {
				t.Errorf("%s, %s: its answer not read", s.id, part.name)
			}
			if !part.response && d.ResponseBody != nil {
				t.Errorf("%s, %s: its answer read", s.id, part.name)
			}
		}
		answers := refs.stored - refs.requestBytes // in events of their own
		if s.apart && (sizes["request"] > refs.requestBytes || sizes["answer"] > answers+logReadSlack) {
			t.Errorf("%s: a read of one part reserves the other: request %d (receipt %d), answer %d (answers %d)",
				s.id, sizes["request"], refs.requestBytes, sizes["answer"], answers)
		}
	}
}
