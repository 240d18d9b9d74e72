package projections

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// statsMix appends, for the Endpoint "ep-s" created at base: 5 deliveries
// answered 200 and 2 filtered (204) in the first minute, 3 forwarded and
// answered 500 by the local process in 10, 40 and 700 ms in the second, 1
// answered 502 and then retried to a 201 in the third, 1 with no answer
// yet, and 4 refused requests.
func statsMix(e *env, base time.Time) {
	e.t.Helper()
	ctx, ep, acct := e.ctx, "ep-s", "acct-s"
	e.do(e.signUp(ctx, acct, "S", "tok-s", "secret-s", base))
	e.do(e.newEndpoint(ctx, ep, acct, domain.EndpointSettings{Name: "s", Mode: domain.ModeProxy, Target: "127.0.0.1:1"}, base))
	at := func(min, sec int) time.Time {
		return base.Add(time.Duration(min)*time.Minute + time.Duration(sec)*time.Second)
	}
	answered := func(id string, status int, reason string, when time.Time) {
		d, err := domain.ReceiveAndAnswer(id, ep, domain.AddressEndpoint, acct, request("/s", "x"), status, reason)
		if err != nil {
			e.t.Fatal(err)
		}
		e.do(e.save(ctx, domain.DeliveryStream(id), d.Expected(), when, d.Changes()...))
	}
	forwarded := func(id string, when time.Time, outcome func(d *domain.Delivery)) {
		e.do(e.receive(ctx, id, ep, domain.AddressEndpoint, acct, request("/s", "x"), when))
		e.do(e.onDelivery(ctx, id, when, func(d *domain.Delivery) error { return d.RequestForward("a1", ep, false) }))
		e.do(e.onDelivery(ctx, id, when.Add(time.Second), func(d *domain.Delivery) error { outcome(d); return nil }))
	}
	for i := range 5 {
		answered(fmt.Sprintf("ok-%d", i), 200, domain.ReasonConfiguredAnswer, at(0, i))
	}
	for i := range 2 {
		answered(fmt.Sprintf("fl-%d", i), 204, domain.ReasonFiltered+"no listener matched", at(0, 10+i))
	}
	for i, ms := range []int64{10, 40, 700} {
		forwarded(fmt.Sprintf("bad-%d", i), at(1, i), func(d *domain.Delivery) {
			d.RecordResponse(domain.ForwardResponded{AttemptID: "a1", Status: 500, DurationMs: ms})
			d.Answer(500, "")
		})
	}
	forwarded("retried", at(2, 0), func(d *domain.Delivery) {
		d.RecordFailure(domain.ForwardFailed{AttemptID: "a1", Status: 502, Error: "refused", DurationMs: 1})
		d.Answer(502, "")
	})
	e.do(e.onDelivery(ctx, "retried", at(2, 5), func(d *domain.Delivery) error {
		return d.RequestRetry("a2", acct, domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}, nil)
	}))
	e.do(e.onDelivery(ctx, "retried", at(2, 6), func(d *domain.Delivery) error {
		d.RecordResponse(domain.ForwardResponded{AttemptID: "a2", Status: 201, DurationMs: 3})
		return nil
	}))
	e.do(e.receive(ctx, "waiting", ep, domain.AddressEndpoint, acct, request("/s", "x"), at(2, 30)))
	e.do(e.save(ctx, domain.EndpointStream(ep)+"-limits", domain.Any(), at(2, 40),
		domain.AddressRateLimited{Address: ep, AddressKind: domain.AddressEndpoint, Refused: 4, From: "x", To: "y"}))
}

