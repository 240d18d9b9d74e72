package projections

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestPurgeDropsRowsAndRebuildsEqual: a purge decision and the tombstones of
// the inspector's delivery streams leave the views with no row, attempt or
// byte of them; views built from position 0 after the deletion (where the
// deliveries never appear) are the same, and applying the log twice too.
func TestPurgeDropsRowsAndRebuildsEqual(t *testing.T) {
	e := newEnv(t, Options{})
	e.do(e.newInspector(e.ctx, "insp-p", time.Minute, t0))
	e.do(e.newInspector(e.ctx, "insp-k", time.Minute, t0))
	gone := []string{"p-1", "p-2", "p-3"}
	for i, id := range gone {
		e.do(e.receive(e.ctx, id, "insp-p", domain.AddressInspector, "", request("/p", "body"), t0.Add(time.Duration(i)*time.Second)))
	}
	e.do(e.receive(e.ctx, "k-1", "insp-k", domain.AddressInspector, "", request("/k", "kept"), t0))
	e.do(e.save(e.ctx, domain.RefusalsStream("insp-p"), domain.Any(), t0,
		domain.AddressRateLimited{Address: "insp-p", AddressKind: domain.AddressInspector, Refused: 7, From: "x", To: "y"}))

	in, err := e.views.Inspector(e.ctx, "insp-p")
	if err != nil {
		t.Fatal(err)
	}
	if in.StoredBytes <= 0 || in.Refused != 7 {
		t.Fatalf("before the purge: %+v", in)
	}
	last := in.LastActivityAt

	// The decision, then the deletions, as the retention sweep makes them.
	evs, err := e.load(e.ctx, domain.InspectorStream("insp-p"))
	if err != nil {
		t.Fatal(err)
	}
	insp := domain.LoadInspector(evs)
	now := last.Add(time.Minute + time.Hour)
	if ok, err := insp.PurgeIfRetained(last, now, time.Hour, int64(len(gone))); !ok || err != nil {
		t.Fatalf("PurgeIfRetained = %v, %v", ok, err)
	}
	e.do(e.save(e.ctx, domain.InspectorStream("insp-p"), insp.Expected(), now, insp.Changes()...))
	for _, id := range gone {
		res, err := e.store.DeleteStream(e.ctx, domain.DeliveryStream(id), domain.Any())
		if err != nil {
			t.Fatal(err)
		}
		e.waitFor(e.views, res.Position)
	}

	in, err = e.views.Inspector(e.ctx, "insp-p")
	if err != nil {
		t.Fatal(err)
	}
	if !in.Purged || !in.Expired || in.StoredBytes != 0 || in.Refused != 7 || !in.LastActivityAt.Equal(last) {
		t.Fatalf("after the purge: %+v (last activity was %s)", in, last)
	}
	page, err := e.views.Deliveries(e.ctx, "insp-p", 10, "")
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("purged inspector's history: %d rows, %v", len(page.Items), err)
	}
	if ids, err := e.views.PurgedDeliveries(e.ctx, 10); err != nil || len(ids) != 0 {
		t.Fatalf("PurgedDeliveries = %v, %v", ids, err)
	}
	if d := e.delivery("k-1"); d.Address != "insp-k" {
		t.Fatalf("the other inspector's delivery: %+v", d)
	}
	live := dump(t, e.views)

	fresh := e.open("fresh.db", Options{})
	e.run(fresh)
	e.sync(fresh)
	compareDumps(t, "views from position 0 after the purge", live, dump(t, fresh))

	if err := e.views.Rebuild(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.sync(e.views)
	compareDumps(t, "rebuilt views", live, dump(t, e.views))

	events := e.allEvents()
	twice := e.open("twice.db", Options{})
	applyTB(t, twice, events)
	if _, err := twice.w.ExecContext(e.ctx, "UPDATE checkpoint SET position = 0"); err != nil {
		t.Fatal(err)
	}
	twice.setPosition(0)
	applyTB(t, twice, events)
	compareDumps(t, "applied twice", live, dump(t, twice))
}

// TestPurgeCandidates lists inspectors idle past TTL plus retention only.
func TestPurgeCandidates(t *testing.T) {
	e := newEnv(t, Options{})
	e.do(e.newInspector(e.ctx, "old", time.Minute, t0))
	e.do(e.newInspector(e.ctx, "young", time.Minute, t0.Add(time.Hour)))
	got, err := e.views.PurgeCandidates(e.ctx, t0.Add(time.Minute+time.Hour), time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "old" || !got[0].LastActivityAt.Equal(t0) || got[0].TTL != time.Minute {
		t.Fatalf("PurgeCandidates = %+v, want only old", got)
	}
}

// TestRetainedDeliveriesWalkEndpointsInOrder: the deletions' pages go
// Endpoint by Endpoint in id order without sorting what they find (a sort
// would read every retained delivery of the relay for each page).
func TestRetainedDeliveriesWalkEndpointsInOrder(t *testing.T) {
	s := newSynth(t, []byte("{}"))
	v := s.open("views.db")
	for _, q := range retainedDeliveriesQueries {
		rows, err := v.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, "ep", 500)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := fmt.Sprint(plan)
		if strings.Contains(text, "TEMP B-TREE") || !strings.Contains(text, "deliveries_by_received (address=? AND received_at<?)") {
			t.Errorf("retained deliveries are listed with %q: want a walk of the Endpoints by id and one index range each", text)
		}
	}
}
