package systemtest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// statsTotals is the part of a stats answer the tests compare.
type statsTotals struct {
	Deliveries, Status2xx, Status3xx, Status4xx, Status5xx, Pending, Filtered, Refused, Answers int
	P50Ms, P95Ms, OfflineSeconds                                                                *int
}

// statsOut is what `relay stats -o json` prints.
type statsOut struct {
	Address, Kind, Range, From, To string
	BucketSeconds                  int
	Totals                         struct {
		Start string
		statsTotals
	}
	Buckets []map[string]any
}

// TestStatsMatchWhatWasSent: an Endpoint receives 5 requests its local
// process answers 200, 3 it answers 500 and 2 its filters keep from the
// listener (answered 204 at receipt); Endpoint.stats and `relay stats -o
// json` (the real binary) count exactly that, in every range.
func TestStatsMatchWhatWasSent(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/bad") {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "charts", "mode": "PROXY", "target": target,
		"filterTexts": []string{"path=/ok,/bad"}})
	startAgentFor(t, r, acct.Token, ep.ID, target)
	for range 5 {
		if res := send(t, r, ep.ID, "POST", "/ok", nil, []byte("{}")); res.Status != 200 {
			t.Fatalf("/ok answered %d", res.Status)
		}
	}
	for range 3 {
		if res := send(t, r, ep.ID, "POST", "/bad", nil, []byte("{}")); res.Status != 500 {
			t.Fatalf("/bad answered %d", res.Status)
		}
	}
	for range 2 {
		if res := send(t, r, ep.ID, "POST", "/skip", nil, []byte("{}")); res.Status != 204 {
			t.Fatalf("/skip answered %d, want 204 (filtered)", res.Status)
		}
	}
	want := statsTotals{Deliveries: 10, Status2xx: 7, Status5xx: 3, Filtered: 2, Answers: 8}
	same := func(got statsTotals) bool {
		got.P50Ms, got.P95Ms, got.OfflineSeconds = nil, nil, nil
		return got == want
	}
	for _, rng := range []string{"HOUR", "DAY", "WEEK"} {
		var out struct {
			Endpoint struct {
				Stats struct {
					Range   string
					Buckets []struct{ Deliveries int }
					Totals  statsTotals
				}
			}
		}
		harness.Eventually(t, 10*time.Second, rng+" stats to count the mix", func() bool {
			r.MustGraphQL(t, acct.Token, `query($id: ID!, $r: StatsRange){ endpoint(id: $id){ stats(range: $r){ range buckets{ deliveries }
				totals{ deliveries status2xx status3xx status4xx status5xx pending filtered refused answers p50Ms p95Ms offlineSeconds } } } }`,
				map[string]any{"id": ep.ID, "r": rng}, &out)
			return same(out.Endpoint.Stats.Totals)
		})
		st := out.Endpoint.Stats
		sum := 0
		for _, b := range st.Buckets {
			sum += b.Deliveries
		}
		if st.Range != rng || len(st.Buckets) != 60 || sum != 10 {
			t.Errorf("%s: range %s, %d buckets holding %d deliveries; want 60 holding 10", rng, st.Range, len(st.Buckets), sum)
		}
		if st.Totals.P50Ms == nil || st.Totals.P95Ms == nil || *st.Totals.P50Ms > *st.Totals.P95Ms {
			t.Errorf("%s: p50 %v, p95 %v", rng, st.Totals.P50Ms, st.Totals.P95Ms)
		}
	}

	var cli statsOut
	h.jsonOut(t, &cli, "stats", "charts", "--range", "day") // by name
	got := cli.Totals.statsTotals
	if cli.Address != ep.ID || cli.Kind != "endpoint" || cli.Range != "DAY" || cli.BucketSeconds != 24*60 || len(cli.Buckets) != 60 || !same(got) {
		t.Errorf("relay stats -o json: %s %s %s, %d s buckets ×%d, totals %+v; want %s endpoint DAY, 1440 s ×60, %+v",
			cli.Address, cli.Kind, cli.Range, cli.BucketSeconds, len(cli.Buckets), got, ep.ID, want)
	}
	text, code := h.run(t, "", "stats", ep.ID)
	if code != 0 || !strings.Contains(text, "deliveries  10  (2xx 7, 3xx 0, 4xx 0, 5xx 3, pending 0)") || !strings.Contains(text, "filtered    2") {
		t.Errorf("relay stats exited %d:\n%s", code, text)
	}
	// An inspector's stats, without an account: every request answered
	// 204 at receipt, no offline time.
	var ins struct{ CreateInspector struct{ ID string } }
	r.MustGraphQL(t, "", `mutation { createInspector { id } }`, nil, &ins)
	for range 3 {
		send(t, r, ins.CreateInspector.ID, "POST", "/i", nil, []byte("x"))
	}
	var insStats statsOut
	harness.Eventually(t, 10*time.Second, "the inspector's stats", func() bool {
		h.jsonOut(t, &insStats, "stats", ins.CreateInspector.ID)
		return insStats.Totals.Deliveries == 3
	})
	if tt := insStats.Totals.statsTotals; insStats.Kind != "inspector" || tt.Status2xx != 3 || tt.OfflineSeconds != nil || tt.Answers != 0 {
		t.Errorf("inspector stats: %s %+v, want 3 answered 2xx, no offline time, no local answers", insStats.Kind, tt)
	}
	if _, code := h.run(t, "", "stats", ep.ID, "--range", "year"); code != 2 {
		t.Errorf("relay stats --range year exited %d, want 2", code)
	}
}
