package projections

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
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
	if ids, err := e.views.PurgedDeliveries(e.ctx, 10); err != nil || len(ids) != len(gone) {
		t.Fatalf("after the decision, PurgedDeliveries = %v, %v; want the %d deliveries to delete", ids, err, len(gone))
	}
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
	// What stays counted is its own stream and its refusal counts, which
	// the purge keeps.
	own := logBytesOf(t, e, domain.InspectorStream("insp-p")) + logBytesOf(t, e, domain.RefusalsStream("insp-p"))
	if !in.Purged || !in.Expired || in.StoredBytes != own || in.Refused != 7 || !in.LastActivityAt.Equal(last) {
		t.Fatalf("after the purge: %+v (last activity was %s, its own and refusals streams hold %d bytes)", in, last, own)
	}
	page, err := e.views.Deliveries(e.ctx, "insp-p", 10, "")
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("purged inspector's history: %d rows, %v", len(page.Items), err)
	}
	if ids, err := e.views.PurgedDeliveries(e.ctx, 10); err != nil || len(ids) != 0 {
		t.Fatalf("PurgedDeliveries = %v, %v", ids, err)
	}
	if rows := dump(t, e.views)["inspectors_purging"]; len(rows) != 0 {
		t.Fatalf("inspectors still purging once every delivery is gone: %v", rows)
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
	for _, q := range []string{retainedDeliveriesQuery} {
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

// fillOldEndpoint writes an Endpoint row and n of its deliveries straight
// into a views file, all answered and received from t0 on, one a second.
func fillOldEndpoint(tb testing.TB, path, id string, base int64, n int) {
	tb.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO endpoints (id, account_id, name, mode, target, response_capture, created_at, last_activity_at, position, updated_position)
		VALUES (?, 'acct-1', ?, 'LOG', '', 0, ?, ?, ?, ?)`, id, id, t0.UnixNano(), t0.UnixNano(), base-1, base-1); err != nil {
		tb.Fatal(err)
	}
	fillRedeliveries(tb, path, id, base, n, id)
}

// TestRetentionCandidatesCountWithinABound: a sweep's choice of Endpoints
// counts each one's old deliveries only up to MaxCountedRetained, saying
// when there are more, so an Endpoint whose window was lowered on a large
// history costs a sweep about as many pages of the views as a small one:
// 20 000 old deliveries, ten times 2 000, would cost about ten times the
// pages if they were all counted.
func TestRetentionCandidatesCountWithinABound(t *testing.T) {
	t.Parallel() // see insertRows
	limits := domain.RetentionLimits{Default: time.Hour, Max: time.Hour, Min: time.Hour}
	now := t0.Add(30 * 24 * time.Hour)
	read := map[int]int{}
	for _, n := range []int{2_000, 20_000} {
		e := newEnv(t, Options{})
		e.sync(e.views)
		path := filepath.Join(e.dir, "views.db")
		fillOldEndpoint(t, path, "ep-old", 1_000_000_000, n)
		fillOldEndpoint(t, path, "ep-few", 2_000_000_000, 3)
		var got []readmodel.RetentionCandidate
		read[n] = pagesReadOn(t, &e.views.History.r.db, path, func(ctx context.Context) error {
			var err error
			got, err = e.views.RetentionCandidates(ctx, now, limits, "", 100)
			return err
		})
		want := []readmodel.RetentionCandidate{
			{ID: "ep-few", LastActivityAt: t0, Window: time.Hour, Deliveries: 3},
			{ID: "ep-old", LastActivityAt: t0, Window: time.Hour, Deliveries: MaxCountedRetained, DeliveriesAtLeast: true},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d old deliveries: candidates %+v, want %+v", n, got, want)
		}
	}
	t.Logf("a sweep's choice of Endpoints read %d pages of the views beside 2 000 old deliveries, %d beside 20 000", read[2_000], read[20_000])
	if read[20_000] > 2*read[2_000] {
		t.Errorf("a sweep's choice read %d pages of the views beside 20 000 old deliveries, %d beside 2 000: the work grows with the backlog",
			read[20_000], read[2_000])
	}
}
