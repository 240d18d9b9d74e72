package projections

import (
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

func TestDeliveriesNewestFirstWithPaging(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.newInspector(e.ctx, "insp-a", time.Hour, t0))
	e.must(e.newInspector(e.ctx, "insp-b", time.Hour, t0))
	var want []string // newest first
	for i := range 120 {
		id := fmt.Sprintf("a-%03d", i)
		e.must(e.receive(e.ctx, id, "insp-a", domain.AddressInspector, "", request("/a", "x"), t0.Add(time.Duration(i)*time.Second)))
		want = append([]string{id}, want...)
		if i%4 == 0 { // interleave another address
			e.must(e.receive(e.ctx, fmt.Sprintf("b-%03d", i), "insp-b", domain.AddressInspector, "", request("/b", "y"), t0))
		}
	}
	e.sync(e.views)

	var got []string
	var sizes []int
	after := ""
	for {
		p, err := e.views.Deliveries(e.ctx, "insp-a", 0, after)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(p.Items))
		for i, d := range p.Items {
			if d.Address != "insp-a" {
				t.Fatalf("delivery %s of %s listed for insp-a", d.ID, d.Address)
			}
			if i > 0 && d.Position >= p.Items[i-1].Position {
				t.Fatalf("page not newest first: %d after %d", d.Position, p.Items[i-1].Position)
			}
			got = append(got, d.ID)
		}
		if len(p.Items) > 0 && p.EndCursor != p.Items[len(p.Items)-1].Cursor {
			t.Fatalf("EndCursor %q is not the last item's cursor %q", p.EndCursor, p.Items[len(p.Items)-1].Cursor)
		}
		if !p.HasNextPage {
			break
		}
		after = p.EndCursor
	}
	if !slices.Equal(sizes, []int{50, 50, 20}) {
		t.Errorf("page sizes %v, want [50 50 20]", sizes)
	}
	if !slices.Equal(got, want) {
		t.Errorf("history = %v\nwant %v", got, want)
	}

	p, err := e.views.Deliveries(e.ctx, "insp-a", 7, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 7 || !p.HasNextPage || p.Items[0].ID != "a-119" {
		t.Errorf("first:7 gave %d items, hasNext %v, first %s", len(p.Items), p.HasNextPage, p.Items[0].ID)
	}
	empty, err := e.views.Deliveries(e.ctx, "nobody", 10, "")
	if err != nil || len(empty.Items) != 0 || empty.HasNextPage || empty.EndCursor != "" || empty.Items == nil {
		t.Errorf("unknown address: %+v, %v; want an empty, non-nil page", empty, err)
	}
}

func TestDeliveriesRejectsBadPaging(t *testing.T) {
	e := newEnv(t, Options{})
	tests := []struct {
		name  string
		first int
		after string
	}{
		{"negative first", -1, ""},
		{"not base64", 10, "!!!"},
		{"foreign text", 10, "eHl6"},                         // "xyz"
		{"position zero", 10, encodeCursorText("d1:0")},      // no delivery has position 0
		{"leading zero", 10, encodeCursorText("d1:012")},     // not canonical
		{"negative position", 10, encodeCursorText("d1:-5")}, // not a position
		{"too large", 10, encodeCursorText("d1:99999999999999999999")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.views.Deliveries(e.ctx, "insp-a", tc.first, tc.after)
			var invalid *domain.InvalidInputError
			if !errors.Is(err, domain.ErrInvalidInput) || !errors.As(err, &invalid) {
				t.Fatalf("Deliveries(%d, %q) = %v, want an InvalidInputError", tc.first, tc.after, err)
			}
		})
	}
}

func TestPageBounds(t *testing.T) {
	tests := []struct {
		first, want int
	}{{0, DefaultPageSize}, {1, 1}, {500, 500}, {501, MaxPageSize}, {100000, MaxPageSize}}
	for _, tc := range tests {
		got, _, err := pageBounds(tc.first, "")
		if err != nil || got != tc.want {
			t.Errorf("pageBounds(%d) = %d, %v; want %d", tc.first, got, err, tc.want)
		}
	}
	pos, err := readmodel.DecodeCursor("after", readmodel.EncodeCursor(42))
	if err != nil || pos != 42 {
		t.Errorf("cursor round trip = %d, %v", pos, err)
	}
}

