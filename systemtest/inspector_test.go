package systemtest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

const deliveryFields = `id address method path headers{name value} body bodyBase64 bodySize complete receivedAt responseStatus`

type header struct{ Name, Value string }

type delivery struct {
	ID             string
	Address        string
	Method         string
	Path           string
	Headers        []header
	Body           *string
	BodyBase64     string
	BodySize       int
	Complete       bool
	ReceivedAt     time.Time
	ResponseStatus *int
	Attempts       []struct {
		ID         string
		Status     *int
		DurationMs *int
		Error      *string
		Retry      bool
	}
	ResponseBody *string
}

type page struct {
	Edges []struct {
		Cursor string
		Node   delivery
	}
	PageInfo struct {
		HasNextPage bool
		EndCursor   *string
	}
}

func createInspector(t *testing.T, r *harness.Relay) (id, url string) {
	t.Helper()
	var out struct{ CreateInspector struct{ ID, URL string } }
	r.MustGraphQL(t, "", `mutation{ createInspector{ id url } }`, nil, &out)
	return out.CreateInspector.ID, out.CreateInspector.URL
}

// history reads an inspector's whole history through cursor paging.
func history(t *testing.T, r *harness.Relay, id string, first int) []delivery {
	t.Helper()
	// A page of 50 rows with every field is within the API's default
	// budget (docs/security.md).
	first = min(first, 50)
	var all []delivery
	var after any
	for pages := 0; ; pages++ {
		if pages == 1000 {
			t.Fatalf("history of %s still has pages after 1000: is the after cursor ignored?", id)
		}
		var out struct{ Inspector struct{ Deliveries page } }
		r.MustGraphQL(t, "", `query($id: ID!, $first: Int, $after: String){ inspector(id: $id){ deliveries(first: $first, after: $after){
			edges{ cursor node{ `+deliveryFields+` } } pageInfo{ hasNextPage endCursor } } } }`,
			map[string]any{"id": id, "first": first, "after": after}, &out)
		p := out.Inspector.Deliveries
		if n := len(p.Edges); n > first || p.PageInfo.HasNextPage && n < first {
			t.Fatalf("page of %d rows (hasNextPage %v) for first %d", n, p.PageInfo.HasNextPage, first)
		}
		for _, e := range p.Edges {
			all = append(all, e.Node)
		}
		if !p.PageInfo.HasNextPage {
			return all
		}
		if p.PageInfo.EndCursor == nil || len(p.Edges) == 0 {
			t.Fatalf("hasNextPage without an end cursor")
		}
		after = *p.PageInfo.EndCursor
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// values returns every value of a header name, in order (names compare case-insensitively).
func values(hs []header, name string) []string {
	var out []string
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			out = append(out, h.Value)
		}
	}
	return out
}

