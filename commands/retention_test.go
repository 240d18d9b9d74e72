package commands_test

import (
	"errors"
	"testing"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
)

// receiveAt records a delivery to an inspector, answered 204, at time at.
func (e *env) receiveAt(t *testing.T, id, inspectorID string, at time.Time) {
	t.Helper()
	d, err := domain.ReceiveAndAnswer(id, inspectorID, domain.AddressInspector, "",
		domain.CapturedRequest{Method: "POST", Target: "/" + id, Host: "h", Proto: "HTTP/1.1", Body: []byte("b"), BodySize: 1, Complete: true}, 204, "")
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := e.codec.EncodeAll(nil, commands.NewEventID, d.Changes(), at, domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.store.Append(ctx(t), domain.DeliveryStream(id), domain.NoStream(), data...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.views.WaitFor(ctx(t), res.Position); err != nil {
		t.Fatal(err)
	}
}

// TestSweepRetention: nothing goes before TTL plus retention; then the
// decision and the deletions; and a sweep that stopped after the decision
// is finished by the next one.
func TestSweepRetention(t *testing.T) {
	e := newEnv(t, defaultConfig()) // TTL 1h
	const retention = 24 * time.Hour
	done, err := e.svc.CreateInspector(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	halfway, err := e.svc.CreateInspector(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	at := done.LastActivityAt.Add(time.Second)
	for _, d := range []struct{ id, insp string }{{"d-1", done.ID}, {"d-2", done.ID}, {"h-1", halfway.ID}, {"h-2", halfway.ID}} {
		e.receiveAt(t, d.id, d.insp, at)
	}
	last, err := e.views.Inspector(ctx(t), halfway.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The "halfway" inspector's decision is in the log, its deletions are not.
	_, events := e.stream(t, domain.InspectorStream(halfway.ID))
	in := domain.LoadInspector(events)
	after := last.LastActivityAt.Add(time.Hour + retention)
	if ok, err := in.PurgeIfRetained(last.LastActivityAt, after, retention, 2); !ok || err != nil {
		t.Fatalf("PurgeIfRetained = %v, %v", ok, err)
	}
	data, _, err := e.codec.EncodeAll(nil, commands.NewEventID, in.Changes(), after, domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Append(ctx(t), domain.InspectorStream(halfway.ID), in.Expected(), data...); err != nil {
		t.Fatal(err)
	}

	res, err := e.svc.SweepRetention(ctx(t), at.Add(time.Hour+retention-time.Second), retention)
	if err != nil || res.Purged != 0 || res.Deleted != 2 {
		t.Fatalf("sweep before the retention ran out: %+v, %v; want only the halfway purge's 2 deletions", res, err)
	}
	res, err = e.svc.SweepRetention(ctx(t), at.Add(time.Hour+retention), retention)
	if err != nil || res.Purged != 1 || res.Deleted != 2 {
		t.Fatalf("sweep at the end of the retention: %+v, %v; want 1 purge and 2 deletions", res, err)
	}
	for _, id := range []string{"d-1", "d-2", "h-1", "h-2"} {
		if _, err := e.store.ReadStream(ctx(t), domain.DeliveryStream(id), 0, 1); !errors.Is(err, domain.ErrStreamDeleted) {
			t.Errorf("stream of %s: %v, want deleted", id, err)
		}
		if _, err := e.views.Delivery(ctx(t), id); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("delivery %s in the views: %v", id, err)
		}
	}
	res, err = e.svc.SweepRetention(ctx(t), at.Add(2*(time.Hour+retention)), retention)
	if err != nil || res != (commands.SweepResult{}) {
		t.Fatalf("sweep with nothing left: %+v, %v", res, err)
	}
}