func TestPagingAcrossConcurrentAppends(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.newInspector(e.ctx, "insp-a", time.Hour, t0))
	var before []string // the history when paging starts, newest first
	for i := range 40 {
		id := fmt.Sprintf("old-%02d", i)
		e.must(e.receive(e.ctx, id, "insp-a", domain.AddressInspector, "", request("/", ""), t0))
		before = append([]string{id}, before...)
	}
	e.sync(e.views)

	var got []string
	after, pages := "", 0
	for {
		p, err := e.views.Deliveries(e.ctx, "insp-a", 6, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.Items {
			got = append(got, d.ID)
		}
		// New rows land between pages, newer than everything listed.
		for j := range 3 {
			e.do(e.receive(e.ctx, fmt.Sprintf("new-%02d-%d", pages, j), "insp-a", domain.AddressInspector, "", request("/", ""), t0))
		}
		pages++
		if !p.HasNextPage {
			break
		}
		after = p.EndCursor
	}
	if !slices.Equal(got, before) {
		t.Errorf("paged %v\nwant %v (no overlap, no gap)", got, before)
	}
	all, err := e.views.Deliveries(e.ctx, "insp-a", 500, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := 40 + 3*pages; len(all.Items) != want {
		t.Errorf("history has %d rows, want %d", len(all.Items), want)
	}
}

// attemptWant is the expected shape of an attempt.
type attemptWant struct {
	id     string
	status string
	retry  bool
	err    string
}

func TestResponseStatusAndAttempts(t *testing.T) {
	const ep = "ep-1"
	fwd := func(att string, retry bool) func(*domain.Delivery) error {
		return func(d *domain.Delivery) error { return d.RequestForward(att, ep, retry) }
	}
	respond := func(att string, status int, body string, captured bool) func(*domain.Delivery) error {
		return func(d *domain.Delivery) error {
			d.RecordResponse(domain.ForwardResponded{
				AttemptID: att, Status: status, Headers: []domain.Header{{Name: "X-Att", Value: att}},
				Body: []byte(body), BodySize: int64(len(body)), Captured: captured, DurationMs: 7,
			})
			return nil
		}
	}
	fail := func(att string, status int, msg string) func(*domain.Delivery) error {
		return func(d *domain.Delivery) error {
			d.RecordFailure(domain.ForwardFailed{AttemptID: att, Status: status, Error: msg, DurationMs: 30})
			return nil
		}
	}
	answer := func(status int) func(*domain.Delivery) error {
		return func(d *domain.Delivery) error { d.Answer(status, "service"); return nil }
	}
	retry := func(att string) func(*domain.Delivery) error {
		return func(d *domain.Delivery) error {
			return d.RequestRetry(att, "acct-1", domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}, nil)
		}
	}

	tests := []struct {
		name       string
		steps      []func(*domain.Delivery) error
		status     string
		respHeader string // X-Att of the response headers, "" for none
		respBody   *string
		attempts   []attemptWant
	}{
		{name: "not answered yet", status: "nil"},
		{name: "answered by the service", steps: sl(answer(503)), status: "503"},
		{name: "forward pending", steps: sl(fwd("a1", false)), status: "nil",
			attempts: []attemptWant{{id: "a1", status: "nil"}}},
		{name: "local answer", steps: sl(fwd("a1", false), respond("a1", 404, "nope", true), answer(404)),
			status: "404", respHeader: "a1", respBody: strp("nope"),
			attempts: []attemptWant{{id: "a1", status: "404"}}},
		{name: "response not captured", steps: sl(fwd("a1", false), respond("a1", 200, "secret", false), answer(200)),
			status: "200", respHeader: "a1", respBody: nil,
			attempts: []attemptWant{{id: "a1", status: "200"}}},
		{name: "captured empty body", steps: sl(fwd("a1", false), respond("a1", 204, "", true), answer(204)),
			status: "204", respHeader: "a1", respBody: strp(""),
			attempts: []attemptWant{{id: "a1", status: "204"}}},
		{name: "local target unreachable", steps: sl(fwd("a1", false), fail("a1", 502, "dial 127.0.0.1:9: refused"), answer(502)),
			status: "502", attempts: []attemptWant{{id: "a1", status: "502", err: "dial 127.0.0.1:9: refused"}}},
		{name: "ingress timeout before any outcome", steps: sl(fwd("a1", false), answer(504)),
			status: "504", attempts: []attemptWant{{id: "a1", status: "nil"}}},
		// What the sender was answered decides: the relay answered 504, and
		// the local process's answer that landed after it is the attempt's.
		{name: "a late outcome keeps what the sender was answered", steps: sl(fwd("a1", false), answer(504), respond("a1", 200, "late", true)),
			status: "504", respHeader: "a1", respBody: strp("late"),
			attempts: []attemptWant{{id: "a1", status: "200"}}},
		{name: "the relay's answer after an outcome is what the sender got", steps: sl(fwd("a1", false), fail("a1", 502, "refused"), answer(503)),
			status: "503", attempts: []attemptWant{{id: "a1", status: "502", err: "refused"}}},
		{name: "retry succeeds", steps: sl(fwd("a1", false), fail("a1", 504, "timeout"), answer(504), retry("a2"), respond("a2", 201, "ok", true)),
			status: "201", respHeader: "a2", respBody: strp("ok"),
			attempts: []attemptWant{{id: "a1", status: "504", err: "timeout"}, {id: "a2", status: "201", retry: true}}},
		{name: "retry fails after a response", steps: sl(fwd("a1", false), respond("a1", 200, "first", true), answer(200), retry("a2"), fail("a2", 502, "refused")),
			status: "502", respHeader: "a1", respBody: strp("first"),
			attempts: []attemptWant{{id: "a1", status: "200"}, {id: "a2", status: "502", retry: true, err: "refused"}}},
		{name: "retry pending keeps the last outcome", steps: sl(fwd("a1", false), respond("a1", 500, "boom", true), answer(500), retry("a2")),
			status: "500", respHeader: "a1", respBody: strp("boom"),
			attempts: []attemptWant{{id: "a1", status: "500"}, {id: "a2", status: "nil", retry: true}}},
		{name: "second response uncaptured clears the body", steps: sl(fwd("a1", false), respond("a1", 500, "boom", true), answer(500), retry("a2"), respond("a2", 200, "x", false)),
			status: "200", respHeader: "a2", respBody: nil,
			attempts: []attemptWant{{id: "a1", status: "500"}, {id: "a2", status: "200", retry: true}}},
	}
	parent := newEnv(t, Options{})
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := parent.with(t)
			id := fmt.Sprintf("d-%02d", i)
			received := t0.Add(time.Duration(i) * time.Minute)
			e.do(e.receive(e.ctx, id, ep, domain.AddressEndpoint, "acct-1", request("/hook?x=1", `{"n":1}`), received))
			for j, step := range tc.steps {
				e.do(e.onDelivery(e.ctx, id, received.Add(time.Duration(j+1)*time.Second), step))
			}
			d := e.delivery(id)
			if got := status(d.ResponseStatus); got != tc.status {
				t.Errorf("ResponseStatus = %s, want %s", got, tc.status)
			}
			gotHeader := ""
			if len(d.ResponseHeaders) == 1 {
				gotHeader = d.ResponseHeaders[0].Value
			} else if len(d.ResponseHeaders) > 1 {
				t.Errorf("ResponseHeaders = %v", d.ResponseHeaders)
			}
			if gotHeader != tc.respHeader {
				t.Errorf("response headers from attempt %q, want %q", gotHeader, tc.respHeader)
			}
			switch {
			case tc.respBody == nil && d.ResponseBody != nil:
				t.Errorf("ResponseBody = %q, want nil (not captured)", d.ResponseBody)
			case tc.respBody != nil && (d.ResponseBody == nil || string(d.ResponseBody) != *tc.respBody):
				t.Errorf("ResponseBody = %q (nil %v), want %q", d.ResponseBody, d.ResponseBody == nil, *tc.respBody)
			}
			if len(d.Attempts) != len(tc.attempts) {
				t.Fatalf("attempts = %+v, want %d", d.Attempts, len(tc.attempts))
			}
			for k, a := range d.Attempts {
				w := tc.attempts[k]
				if a.ID != w.id || status(a.Status) != w.status || a.Retry != w.retry || a.Error != w.err {
					t.Errorf("attempt %d = {%s %s retry=%v err=%q}, want %+v", k, a.ID, status(a.Status), a.Retry, a.Error, w)
				}
				if a.StartedAt.Before(received) || (k > 0 && !a.StartedAt.After(d.Attempts[k-1].StartedAt)) {
					t.Errorf("attempt %d started at %v: not in time order after %v", k, a.StartedAt, received)
				}
				if (a.Status == nil) != (a.DurationMs == nil) {
					t.Errorf("attempt %d: status %s but duration %v", k, status(a.Status), a.DurationMs)
				}
			}
		})
	}
}