func TestInspectorRecordsEveryRequestExactly(t *testing.T) {
	r := harness.Start(t, "")
	id, url := createInspector(t, r)
	if want := fmt.Sprintf("http://%s.localhost:%d/", id, r.Port); url != want {
		t.Fatalf("url = %q, want %q", url, want)
	}
	host := r.AddressHost(id)
	big := randomBytes(300 << 10)
	binary := randomBytes(4096)
	sent := []harness.RawRequest{
		{Method: "GET", Target: "/"},
		{Method: "POST", Target: "/x", Headers: [][2]string{{"Content-Type", "application/json"}}, Body: []byte(`{"event":"payment.succeeded","amount":4200}`)},
		{Method: "PUT", Target: "/x/", Body: binary},
		{Method: "PATCH", Target: "//a//b", Body: []byte("")},
		{Method: "DELETE", Target: "/a%2Fb?x=1&x=2"},
		{Method: "OPTIONS", Target: "/x"},
		{Method: "HEAD", Target: "/x/"},
		{Method: "POST", Target: "/big", Body: big},
		{Method: "POST", Target: "/twice", Headers: [][2]string{{"X-Repeat", "first"}, {"X-Other", "o"}, {"X-Repeat", "second"}}, Body: []byte("a=1")},
		{Method: "GET", Target: "/%7Euser/q?a=b+c&d=%20"},
		{Method: "POST", Target: "/hooks/github", Headers: [][2]string{{"X-Hub-Signature-256", "sha256=abc"}}, Body: []byte(`{"zen":"Keep it logically awesome."}`)},
		{Method: "PUT", Target: "/empty?"},
		{Method: "POST", Target: "/a/b/c/", Body: []byte("\x00\x01\x02\xff")},
	}
	for i := range sent {
		sent[i].Host = host
		resp := r.SendRaw(t, sent[i])
		if resp.Status != 204 || len(resp.Body) != 0 {
			t.Fatalf("%s %s: answered %d with %d bytes, want 204 and empty", sent[i].Method, sent[i].Target, resp.Status, len(resp.Body))
		}
	}

	check := func(t *testing.T, got []delivery) {
		t.Helper()
		if len(got) != len(sent) {
			t.Fatalf("history has %d rows, want %d", len(got), len(sent))
		}
		for i, d := range got {
			s := sent[len(sent)-1-i] // newest first
			body, err := base64.StdEncoding.DecodeString(d.BodyBase64)
			if err != nil {
				t.Fatalf("row %d: bad base64: %v", i, err)
			}
			if d.Method != s.Method || d.Path != s.Target {
				t.Errorf("row %d: %s %s, want %s %s", i, d.Method, d.Path, s.Method, s.Target)
			}
			if d.BodySize != len(s.Body) {
				t.Errorf("%s: bodySize %d, want %d", s.Target, d.BodySize, len(s.Body))
			}
			wantBody, wantComplete := s.Body, true
			if len(s.Body) > 256<<10 {
				wantBody, wantComplete = s.Body[:256<<10], false
			}
			if !bytes.Equal(body, wantBody) || d.Complete != wantComplete {
				t.Errorf("%s: stored %d bytes complete=%v, want %d bytes complete=%v", s.Target, len(body), d.Complete, len(wantBody), wantComplete)
			}
			if d.ResponseStatus == nil || *d.ResponseStatus != 204 {
				t.Errorf("%s: responseStatus %v, want 204", s.Target, d.ResponseStatus)
			}
			for _, h := range s.Headers {
				if got := values(d.Headers, h[0]); len(got) == 0 {
					t.Errorf("%s: header %s missing", s.Target, h[0])
				}
			}
		}
		twice := got[len(sent)-1-8]
		if v := values(twice.Headers, "X-Repeat"); len(v) != 2 || v[0] != "first" || v[1] != "second" {
			t.Errorf("X-Repeat = %q, want [first second]", v)
		}
	}
	// The views follow the log asynchronously: wait until they hold every row.
	var full []delivery
	harness.Eventually(t, 10*time.Second, "history to hold every request", func() bool {
		full = history(t, r, id, 100)
		return len(full) == len(sent)
	})
	check(t, full)

	// Paging in small pages yields the same rows: no overlap, no gap.
	for _, size := range []int{1, 3, 5} {
		paged := history(t, r, id, size)
		if len(paged) != len(full) {
			t.Fatalf("first=%d: %d rows, want %d", size, len(paged), len(full))
		}
		seen := map[string]bool{}
		for i := range paged {
			if seen[paged[i].ID] || paged[i].ID != full[i].ID {
				t.Fatalf("first=%d: row %d is %s, want %s", size, i, paged[i].ID, full[i].ID)
			}
			seen[paged[i].ID] = true
		}
	}

	// A restart on the same --data shows the identical history.
	before, _ := json.Marshal(full)
	r.Stop(t)
	r.Restart(t)
	after := history(t, r, id, 100)
	check(t, after)
	if a, _ := json.Marshal(after); !bytes.Equal(before, a) {
		t.Fatalf("history changed across restart:\nbefore %s\nafter  %s", before, a)
	}
}

func TestUnknownAndExpiredAddressesAnswer503(t *testing.T) {
	r := harness.Start(t, "", "--inspector-ttl", "2s")
	for _, host := range []string{r.AddressHost("nosuchaddress"), "example.com", r.AddressHost("a.b")} {
		resp := r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/x", Host: host, Body: []byte("{}")})
		if resp.Status != 503 || !strings.HasPrefix(string(resp.Body), "No agent for client") {
			t.Errorf("host %s: %d %q, want 503 No agent for client", host, resp.Status, resp.Body)
		}
	}
	id, _ := createInspector(t, r)
	if resp := r.SendRaw(t, harness.RawRequest{Method: "GET", Target: "/", Host: r.AddressHost(id)}); resp.Status != 204 {
		t.Fatalf("fresh inspector answered %d", resp.Status)
	}
	var exp struct{ Inspector struct{ ExpiresAt time.Time } }
	r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ expiresAt } }`, map[string]any{"id": id}, &exp)
	harness.Eventually(t, 10*time.Second, "inspector to expire", func() bool {
		return time.Now().After(exp.Inspector.ExpiresAt.Add(100 * time.Millisecond))
	})
	resp := r.SendRaw(t, harness.RawRequest{Method: "GET", Target: "/late", Host: r.AddressHost(id)})
	if resp.Status != 503 || !strings.HasPrefix(string(resp.Body), "No agent for client") {
		t.Fatalf("expired inspector: %d %q, want 503 No agent for client", resp.Status, resp.Body)
	}
	// The views follow the log a moment later: the expiry shows once applied.
	harness.Eventually(t, 10*time.Second, "inspector marked expired", func() bool {
		var out struct{ Inspector struct{ Expired bool } }
		r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ expired } }`, map[string]any{"id": id}, &out)
		return out.Inspector.Expired
	})
}