func TestStatsCountTheMix(t *testing.T) {
	e := newEnv(t, Options{})
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	statsMix(e, base)
	e.sync(e.views)

	st, err := e.views.Stats(e.ctx, "ep-s", readmodel.StatsHour, base.Add(3*time.Minute), true, base)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Buckets) != readmodel.StatsBuckets {
		t.Fatalf("%d buckets, want %d", len(st.Buckets), readmodel.StatsBuckets)
	}
	tot := st.Totals
	if tot.Deliveries != 12 || tot.Status[2] != 8 || tot.Status[5] != 3 || tot.Pending != 1 || tot.Filtered != 2 || tot.Refused != 4 {
		t.Errorf("totals: %d deliveries, %d 2xx, %d 5xx, %d pending, %d filtered, %d refused; want 12, 8, 3, 1, 2, 4",
			tot.Deliveries, tot.Status[2], tot.Status[5], tot.Pending, tot.Filtered, tot.Refused)
	}
	// Four local answers (10, 40, 700 and 3 ms; the 502 was no answer):
	// the median (2nd of 4) is in the 5-10 ms bucket, the 95th percentile
	// (4th) in 500-1000.
	if tot.Answers != 4 || tot.P50Ms == nil || *tot.P50Ms != 10 || tot.P95Ms == nil || *tot.P95Ms != 1000 {
		t.Errorf("latency: %d answers, p50 %v, p95 %v; want 4, 10, 1000", tot.Answers, msOf(tot.P50Ms), msOf(tot.P95Ms))
	}
	// The last three buckets are the mix's minutes (the range ends with the
	// minute holding now, base+3m).
	b := st.Buckets[len(st.Buckets)-4:]
	want := []struct{ deliveries, ok, bad, pending int64 }{{7, 7, 0, 0}, {3, 0, 3, 0}, {2, 1, 0, 1}, {0, 0, 0, 0}}
	for i, w := range want {
		if b[i].Deliveries != w.deliveries || b[i].Status[2] != w.ok || b[i].Status[5] != w.bad || b[i].Pending != w.pending {
			t.Errorf("bucket %s: %d deliveries, %d 2xx, %d 5xx, %d pending; want %+v", b[i].Start, b[i].Deliveries, b[i].Status[2], b[i].Status[5], b[i].Pending, w)
		}
	}
	// No agent session ever: offline from the Endpoint's creation to now.
	if tot.OfflineSeconds == nil || *tot.OfflineSeconds != 180 {
		t.Errorf("offline %v s, want 180", tot.OfflineSeconds)
	}

	for _, r := range []readmodel.StatsRange{readmodel.StatsDay, readmodel.StatsWeek} {
		st, err := e.views.Stats(e.ctx, "ep-s", r, base.Add(3*time.Minute), true, base)
		if err != nil {
			t.Fatal(err)
		}
		if st.Totals.Deliveries != 12 || st.Totals.Status[5] != 3 || len(st.Buckets) != readmodel.StatsBuckets {
			t.Errorf("%s: %d deliveries, %d 5xx in %d buckets", r, st.Totals.Deliveries, st.Totals.Status[5], len(st.Buckets))
		}
	}
}

// TestStatsRollupEqualsRebuild: the rollup kept live, batch by batch,
// equals the one a rebuild makes in batches of a thousand events, also
// once the log moves more than a week on and old minutes are pruned.
func TestStatsRollupEqualsRebuild(t *testing.T) {
	e := newEnv(t, Options{})
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	statsMix(e, base)
	e.sync(e.views)
	if n := len(dump(t, e.views)["stats_minutes"]); n != 3 {
		t.Fatalf("%d rollup rows, want 3", n)
	}
	live := dump(t, e.views)
	if err := e.views.Rebuild(e.ctx); err != nil {
		t.Fatal(err)
	}
	compareDumps(t, "rebuilt", live, dump(t, e.views))

	// A week and two hours later the mix's minutes are pruned.
	later := base.Add(7*24*time.Hour + 2*time.Hour)
	e.do(e.receive(e.ctx, "later", "ep-s", domain.AddressEndpoint, "acct-s", request("/s", "x"), later))
	e.sync(e.views)
	live = dump(t, e.views)
	if rows := live["stats_minutes"]; len(rows) != 1 {
		t.Fatalf("rollup rows after a week: %v, want the latest minute only", rows)
	}
	if err := e.views.Rebuild(e.ctx); err != nil {
		t.Fatal(err)
	}
	compareDumps(t, "rebuilt after pruning", live, dump(t, e.views))
	fresh := e.open("fresh.db", Options{})
	e.run(fresh)
	e.sync(fresh)
	compareDumps(t, "fresh", live, dump(t, fresh))
}