func TestDeliveryFields(t *testing.T) {
	e := newEnv(t, Options{})
	req := request("//x/?q=%2F&r", "\x00\xffbinary")
	req.Body, req.BodySize, req.Complete = req.Body[:4], 100, false
	pos := e.do(e.receive(e.ctx, "d-1", "ep-1", domain.AddressEndpoint, "acct-1", req, t0))
	d := e.delivery("d-1")
	want := readmodel.Delivery{
		ID: "d-1", Address: "ep-1", Kind: domain.AddressEndpoint, AccountID: "acct-1", Method: "POST",
		Target: "//x/?q=%2F&r", Host: "x.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:5555",
		BodySize: 100, Complete: false, ReceivedAt: t0, Position: pos, UpdatedPosition: pos, Cursor: readmodel.EncodeCursor(pos),
	}
	got := d
	got.Headers, got.Body, got.Attempts, got.ResponseHeaders = nil, nil, nil, nil
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("delivery = %+v\nwant %+v", got, want)
	}
	if !slices.Equal(d.Headers, req.Headers) {
		t.Errorf("headers = %v, want %v (repeats in order)", d.Headers, req.Headers)
	}
	if string(d.Body) != "\x00\xffbi" {
		t.Errorf("body = %q", d.Body)
	}
	if d.Attempts == nil || len(d.Attempts) != 0 || d.ResponseHeaders == nil || d.ResponseStatus != nil || d.ResponseBody != nil {
		t.Errorf("fresh delivery: attempts %v, response headers %v, status %v, body %v", d.Attempts, d.ResponseHeaders, d.ResponseStatus, d.ResponseBody)
	}
	later := e.do(e.onDelivery(e.ctx, "d-1", t0.Add(time.Second), func(d *domain.Delivery) error { d.Answer(204, ""); return nil }))
	if d := e.delivery("d-1"); d.UpdatedPosition != later || d.Position != pos {
		t.Errorf("after answer: position %d updated %d, want %d and %d", d.Position, d.UpdatedPosition, pos, later)
	}
	if _, err := e.views.Delivery(e.ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown delivery: %v, want ErrNotFound", err)
	}
	if acc, err := e.views.DeliveryAccount(e.ctx, "d-1"); err != nil || acc != "acct-1" {
		t.Errorf("DeliveryAccount = %q, %v; want acct-1", acc, err)
	}
	if _, err := e.views.DeliveryAccount(e.ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("DeliveryAccount of an unknown delivery: %v, want ErrNotFound", err)
	}
}

