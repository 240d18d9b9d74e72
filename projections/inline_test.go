package projections

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/readmodel"
)

// inlineAdapter is app's adapter (app/inline.go), repeated here.
type inlineAdapter struct{ *Inline }

func (a inlineAdapter) Apply(ctx context.Context, tx *sql.Tx, b sqlite.InlineBatch) (func(bool), error) {
	return a.Inline.Apply(ctx, tx, b.After, b.Events, b.Read)
}

// attachInline makes the env's log apply e.views in its own commits.
func (e *env) attachInline() {
	e.t.Helper()
	if err := e.store.(*sqlite.Store).SetInline(e.ctx, inlineAdapter{e.views.Inline(0)}); err != nil {
		e.t.Fatal(err)
	}
}

// TestInlineViewsCommitWithTheLog: with Run stopped, the views still reach
// every append's position by the time the append returns, so they were
// written in the log's own commit; views the log got ahead of before the
// projection was attached catch up in the next commit; and the views so
// written equal views built from the log by Run.
func TestInlineViewsCommitWithTheLog(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.newInspector(e.ctx, "insp-inline", time.Hour, t0))
	e.sync(e.views)
	e.stop() // from here on only the log's writer writes the views

	behind := e.must(e.receive(e.ctx, "before-attach", "insp-inline", domain.AddressInspector, "", request("/a", "x"), t0))
	if e.views.Position() >= behind {
		t.Fatalf("views at %d before the projection was attached, log at %d", e.views.Position(), behind)
	}
	e.attachInline()
	for _, id := range []string{"d1", "d2", "d3"} {
		pos := e.must(e.receive(e.ctx, id, "insp-inline", domain.AddressInspector, "", request("/"+id, "body"), t0))
		if got := e.views.Position(); got != pos {
			t.Fatalf("views at %d once the append of %s at %d returned", got, id, pos)
		}
		if d := e.delivery(id); d.Position != pos {
			t.Errorf("delivery %s at %d, want %d", id, d.Position, pos)
		}
	}
	if d := e.delivery("before-attach"); d.Position != behind {
		t.Errorf("missed delivery at %d, want %d", d.Position, behind)
	}

	e.stories(4) // concurrent appends: batches of several
	e.sync(e.views)
	live := dump(t, e.views)
	fresh := e.open("fresh.db", Options{})
	e.run(fresh)
	e.sync(fresh)
	compareDumps(t, "views built by Run", dump(t, fresh), live)
	compareHistories(t, "views built by Run", histories(t, fresh), histories(t, e.views))

	// A rebuild while attached ends with the same views, and the log's
	// writer takes the next batch again.
	if err := e.views.Rebuild(e.ctx); err != nil {
		t.Fatal(err)
	}
	compareDumps(t, "rebuilt while attached", live, dump(t, e.views))
	pos := e.must(e.receive(e.ctx, "after-rebuild", "insp-inline", domain.AddressInspector, "", request("/", ""), t0))
	if got := e.views.Position(); got != pos {
		t.Errorf("views at %d once the append after the rebuild at %d returned", got, pos)
	}
}

// TestInlineFailureKeepsTheAppend: a projection that fails takes back its
// own writes only; the append commits and the views stay behind for Run.
func TestInlineFailureKeepsTheAppend(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.newInspector(e.ctx, "insp-inline", time.Hour, t0))
	e.sync(e.views)
	e.stop()
	e.attachInline()
	before := e.views.Position()
	if _, err := e.views.w.ExecContext(e.ctx, "DROP TABLE deliveries"); err != nil {
		t.Fatal(err)
	}
	pos := e.must(e.receive(e.ctx, "d1", "insp-inline", domain.AddressInspector, "", request("/", ""), t0))
	if got := e.views.Position(); got != before {
		t.Errorf("views moved to %d after a failed inline batch, want %d", got, before)
	}
	evs, err := e.store.ReadAll(e.ctx, pos-1, 1)
	if err != nil || len(evs) != 1 || evs[0].Position != pos {
		t.Fatalf("the append at %d is not in the log: %v %v", pos, evs, err)
	}
}

