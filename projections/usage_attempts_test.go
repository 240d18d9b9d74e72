package projections

import (
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
)

// TestAttemptAnswersCountInStoredBytes: an attempt's answer is in the log
// beside its delivery's receipt, so its bytes (headers and a captured
// body) count in the delivery's, its account's stored bytes, as the
// receipt's do; deleting the delivery takes them all off, and a rebuild
// and a second application give the same figures.
func TestAttemptAnswersCountInStoredBytes(t *testing.T) {
	e := newEnv(t, Options{})
	e.do(e.signUp(e.ctx, "acc", "A", "tok", "secret", t0))
	e.do(e.newEndpoint(e.ctx, "ep", "acc", domain.EndpointSettings{Name: "one", Mode: domain.ModeProxy, Target: "127.0.0.1:3000"}, t0))
	big := []byte(strings.Repeat("x", 40<<10))
	for _, id := range []string{"d-1", "d-2"} {
		e.do(e.receive(e.ctx, id, "ep", domain.AddressEndpoint, "acc", request("/"+id, "hi"), t0))
		for i, attempt := range []string{id + "-a1", id + "-a2", id + "-a3"} {
			e.do(e.onDelivery(e.ctx, id, t0, func(d *domain.Delivery) error {
				return d.RequestForward(attempt, "ep", i > 0)
			}))
			e.do(e.onDelivery(e.ctx, id, t0, func(d *domain.Delivery) error {
				d.RecordResponse(domain.ForwardResponded{AttemptID: attempt, Status: 200, Body: big, BodySize: int64(len(big)), Captured: true})
				return nil
			}))
		}
	}
	stored := func(id string) int64 {
		evs, err := e.store.ReadStream(e.ctx, domain.DeliveryStream(id), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, ev := range evs {
			if ev.Type == domain.TypeDeliveryReceived || ev.Type == domain.TypeForwardResponded {
				n += int64(len(ev.Data))
			}
		}
		return n
	}
	d1, d2 := stored("d-1"), stored("d-2")
	if d1 < 3*int64(len(big)) {
		t.Fatalf("d-1 stores %d bytes in the log, want its three answers' at least", d1)
	}
	own := ownStreamBytes(t, e, "acc", "ep")
	if u, err := e.views.AccountQuota(e.ctx, "acc"); err != nil || u.StoredBytes != d1+d2+own || u.Deliveries != 2 {
		t.Fatalf("usage %+v, %v; want %d bytes (receipts and answers, and %d of its own streams), 2 deliveries", u, err, d1+d2+own, own)
	}
	var row int64
	if err := e.views.w.QueryRowContext(e.ctx, "SELECT stored_bytes FROM deliveries WHERE id = ?", "d-1").Scan(&row); err != nil || row != d1 {
		t.Fatalf("d-1 stores %d bytes in the views (%v), %d in the log", row, err, d1)
	}
	res, err := e.store.DeleteStream(e.ctx, domain.DeliveryStream("d-1"), domain.Any())
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor(e.views, res.Position)
	if u, err := e.views.AccountQuota(e.ctx, "acc"); err != nil || u.StoredBytes != d2+own || u.Deliveries != 1 {
		t.Fatalf("usage after deleting d-1 %+v, %v; want %d bytes", u, err, d2+own)
	}

	usage := func(v *Runner) map[string][]string {
		d := dump(t, v)
		return map[string][]string{"accounts": d["accounts"], "deliveries": d["deliveries"]}
	}
	live := usage(e.views)
	if err := e.views.Rebuild(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.sync(e.views)
	compareDumps(t, "rebuilt views", live, usage(e.views))
	events := e.allEvents()
	twice := e.open("twice.db", Options{})
	applyTB(t, twice, events)
	if _, err := twice.w.ExecContext(e.ctx, "UPDATE checkpoint SET position = 0"); err != nil {
		t.Fatal(err)
	}
	twice.setPosition(0)
	applyTB(t, twice, events)
	compareDumps(t, "applied twice", live, usage(twice))
}
