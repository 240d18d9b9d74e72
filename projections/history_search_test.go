package projections

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// TestSearchDeliveries: each filter lists exactly the matching deliveries,
// newest first, across pages, from real events.
func TestSearchDeliveries(t *testing.T) {
	e := newEnv(t, Options{})
	type sent struct {
		id, method, target, body string
		status                   int // 0: no answer
		headers                  []domain.Header
		at                       time.Time
	}
	var all []sent
	for i := range 40 {
		s := sent{id: fmt.Sprintf("d-%02d", i), method: "POST", target: "/stripe?n=1", body: `{"type":"charge.succeeded"}`, status: 200, at: t0.Add(time.Duration(i) * time.Minute)}
		switch i % 5 {
		case 1:
			s.method, s.target, s.status = "GET", "/github", 404
		case 2:
			s.target, s.status, s.body = "/stripe/refunds", 503, `{"type":"charge.refunded"}`
		case 3:
			s.status = 0
		case 4:
			s.target = "/STRIPE"
			s.headers = []domain.Header{{Name: "X-GitHub-Event", Value: "push"}}
		}
		all = append(all, s)
		req := request(s.target, s.body)
		req.Method = s.method
		req.Headers = append(req.Headers, s.headers...)
		if s.status == 0 {
			e.must(e.receive(e.ctx, s.id, "insp-a", domain.AddressInspector, "", req, s.at))
		} else {
			e.must(e.receiveAnswered(e.ctx, s.id, "insp-a", domain.AddressInspector, "", req, s.status, s.at))
		}
		e.must(e.receiveAnswered(e.ctx, "other-"+s.id, "insp-b", domain.AddressInspector, "", req, 404, s.at))
	}
	e.sync(e.views)

	want := func(keep func(s sent) bool) []string {
		var ids []string
		for i := len(all) - 1; i >= 0; i-- {
			if keep(all[i]) {
				ids = append(ids, all[i].id)
			}
		}
		return ids
	}
	for _, tt := range []struct {
		name string
		f    readmodel.DeliveryFilter
		keep func(s sent) bool
	}{
		{"method", readmodel.DeliveryFilter{Method: "GET"}, func(s sent) bool { return s.method == "GET" }},
		{"exact path without its query", readmodel.DeliveryFilter{Path: "/stripe"}, func(s sent) bool { return s.target == "/stripe?n=1" }},
		{"path prefix, case-sensitive", readmodel.DeliveryFilter{PathPrefix: "/stripe"}, func(s sent) bool { return s.target[:min(7, len(s.target))] == "/stripe" }},
		{"status", readmodel.DeliveryFilter{Status: 404}, func(s sent) bool { return s.status == 404 }},
		{"status class", readmodel.DeliveryFilter{StatusClass: 5}, func(s sent) bool { return s.status >= 500 }},
		{"pending", readmodel.DeliveryFilter{Pending: true}, func(s sent) bool { return s.status == 0 }},
		{"time range", readmodel.DeliveryFilter{ReceivedAfter: t0.Add(10 * time.Minute), ReceivedBefore: t0.Add(20 * time.Minute)},
			func(s sent) bool { return !s.at.Before(t0.Add(10*time.Minute)) && s.at.Before(t0.Add(20*time.Minute)) }},
		{"header name, any case", readmodel.DeliveryFilter{Header: "x-github-event"}, func(s sent) bool { return len(s.headers) > 0 }},
		{"header name and value", readmodel.DeliveryFilter{Header: "X-Sig", HeaderValue: "b"}, func(s sent) bool { return true }},
		{"header value that none has", readmodel.DeliveryFilter{Header: "X-GitHub-Event", HeaderValue: "pull"}, func(s sent) bool { return false }},
		{"body text", readmodel.DeliveryFilter{BodyContains: "refunded"}, func(s sent) bool { return s.target == "/stripe/refunds" }},
		{"body text and status", readmodel.DeliveryFilter{BodyContains: "charge", Status: 200}, func(s sent) bool { return s.status == 200 }},
		{"nothing matches", readmodel.DeliveryFilter{Method: "DELETE"}, func(s sent) bool { return false }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			after := ""
			for page := 0; ; page++ {
				p, err := e.views.SearchDeliveries(e.ctx, "insp-a", 3, after, tt.f, true)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range p.Items {
					if d.Address != "insp-a" {
						t.Fatalf("%s of %s listed", d.ID, d.Address)
					}
					got = append(got, d.ID)
				}
				if !p.HasNextPage {
					break
				}
				if page > 40 {
					t.Fatal("the pages do not end")
				}
				after = p.EndCursor
			}
			if w := want(tt.keep); !slices.Equal(got, w) {
				t.Fatalf("got %v\nwant %v", got, w)
			}
		})
	}
}