// TestPayloadDecodesAsTheLog: the views given an event's payload (as the
// log's writer gives it in its commit) get what decoding its stored bytes
// gives, for every event of the stories.
func TestPayloadDecodesAsTheLog(t *testing.T) {
	e := newEnv(t, Options{})
	e.stories(2)
	events := e.allEvents()
	types := map[string]bool{}
	for _, ev := range events {
		want, err := e.views.decode(ev)
		if err != nil {
			t.Fatalf("decode %s: %v", ev.Type, err)
		}
		payload, err := e.codec.Decode(ev.Type, ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		ev.Payload = payload
		got, err := e.views.decode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(withoutKinds(got), withoutKinds(want)) {
			t.Errorf("%s at %d: from the payload %+v, from the log %+v", ev.Type, ev.Position, got, want)
		}
		types[ev.Type] = true
	}
	for _, typ := range []string{domain.TypeDeliveryReceived, domain.TypeForwardResponded, domain.TypeForwardRequested} {
		if !types[typ] {
			t.Errorf("the stories have no %s", typ)
		}
	}
}

// withoutKinds drops the lean rows' JSON kinds of the fields left in the
// log (a payload has no JSON to take them from).
func withoutKinds(p any) any {
	switch r := p.(type) {
	case receivedRow:
		r.Headers, r.Body, r.Trailers, r.RedactedQuery = 0, 0, 0, 0
		return r
	case respondedRow:
		r.Headers, r.Body = 0, 0
		return r
	}
	return p
}

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

// TestReceiptWithItsRequestInlineEqualsRebuild: applied in the log's
// commit from their payloads, both shapes give the views a rebuild from
// the stored bytes gives.
func TestReceiptWithItsRequestInlineEqualsRebuild(t *testing.T) {
	e := newEnv(t, Options{})
	e.stop()
	e.attachInline()
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
		} else if got := e.views.Position(); got != pos {
			t.Fatalf("views at %d, the append at %d", got, pos)
		}
	}
	fresh := e.open("fresh.db", Options{})
	e.run(fresh)
	e.sync(fresh)
	compareDumps(t, "rebuilt from the stored events", dump(t, fresh), dump(t, e.views))
	compareHistories(t, "rebuilt from the stored events", histories(t, fresh), histories(t, e.views))
}

// TestLeanPayloadKeepsEveryField: a receipt and an outcome with every
// field set read the same from their payload as from their encoded bytes,
// so a field added to either event cannot be left out of leanPayload.
func TestLeanPayloadKeepsEveryField(t *testing.T) {
	codec := domain.NewCodec()
	v := &Runner{codec: codec}
	for _, ev := range []domain.Event{fillAll(t, &domain.DeliveryReceived{}), fillAll(t, &domain.ForwardResponded{})} {
		d, err := codec.Encode("e1", ev, time.Now(), domain.Trace{})
		if err != nil {
			t.Fatal(err)
		}
		stored := d
		stored.Payload = nil // as read back from the log
		want, err := v.decode(domain.RecordedEvent{EventData: stored})
		if err != nil {
			t.Fatalf("decode %s: %v", d.Type, err)
		}
		withPayload := d
		withPayload.Payload = ev
		got, err := v.decode(domain.RecordedEvent{EventData: withPayload})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(withoutKinds(got), withoutKinds(want)) {
			t.Errorf("%s: from the payload %+v, from the log %+v", d.Type, got, want)
		}
	}
}

// fillAll sets every exported field of *p to a value other than its zero
// value and returns *p.
func fillAll[T any](t *testing.T, p *T) T {
	t.Helper()
	fill(reflect.ValueOf(p).Elem())
	return *p
}

func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}