func sl(fs ...func(*domain.Delivery) error) []func(*domain.Delivery) error { return fs }

func strp(s string) *string { return &s }

func encodeCursorText(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestSummariesAreDeliveriesWithoutPayload checks that the summary reads
// give every field the full reads give except what only the log holds.
func TestSummariesAreDeliveriesWithoutPayload(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.newInspector(e.ctx, "insp-s", time.Hour, t0))
	for i := range 3 {
		e.must(e.receiveAnswered(e.ctx, fmt.Sprintf("s-%d", i), "insp-s", domain.AddressInspector, "", request("/s", "body"), 204, t0.Add(time.Duration(i)*time.Second)))
	}
	e.must(e.receive(e.ctx, "s-fwd", "insp-s", domain.AddressInspector, "", request("/f", "payload"), t0.Add(time.Minute)))
	e.do(e.onDelivery(e.ctx, "s-fwd", t0.Add(time.Minute), func(d *domain.Delivery) error {
		if err := d.RequestForward("att-1", "insp-s", false); err != nil {
			return err
		}
		d.RecordResponse(domain.ForwardResponded{AttemptID: "att-1", Status: 201, Headers: []domain.Header{{Name: "X", Value: "y"}},
			Body: []byte("ok"), BodySize: 2, Captured: true, DurationMs: 3})
		return nil
	}))
	strip := func(d readmodel.Delivery) readmodel.Delivery {
		d.Headers, d.Body, d.ResponseHeaders, d.ResponseBody, d.Trailers = nil, nil, nil, nil, nil
		return d
	}
	full, err := e.views.Deliveries(e.ctx, "insp-s", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.views.DeliverySummaries(e.ctx, "insp-s", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Items) != 4 || len(sum.Items) != 4 || full.EndCursor != sum.EndCursor || full.HasNextPage != sum.HasNextPage {
		t.Fatalf("pages differ: %d items %q, %d items %q", len(full.Items), full.EndCursor, len(sum.Items), sum.EndCursor)
	}
	for i := range full.Items {
		if full.Items[i].Body == nil || full.Items[i].Headers == nil {
			t.Errorf("full read of %s has no payload", full.Items[i].ID)
		}
		if !reflect.DeepEqual(strip(full.Items[i]), sum.Items[i]) {
			t.Errorf("summary of %s:\n got %+v\nwant %+v", full.Items[i].ID, sum.Items[i], strip(full.Items[i]))
		}
		one, err := e.views.DeliverySummary(e.ctx, full.Items[i].ID)
		if err != nil || !reflect.DeepEqual(one, sum.Items[i]) {
			t.Errorf("DeliverySummary(%s) = %+v, %v", full.Items[i].ID, one, err)
		}
	}
}

// TestChangedSince: the deliveries an event after a cursor created or
// changed, in the order of their latest change, within the newest
// ReplayWindow rows of the address; other addresses never show.
func TestChangedSince(t *testing.T) {
	e := newEnv(t, Options{})
	const ep = "ep-1"
	e.must(e.newEndpoint(e.ctx, ep, "acct-1", domain.EndpointSettings{Name: "n", Mode: domain.ModeProxy, Target: "127.0.0.1:9"}, t0))
	e.must(e.newInspector(e.ctx, "other", time.Hour, t0))
	receive := func(id string) {
		t.Helper()
		e.must(e.receive(e.ctx, id, ep, domain.AddressEndpoint, "acct-1", request("/"+id, ""), t0))
	}
	forward := func(id, att string) {
		t.Helper()
		e.must(e.onDelivery(e.ctx, id, t0, func(d *domain.Delivery) error { return d.RequestForward(att, ep, false) }))
	}
	receive("d1")
	forward("d1", "a1") // d1 is waiting for its local answer
	receive("d2")
	e.must(e.receive(e.ctx, "x1", "other", domain.AddressInspector, "", request("/x", ""), t0))
	receive("d3")
	e.must(e.onDelivery(e.ctx, "d1", t0, func(d *domain.Delivery) error { // d1's answer comes after d3
		d.RecordResponse(domain.ForwardResponded{AttemptID: "a1", Status: 200, Headers: []domain.Header{}, DurationMs: 1})
		return nil
	}))
	receive("d4")
	e.sync(e.views)

	cursorOf := func(id string) string { return e.delivery(id).Cursor }
	tests := []struct {
		name  string
		since string
		want  []string
	}{
		{"from the start", "", []string{"d2", "d3", "d1", "d4"}},
		{"after d1", cursorOf("d1"), []string{"d2", "d3", "d1", "d4"}},
		{"after d2: d1 changed later", cursorOf("d2"), []string{"d3", "d1", "d4"}},
		{"after d3: d1 changed later", cursorOf("d3"), []string{"d1", "d4"}},
		{"after the newest", cursorOf("d4"), []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.views.ChangedSince(e.ctx, ep, tt.since)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("ChangedSince = %v, want %v", got, tt.want)
			}
		})
	}

	var invalid *domain.InvalidInputError
	if _, err := e.views.ChangedSince(e.ctx, ep, "not-a-cursor"); !errors.As(err, &invalid) || invalid.Field != "since" {
		t.Errorf("bad cursor: %v, want InvalidInputError on since", err)
	}
}

// TestChangedSinceLooksAtTheNewestRowsOnly: a change to a delivery older
// than the address's ReplayWindow newest ones is not reported.
func TestChangedSinceLooksAtTheNewestRowsOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("appends ReplayWindow deliveries")
	}
	e := newEnv(t, Options{})
	e.must(e.newInspector(e.ctx, "insp", time.Hour, t0))
	for i := range ReplayWindow + 1 {
		e.must(e.receive(e.ctx, fmt.Sprintf("d%04d", i), "insp", domain.AddressInspector, "", request("/", ""), t0))
	}
	e.sync(e.views)
	got, err := e.views.ChangedSince(e.ctx, "insp", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != ReplayWindow || got[0] != "d0001" || got[len(got)-1] != fmt.Sprintf("d%04d", ReplayWindow) {
		t.Fatalf("ChangedSince gave %d ids from %v to %v, want the %d newest", len(got), got[:1], got[len(got)-1:], ReplayWindow)
	}
}
