package projections

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestDeferredUpdatesMatchEventByEvent applies batches that take the
// shortcuts of a batch (deliveries created and answered in it with no
// attempt outcome, activity stored once per address) once whole and once an
// event per batch: both must leave the same rows and read the same.
func TestDeferredUpdatesMatchEventByEvent(t *testing.T) {
	s := newSynth(t, []byte(`{"n":1}`))
	at := func(sec int) { s.at = t0.Add(time.Duration(sec)*time.Second - time.Millisecond) } // queue adds 1ms
	inspector := func(id string, kind domain.AddressKind, accountID string) {
		d := s.nextID()
		s.queue(domain.DeliveryStream(d),
			domain.DeliveryReceived{DeliveryID: d, Address: id, AddressKind: kind, AccountID: accountID, Method: "POST", Target: "/",
				Headers: []domain.Header{{Name: "N", Value: d}}, Body: []byte(d), BodySize: int64(len(d)), Complete: true},
			domain.DeliveryAnswered{DeliveryID: d, Status: 204})
	}
	// A request recorded before its address exists moves no activity; the
	// address's creation then starts it, and later requests move it
	// forward only (occurred-at times need not follow the log).
	at(10)
	inspector("insp-a", domain.AddressInspector, "")
	at(1)
	s.queue(domain.InspectorStream("insp-a"), domain.InspectorCreated{InspectorID: "insp-a", IdleTTLMs: 60000})
	at(5)
	inspector("insp-a", domain.AddressInspector, "")
	at(3)
	inspector("insp-a", domain.AddressInspector, "")
	at(20)
	inspector("ep-a", domain.AddressEndpoint, "acct-1")
	at(2)
	s.queue(domain.EndpointStream("ep-a"), domain.EndpointCreated{EndpointID: "ep-a", AccountID: "acct-1", Name: "a",
		Mode: domain.ModeLog, Target: "", ResponseCapture: false})
	at(7)
	inspector("ep-a", domain.AddressEndpoint, "acct-1")
	// Attempts without an outcome leave the answer to DeliveryAnswered, and
	// so does an outcome that lands after it: the sender got the 504.
	for _, outcome := range []bool{false, true} {
		d := s.nextID()
		stream := domain.DeliveryStream(d)
		s.queue(stream, domain.DeliveryReceived{DeliveryID: d, Address: "ep-b", AddressKind: domain.AddressEndpoint,
			AccountID: "acct-1", Method: "PUT", Target: "/x", Body: []byte("x"), BodySize: 1, Complete: true})
		s.queue(stream, domain.ForwardRequested{DeliveryID: d, AttemptID: "a1", EndpointID: "ep-b"})
		s.queue(stream, domain.DeliveryAnswered{DeliveryID: d, Status: 504})
		if outcome {
			s.queue(stream, domain.ForwardResponded{DeliveryID: d, AttemptID: "a1", Status: 202,
				Headers: []domain.Header{{Name: "Late", Value: "yes"}}, Body: []byte("late"), BodySize: 4, Captured: true, DurationMs: 40000})
		}
	}
	// Answered at receipt, in the DeliveryReceived itself: alone, and
	// followed by a forward whose outcome then decides.
	for _, forward := range []bool{false, true} {
		d := s.nextID()
		stream := domain.DeliveryStream(d)
		s.queue(stream, domain.DeliveryReceived{DeliveryID: d, Address: "ep-c", AddressKind: domain.AddressEndpoint,
			AccountID: "acct-1", Method: "POST", Target: "/", Body: []byte("c"), BodySize: 1, Complete: true,
			Answer: &domain.ReceiptAnswer{Status: 503, Reason: "no agent"}})
		if forward {
			s.queue(stream, domain.ForwardRequested{DeliveryID: d, AttemptID: "r1", EndpointID: "ep-c", Retry: true})
			s.queue(stream, domain.ForwardFailed{DeliveryID: d, AttemptID: "r1", Status: 502, Error: "refused"})
		}
	}
	events := s.take()

	whole, split := s.open("whole.db"), s.open("split.db")
	applyTB(t, whole, events)
	for i := range events {
		applyTB(t, split, events[i:i+1])
	}
	compareDumps(t, "one batch", dump(t, split), dump(t, whole))
	compareHistories(t, "one batch", histories(t, split), histories(t, whole))

	ctx := t.Context()
	if in, err := whole.Inspector(ctx, "insp-a"); err != nil || !in.LastActivityAt.Equal(t0.Add(5*time.Second)) {
		t.Errorf("insp-a: last activity %v, %v; want %v", in.LastActivityAt, err, t0.Add(5*time.Second))
	}
	if a, err := whole.Address(ctx, "ep-a"); err != nil || !a.LastActivityAt.Equal(t0.Add(7*time.Second)) {
		t.Errorf("ep-a: last activity %v, %v; want %v", a.LastActivityAt, err, t0.Add(7*time.Second))
	}
	p, err := whole.Deliveries(ctx, "ep-b", 10, "")
	if err != nil || len(p.Items) != 2 {
		t.Fatalf("ep-b: %d deliveries, %v", len(p.Items), err)
	}
	if d := p.Items[0]; status(d.ResponseStatus) != "504" || string(d.ResponseBody) != "late" || len(d.ResponseHeaders) != 1 ||
		len(d.Attempts) != 1 || status(d.Attempts[0].Status) != "202" || !d.Attempts[0].Late {
		t.Errorf("with a late outcome: status %s, body %q, headers %v, attempts %+v; want 504 (what the sender got), the local answer late, the attempt 202",
			status(d.ResponseStatus), d.ResponseBody, d.ResponseHeaders, d.Attempts)
	}
	if d := p.Items[1]; status(d.ResponseStatus) != "504" || d.ResponseBody != nil || len(d.Attempts) != 1 || d.Attempts[0].Late {
		t.Errorf("without an outcome: status %s, body %q, %d attempts; want 504, nil, 1", status(d.ResponseStatus), d.ResponseBody, len(d.Attempts))
	}
	p, err = whole.Deliveries(ctx, "ep-c", 10, "")
	if err != nil || len(p.Items) != 2 {
		t.Fatalf("ep-c: %d deliveries, %v", len(p.Items), err)
	}
	if got := status(p.Items[0].ResponseStatus) + " " + status(p.Items[1].ResponseStatus); got != "502 503" {
		t.Errorf("answered at receipt: statuses %s, want 502 (a later outcome) and 503", got)
	}
}