// TestSearchByAttemptStatus: a delivery is found by what one of its
// attempts got, whatever the others got.
func TestSearchByAttemptStatus(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.receive(e.ctx, "x1", "insp-c", domain.AddressInspector, "", request("/x", ""), t0))
	e.must(e.receive(e.ctx, "x2", "insp-c", domain.AddressInspector, "", request("/x", ""), t0))
	for _, a := range []struct {
		id     string
		status int
	}{{"att-1", 502}, {"att-2", 200}} {
		e.must(e.onDelivery(e.ctx, "x1", t0, func(d *domain.Delivery) error {
			if err := d.RequestForward(a.id, "insp-c", a.id != "att-1"); err != nil {
				return err
			}
			d.RecordResponse(domain.ForwardResponded{AttemptID: a.id, Status: a.status})
			return nil
		}))
	}
	e.sync(e.views)
	for status, want := range map[int][]string{502: {"x1"}, 200: {"x1"}, 404: nil} {
		p, err := e.views.SearchDeliveries(e.ctx, "insp-c", 0, "", readmodel.DeliveryFilter{AttemptStatus: status}, false)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range p.Items {
			got = append(got, d.ID)
			if len(d.Attempts) != 2 {
				t.Errorf("%s listed with %d attempts, want 2", d.ID, len(d.Attempts))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("attempt status %d: %v, want %v", status, got, want)
		}
	}
}