func msOf(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestStatsOfflineReadsTheRangeOnly: the time with no listener is read
// from the sessions open now and those that ended in the range, never from
// the Endpoint's older history (each session stays in the views for good:
// 200 000 that ended before the week made a week's read walk all of them),
// and a storm of short sessions past statsMaxSessions does not hide the
// session still open (the first sessions to start were read, and the open
// one, started after the storm, was not).
func TestStatsOfflineReadsTheRangeOnly(t *testing.T) {
	t.Parallel() // see insertRows
	s := newSynth(t, []byte("{}"))
	v := s.open("views.db")
	ctx := t.Context()
	now := time.Date(2026, 3, 8, 12, 0, 30, 0, time.UTC)
	day := int64(24 * time.Hour)
	n := now.UnixNano()
	var sessions [][]any
	add := func(from int64, to *int64) {
		pos := len(sessions) + 1
		open := 0
		if to == nil {
			open = 1
		}
		sessions = append(sessions, []any{fmt.Sprint("s", pos), from, to, open, pos})
	}
	ended := func(at int64) *int64 { return &at }
	// Sessions of two months ago, a millisecond each: more than
	// statsMaxSessions, so that a read that reached them would fill its
	// bound with them and miss the week's sessions.
	const old = statsMaxSessions + 1000
	for i := range int64(old) {
		at := n - 60*day + i*int64(time.Second)
		add(at, ended(at+int64(time.Millisecond)))
	}
	// Listening from ten days ago to three days ago, then a storm of empty
	// sessions, then listening again from a day ago until now.
	add(n-10*day, ended(n-3*day))
	storm := statsMaxSessions + 1000
	for i := range int64(storm) {
		at := n - 3*day + (i+1)*int64(time.Second)
		add(at, ended(at))
	}
	add(n-day, nil)
	tx, err := v.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	insertRowsTx(t, tx, `INSERT INTO agent_sessions (agent_id, endpoint_id, target, connected_at, disconnected_at, open, position)
		VALUES (?, 'ep', '127.0.0.1:9', ?, ?, ?, ?)`, len(sessions), func(i int) []any { return sessions[i] })
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	week := func() readmodel.Stats {
		st, err := v.Stats(ctx, "ep", readmodel.StatsWeek, now, true, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := week()
	// Offline from three days ago to a day ago, and nothing else.
	if got := st.Totals.OfflineSeconds; got == nil || *got != 2*24*3600 {
		t.Errorf("offline %v s over the week, want %d (two days)", msOf(got), 2*24*3600)
	}

	// Read the sessions of the range, not the history: each statement's
	// plan searches an index by the end of the sessions (or for the open
	// ones), none scans or walks the Endpoint's sessions by their start.
	for _, q := range statsSessionQueries {
		rows, err := v.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, "ep", st.From.UnixNano(), st.To.UnixNano(), statsMaxSessions)
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
		if !strings.Contains(text, "agent_sessions_by_end (endpoint_id=? AND disconnected_at") || strings.Contains(text, "SCAN") {
			t.Errorf("the sessions of a range are read with %q: a walk of every session the Endpoint had", text)
		}
	}

	// Measured, not asserted: the CPU of a week's read with that history.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := threadCPU(t)
	week()
	t.Logf("a week's stats of an Endpoint with %d sessions before it and %d in it: %v of CPU", old, storm+2, threadCPU(t)-c)
}