func TestAnswerAtReceipt(t *testing.T) {
	e := newEnv(t, Options{})
	pos := e.do(e.receiveAnswered(e.ctx, "logged", "insp-1", domain.AddressInspector, "", request("/", "b"), 204, t0))
	if d := e.delivery("logged"); status(d.ResponseStatus) != "204" || d.UpdatedPosition != pos || string(d.Body) != "b" {
		t.Errorf("answered at receipt: status %s, updated at %d, body %q; want 204 at %d", status(d.ResponseStatus), d.UpdatedPosition, d.Body, pos)
	}
	e.do(e.receiveAnswered(e.ctx, "refused", "ep-1", domain.AddressEndpoint, "acct-1", request("/", "r"), 503, t0))
	e.do(e.onDelivery(e.ctx, "refused", t0.Add(time.Second), func(d *domain.Delivery) error {
		return d.RequestRetry("a1", "acct-1", domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}, nil)
	}))
	if d := e.delivery("refused"); status(d.ResponseStatus) != "503" || len(d.Attempts) != 1 {
		t.Errorf("retry pending: status %s, %d attempts; want 503 and 1", status(d.ResponseStatus), len(d.Attempts))
	}
	e.do(e.onDelivery(e.ctx, "refused", t0.Add(2*time.Second), func(d *domain.Delivery) error {
		d.RecordResponse(domain.ForwardResponded{AttemptID: "a1", Status: 200, Body: []byte("ok"), BodySize: 2, Captured: true})
		return nil
	}))
	if d := e.delivery("refused"); status(d.ResponseStatus) != "200" || string(d.ResponseBody) != "ok" {
		t.Errorf("after the retry: status %s, body %q; want 200, ok", status(d.ResponseStatus), d.ResponseBody)
	}
}