// TestSearchRefusedOffline: a delivery whose latest attempt found no agent
// is found; one retried since, or refused for another reason, is not.
func TestSearchRefusedOffline(t *testing.T) {
	e := newEnv(t, Options{})
	attempt := func(id, att string, retry bool, status int, errText string) {
		t.Helper()
		e.must(e.onDelivery(e.ctx, id, t0, func(d *domain.Delivery) error {
			if err := d.RequestForward(att, "ep-1", retry); err != nil {
				return err
			}
			if errText != "" {
				d.RecordFailure(domain.ForwardFailed{AttemptID: att, Status: status, Error: errText})
			} else {
				d.RecordResponse(domain.ForwardResponded{AttemptID: att, Status: status})
			}
			return nil
		}))
	}
	for _, id := range []string{"y1", "y2", "y3", "y4"} {
		e.must(e.receive(e.ctx, id, "ep-1", domain.AddressEndpoint, "acct-1", request("/y", ""), t0))
	}
	attempt("y1", "a1", false, 503, "no agent connected")
	attempt("y2", "a1", false, 503, "no agent connected")
	attempt("y2", "a2", true, 200, "") // caught up
	attempt("y3", "a1", false, 503, "relay node lost")
	attempt("y4", "a1", false, 503, "no agent connected")
	attempt("y4", "a2", true, 503, "no agent connected") // a retry with no agent either
	e.sync(e.views)
	p, err := e.views.SearchDeliveries(e.ctx, "ep-1", 0, "", readmodel.DeliveryFilter{RefusedOffline: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range p.Items {
		got = append(got, d.ID)
	}
	if !slices.Equal(got, []string{"y4", "y1"}) {
		t.Fatalf("refused offline: %v, want [y4 y1]", got)
	}
}

// TestSearchRefusesBadFilters: contradictions and out-of-range values get
// an invalid-input error naming the field.
func TestSearchRefusesBadFilters(t *testing.T) {
	e := newEnv(t, Options{})
	for _, tt := range []struct {
		f     readmodel.DeliveryFilter
		field string
	}{
		{readmodel.DeliveryFilter{StatusClass: 6}, "statusClass"},
		{readmodel.DeliveryFilter{Status: 42}, "status"},
		{readmodel.DeliveryFilter{AttemptStatus: 1000}, "attemptStatus"},
		{readmodel.DeliveryFilter{Pending: true, Status: 200}, "pending"},
		{readmodel.DeliveryFilter{ReceivedAfter: t0, ReceivedBefore: t0}, "receivedBefore"},
		{readmodel.DeliveryFilter{HeaderValue: "x"}, "headerValue"},
	} {
		_, err := e.views.SearchDeliveries(e.ctx, "insp-a", 0, "", tt.f, false)
		var bad *domain.InvalidInputError
		if !errors.As(err, &bad) || bad.Field != tt.field {
			t.Errorf("%+v: %v, want invalid %s", tt.f, err, tt.field)
		}
	}
}

// TestSearchExaminesABoundedWindow: a filter that matches nothing in the
// newest searchWindow deliveries answers an empty page that continues
// below them, and the next page finds the match.
func TestSearchExaminesABoundedWindow(t *testing.T) {
	t.Parallel() // see insertRows
	if testing.Short() {
		t.Skip("writes searchWindow rows")
	}
	e := newEnv(t, Options{})
	e.sync(e.views)
	fillDeliveries(t, filepath.Join(e.dir, "views.db"), "ep-1", searchWindow+10, func(i int) (string, int) {
		if i == 3 {
			return "DELETE", 200 // only among the oldest
		}
		return "POST", 200
	})
	p, err := e.views.SearchDeliveries(e.ctx, "ep-1", 10, "", readmodel.DeliveryFilter{Method: "DELETE"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 0 || !p.HasNextPage || p.EndCursor == "" {
		t.Fatalf("first page %d items, hasNext %v, end %q: want an empty page that continues", len(p.Items), p.HasNextPage, p.EndCursor)
	}
	p, err = e.views.SearchDeliveries(e.ctx, "ep-1", 10, p.EndCursor, readmodel.DeliveryFilter{Method: "DELETE"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].ID != "fill-3" || p.HasNextPage {
		t.Fatalf("second page %+v", p)
	}
}

// fillDeliveries writes n rows of an address straight into a views file
// (for sizes the log would take minutes to apply): oldest first, one a
// second, method and status from shape.
func fillDeliveries(tb testing.TB, path, address string, n int, shape func(i int) (string, int)) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO deliveries (position, id, address, kind, account_id, method, target, host, proto,
		remote_addr, body_size, complete, received_at, response_status, revision, updated_position)
		VALUES (?, ?, ?, 'endpoint', 'acct-1', ?, ?, 'h', 'HTTP/1.1', '127.0.0.1:1', 10, ?, ?, ?, 0, ?)`, n, func(i int) []any {
		method, status := shape(i)
		target := "/stripe"
		if i%10 == 0 {
			target = "/github/push"
		}
		complete := 1
		if i%1000 == 999 {
			complete = 0
		}
		pos := int64(1_000_000_000) + int64(i)
		return []any{pos, fmt.Sprintf("fill-%d", i), address, method, target, complete,
			t0.Add(time.Duration(i) * time.Second).UnixNano(), status, pos}
	})
}

// BenchmarkSearchDeliveries: one filtered page (first: 50) of an address
// with a million deliveries, by filter. "none" matches nothing and so
// examines a whole window.
//
//	go test -run '^$' -bench SearchDeliveries -benchtime 20x ./projections
func BenchmarkSearchDeliveries(b *testing.B) {
	s := newSynth(b, nil)
	path := filepath.Join(b.TempDir(), "views.db")
	v, err := Open(b.Context(), path, s.store, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { v.Close() })
	const n = 1_000_000
	fillDeliveries(b, path, "ep-1", n, func(i int) (string, int) {
		switch {
		case i%1000 == 7:
			return "GET", 404
		case i%10 == 3:
			return "POST", 500
		}
		return "POST", 200
	})
	newest := t0.Add(n * time.Second)
	for _, bc := range []struct {
		name string
		f    readmodel.DeliveryFilter
	}{
		{"status=404 (0.1%)", readmodel.DeliveryFilter{Status: 404}},
		{"5xx (10%)", readmodel.DeliveryFilter{StatusClass: 5}},
		{"path prefix (10%)", readmodel.DeliveryFilter{PathPrefix: "/github"}},
		{"method=GET (0.1%)", readmodel.DeliveryFilter{Method: "GET"}},
		{"last hour", readmodel.DeliveryFilter{ReceivedAfter: newest.Add(-time.Hour)}},
		{"incomplete (0.1%)", readmodel.DeliveryFilter{IncompleteBody: true}},
		{"none", readmodel.DeliveryFilter{Method: "DELETE"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := v.SearchDeliveries(b.Context(), "ep-1", 50, "", bc.f, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