func TestExpiresAtMovesWithEachRequest(t *testing.T) {
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	read := func() time.Time {
		var out struct{ Inspector struct{ ExpiresAt time.Time } }
		r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ expiresAt } }`, map[string]any{"id": id}, &out)
		return out.Inspector.ExpiresAt
	}
	first := read()
	harness.Eventually(t, 5*time.Second, "clock to move", func() bool { return time.Now().After(first.Add(-24*time.Hour + 50*time.Millisecond)) })
	r.SendRaw(t, harness.RawRequest{Method: "GET", Target: "/", Host: r.AddressHost(id)})
	harness.Eventually(t, 5*time.Second, "expiresAt to move forward", func() bool { return read().After(first) })
}

func TestSubscriptionReceivesNewRowsInOrder(t *testing.T) {
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	sub := r.Subscribe(t, "", `subscription($a: ID!){ deliveries(address: $a){ id path responseStatus } }`, map[string]any{"a": id})
	// The server registers the subscription asynchronously after the ack:
	// send markers until one arrives, then every later request must.
	harness.Eventually(t, 10*time.Second, "subscription to deliver a marker", func() bool {
		r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/marker", Host: r.AddressHost(id)})
		data, ok := sub.TryNext(200 * time.Millisecond)
		return ok && decodePath(t, data) == "/marker"
	})
	const n = 20
	for i := 0; i < n; i++ {
		r.SendRaw(t, harness.RawRequest{Method: "POST", Target: fmt.Sprintf("/seq/%02d", i), Host: r.AddressHost(id)})
	}
	seen := map[string]bool{}
	var order []string
	for len(order) < n {
		p := decodePath(t, sub.Next(t, 10*time.Second))
		if p == "/marker" || seen[p] {
			continue // an update of a row already seen
		}
		seen[p] = true
		order = append(order, p)
	}
	for i, p := range order {
		if want := fmt.Sprintf("/seq/%02d", i); p != want {
			t.Fatalf("row %d is %s, want %s (order %v)", i, p, want, order)
		}
	}
}

func decodePath(t *testing.T, data json.RawMessage) string {
	t.Helper()
	var m struct{ Deliveries struct{ Path string } }
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return m.Deliveries.Path
}

// TestSubscriptionSinceReplaysWhatFollowsAPage: a client shows a page of
// history, more requests arrive, and only then does it subscribe with the
// cursor of its newest row. It gets exactly the rows after that cursor,
// oldest first, then live ones; "" replays the whole history; a made-up
// cursor is refused.
func TestSubscriptionSinceReplaysWhatFollowsAPage(t *testing.T) {
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	sendPath := func(path string) {
		t.Helper()
		r.SendRaw(t, harness.RawRequest{Method: "POST", Target: path, Host: r.AddressHost(id)})
	}
	waitRows := func(n int) []delivery {
		t.Helper()
		var rows []delivery
		harness.Eventually(t, 10*time.Second, fmt.Sprintf("%d rows in the history", n), func() bool {
			rows = history(t, r, id, 50)
			return len(rows) == n
		})
		return rows
	}
	sendPath("/a")
	sendPath("/b")
	waitRows(2)
	var page struct {
		Inspector struct {
			Deliveries struct{ Edges []struct{ Cursor string } }
		}
	}
	r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ deliveries(first: 1){ edges{ cursor } } } }`, map[string]any{"id": id}, &page)
	shownUpTo := page.Inspector.Deliveries.Edges[0].Cursor // the cursor of /b
	var one struct{ Delivery struct{ Cursor string } }
	r.MustGraphQL(t, "", `query($id: ID!){ delivery(id: $id){ cursor } }`, map[string]any{"id": waitRows(2)[0].ID}, &one)
	if one.Delivery.Cursor != shownUpTo {
		t.Fatalf("Delivery.cursor %q differs from its edge's cursor %q", one.Delivery.Cursor, shownUpTo)
	}
	sendPath("/c")
	sendPath("/d")
	waitRows(4)

	const q = `subscription($a: ID!, $s: String){ deliveries(address: $a, since: $s){ id path cursor } }`
	sub := r.Subscribe(t, "", q, map[string]any{"a": id, "s": shownUpTo})
	for _, want := range []string{"/c", "/d"} {
		if got := decodePath(t, sub.Next(t, 10*time.Second)); got != want {
			t.Fatalf("replayed %s, want %s", got, want)
		}
	}
	sendPath("/e")
	if got := decodePath(t, sub.Next(t, 10*time.Second)); got != "/e" {
		t.Fatalf("after the replay got %s, want the live /e", got)
	}
	if data, ok := sub.TryNext(300 * time.Millisecond); ok {
		t.Fatalf("unexpected row after /e: %s", data)
	}

	all := r.Subscribe(t, "", q, map[string]any{"a": id, "s": ""})
	for _, want := range []string{"/a", "/b", "/c", "/d", "/e"} {
		if got := decodePath(t, all.Next(t, 10*time.Second)); got != want {
			t.Fatalf("since \"\" replayed %s, want %s", got, want)
		}
	}

	bad := r.Subscribe(t, "", q, map[string]any{"a": id, "s": "bm90LWEtY3Vyc29y"})
	if err := bad.Err(t, 10*time.Second); !strings.Contains(err.Error(), "INVALID_INPUT") || !strings.Contains(err.Error(), "since") {
		t.Fatalf("made-up cursor: %v, want INVALID_INPUT on since", err)
	}
}