// TestPayloadsComeFromTheLog reads deliveries whose events are not where
// the one stream read of the usual case finds them: a response far after
// its request, and events appended to another stream than the delivery's.
func TestPayloadsComeFromTheLog(t *testing.T) {
	e := newEnv(t, Options{})
	const ep = "ep-1"
	hdr := func(v string) []domain.Header { return []domain.Header{{Name: "X", Value: v}} }

	// Nine failed tries put the answer more than maxResponseSpan events
	// after the request.
	e.must(e.receive(e.ctx, "far", ep, domain.AddressEndpoint, "acct-1", request("/far", "far body"), t0))
	for i := range 9 {
		att := fmt.Sprintf("a%d", i)
		e.must(e.onDelivery(e.ctx, "far", t0, func(d *domain.Delivery) error {
			if i == 0 {
				return d.RequestForward(att, ep, false)
			}
			return d.RequestRetry(att, "acct-1", domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}, nil)
		}))
		e.must(e.onDelivery(e.ctx, "far", t0, func(d *domain.Delivery) error {
			d.RecordFailure(domain.ForwardFailed{AttemptID: att, Status: 502, Error: "refused"})
			return nil
		}))
	}
	e.must(e.onDelivery(e.ctx, "far", t0, func(d *domain.Delivery) error {
		return d.RequestRetry("last", "acct-1", domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}, nil)
	}))
	e.must(e.onDelivery(e.ctx, "far", t0, func(d *domain.Delivery) error {
		d.RecordResponse(domain.ForwardResponded{AttemptID: "last", Status: 200, Headers: hdr("far"), Body: []byte("at last"), BodySize: 7, Captured: true})
		return nil
	}))

	// Events of the delivery appended to other streams.
	foreign := request("/foreign", "foreign body")
	e.must(e.save(e.ctx, "imported-1", domain.Any(), t0,
		domain.InspectorCreated{InspectorID: "unrelated", IdleTTLMs: 1},
		domain.DeliveryReceived{DeliveryID: "foreign", Address: ep, AddressKind: domain.AddressEndpoint, AccountID: "acct-1",
			Method: foreign.Method, Target: foreign.Target, Headers: hdr("foreign"), Body: foreign.Body, BodySize: foreign.BodySize, Complete: true}))
	e.must(e.save(e.ctx, "imported-2", domain.Any(), t0,
		domain.ForwardRequested{DeliveryID: "foreign", AttemptID: "a1", EndpointID: ep},
		domain.ForwardResponded{DeliveryID: "foreign", AttemptID: "a1", Status: 201, Headers: hdr("response"), Body: []byte("elsewhere"), BodySize: 9, Captured: true}))
	e.must(e.receive(e.ctx, "split", ep, domain.AddressEndpoint, "acct-1", request("/split", "own body"), t0))
	e.must(e.save(e.ctx, "imported-3", domain.Any(), t0,
		domain.ForwardResponded{DeliveryID: "split", AttemptID: "a1", Status: 203, Headers: hdr("split"), BodySize: 3, Captured: false}))
	e.sync(e.views)

	tests := []struct {
		id, body, respHeader string
		respBody             []byte
		status               string
	}{
		{"far", "far body", "far", []byte("at last"), "200"},
		{"foreign", "foreign body", "response", []byte("elsewhere"), "201"},
		{"split", "own body", "split", nil, "203"},
	}
	all := histories(t, e.views)
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			d := all[tc.id]
			if string(d.Body) != tc.body || len(d.Headers) == 0 {
				t.Errorf("request: body %q, headers %v; want %q", d.Body, d.Headers, tc.body)
			}
			if len(d.ResponseHeaders) != 1 || d.ResponseHeaders[0].Value != tc.respHeader {
				t.Errorf("response headers %v, want X: %s", d.ResponseHeaders, tc.respHeader)
			}
			if !bytes.Equal(d.ResponseBody, tc.respBody) || (d.ResponseBody == nil) != (tc.respBody == nil) {
				t.Errorf("response body %q (nil %v), want %q", d.ResponseBody, d.ResponseBody == nil, tc.respBody)
			}
			if status(d.ResponseStatus) != tc.status {
				t.Errorf("status %s, want %s", status(d.ResponseStatus), tc.status)
			}
		})
	}
}
