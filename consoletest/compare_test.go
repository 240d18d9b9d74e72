package consoletest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// proxyEndpoint creates a Log and Proxy Endpoint of the account to target,
// capturing response bodies, and returns its id.
func proxyEndpoint(t *testing.T, token, name, target string) string {
	t.Helper()
	var out struct {
		CreateEndpoint struct{ ID string } `json:"createEndpoint"`
	}
	srv.MustGraphQL(t, token, `mutation($input: CreateEndpointInput!){ createEndpoint(input: $input){ id } }`,
		map[string]any{"input": map[string]any{"name": name, "mode": "PROXY", "target": target, "responseCapture": true}}, &out)
	return out.CreateEndpoint.ID
}

// waitAgent waits until the relay counts an agent on the Endpoint.
func waitAgent(t *testing.T, token, id string) {
	t.Helper()
	harness.Eventually(t, 15*time.Second, "the agent connected", func() bool {
		var q struct{ Endpoint struct{ AgentConnected bool } }
		srv.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ agentConnected } }`, map[string]any{"id": id}, &q)
		return q.Endpoint.AgentConnected
	})
}

// openEndpoint opens an Endpoint's page signed in, as relay open's link does.
func (p *page) openEndpoint(token, id string) {
	p.t.Helper()
	p.open("/e/" + id + "#token=" + token)
	p.waitLive()
}

// cli runs the relay command line against the shared relay as the
// account, with a home of its own, and returns its output.
func cli(t *testing.T, token string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	c := harness.Command{Env: []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "RELAY_SERVER=", "RELAY_TOKEN=", "NO_COLOR=1"}}
	out, code := harness.RunWith(t, c, append(args, "--server", srv.BareURL(), "--token", token)...)
	if code != 0 {
		t.Fatalf("relay %s exited %d:\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// deliveryAt is the id of the Endpoint's delivery at path (one per path in
// these tests), once the relay's views list it: they follow the log a
// moment after the sender's answer.
func deliveryAt(t *testing.T, token, id, path string) string {
	t.Helper()
	var did string
	harness.Eventually(t, 10*time.Second, "the delivery at "+path+" listed", func() bool {
		var list struct {
			Endpoint struct {
				Deliveries struct{ Nodes []struct{ ID, Path string } }
			}
		}
		srv.MustGraphQL(t, token, `query($id: ID!, $p: String!){ endpoint(id: $id){ deliveries(first: 1, filter: {pathPrefix: $p}){ nodes{ id path } } } }`,
			map[string]any{"id": id, "p": path}, &list)
		if n := list.Endpoint.Deliveries.Nodes; len(n) == 1 && n[0].Path == path {
			did = n[0].ID
		}
		return did != ""
	})
	return did
}

// change is one difference as relay deliveries diff -o json lists it
// (the API's Change, before and after as a and b).
type change struct {
	Where string  `json:"where"`
	A     *string `json:"a"`
	B     *string `json:"b"`
}

// comparison reads the comparison shown: the changes of each part (nil
// when the part is not shown, empty when it is the same) and the note.
func (p *page) comparison() (request, response []change, note string) {
	p.t.Helper()
	p.waitFor("the relay's comparison shown", `document.querySelector('[data-testid=compare-result] h4') && !document.querySelector('[data-testid=compare-loading]')`)
	var got struct {
		Request, Response []change
		Note              string
	}
	raw := eval[string](p, `JSON.stringify((() => {
		const part = (name) => {
			if (document.querySelector('[data-testid=compare-same-' + name + ']')) return [];
			const table = document.querySelector('[data-testid=compare-' + name + ']');
			if (!table) return null;
			const side = (td) => td.querySelector('code') ? td.querySelector('code').textContent : null;
			return [...table.querySelectorAll('tbody tr')].map((tr) => ({ where: tr.dataset.where, a: side(tr.cells[1]), b: side(tr.cells[2]) }));
		};
		const note = document.querySelector('[data-testid=compare-note]');
		return { request: part('request'), response: part('response'), note: note ? note.textContent.slice(1, -1) : '' };
	})())`)
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		p.t.Fatal(err)
	}
	return got.Request, got.Response, got.Note
}

// find is the change at where, or nil.
func find(cs []change, where string) *change {
	for i := range cs {
		if cs[i].Where == where {
			return &cs[i]
		}
	}
	return nil
}

func str(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}

// TestCompareAttempts: in the detail pane a reader compares two attempts
// of a delivery — by default the last two — and sees what differs: the
// status, a header and the JSON fields of the local answer; and, for an
// edited retry, what the edit changed in the request. The console shows
// exactly what the API answers (Delivery.compare), and relay deliveries
// diff prints the same for the same attempts.
func TestCompareAttempts(t *testing.T) {
	var served atomic.Int64
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Handler-Version", fmt.Sprint(min(n, 2)))
		if n == 1 {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"no route","retryable":false}`)
			return
		}
		fmt.Fprint(w, `{"received":true,"order":{"id":7,"lines":2}}`)
	}))
	t.Cleanup(local.Close)
	token := signUp(t, "Compare")
	id := proxyEndpoint(t, token, "orders", strings.TrimPrefix(local.URL, "http://"))
	srv.StartAgent(t, token, id, strings.TrimPrefix(local.URL, "http://"))
	waitAgent(t, token, id)

	if status, _ := send(t, id, http.MethodPost, "/orders", http.Header{"Content-Type": {"application/json"}}, []byte(`{"order":7,"items":[1,2]}`)); status != http.StatusNotFound {
		t.Fatalf("first attempt answered %d, want the local 404", status)
	}
	did := deliveryAt(t, token, id, "/orders")
	retry := func(edit map[string]any) {
		t.Helper()
		srv.MustGraphQL(t, token, `mutation($id: ID!, $edit: RequestEditInput){ retryDelivery(id: $id, edit: $edit){ id } }`,
			map[string]any{"id": did, "edit": edit}, nil)
	}
	retry(nil)

	p := newPage(t, 1280, 900)
	p.openEndpoint(token, id)
	p.openRow("/orders")
	p.waitFor("two attempts", `document.querySelectorAll('[data-testid=attempt-status]').length === 2`)
	p.click(`[data-testid=compare] summary`)
	p.waitFor("the comparison", `document.querySelector('[data-testid=compare-result] h4')`)
	if a, b := eval[string](p, `document.querySelector('[data-testid=compare-a]').value`), eval[string](p, `document.querySelector('[data-testid=compare-b]').value`); a != "1" || b != "2" {
		t.Errorf("compared by default %s with %s, want the last two attempts, 1 with 2", a, b)
	}
	req, resp, note := p.comparison()
	if len(req) != 0 {
		t.Errorf("two retries of the recorded request differ in the request: %+v", req)
	}
	for _, want := range []change{
		{"status", ptr("404"), ptr("200")},
		{"header X-Handler-Version", ptr("1"), ptr("2")},
		{"body $.error", ptr(`"no route"`), nil},
		{"body $.order", nil, ptr(`{"id":7,"lines":2}`)},
		{"body $.received", nil, ptr("true")},
	} {
		got := find(resp, want.Where)
		if got == nil || str(got.A) != str(want.A) || str(got.B) != str(want.B) {
			t.Errorf("response change at %q: got %+v, want %s → %s; all: %+v", want.Where, got, str(want.A), str(want.B), resp)
		}
	}
	if kind := p.text(`[data-testid=compare-response] tr[data-where=status] .change-kind`); kind != "changed" {
		t.Errorf("the status change is marked %q, want changed", kind)
	}
	if kind := p.text(`[data-testid=compare-response] tr[data-where="body $.received"] .change-kind`); kind != "added" {
		t.Errorf("the new field is marked %q, want added", kind)
	}
	wantAPI(t, token, did, "1", "2", req, resp, note)

	// An edited retry: another body and a header added. The view keeps
	// the comparison open through the new attempt and offers the edit at
	// one click: the request as recorded against what the retry sent.
	retry(map[string]any{"body": `{"order":8,"items":[1,2,3]}`, "setHeaders": []map[string]string{{"name": "X-Debug", "value": "1"}}})
	p.waitFor("the edited attempt", `document.querySelectorAll('[data-testid=attempt-edited]').length === 1`)
	p.waitFor("the comparison still open, now of the last two", `document.querySelector('[data-testid=compare]').open && document.querySelector('[data-testid=compare-b]').value === '3'`)
	p.click(`[data-testid=compare-edit]`)
	p.waitFor("the recorded request against the edited one", `document.querySelector('[data-testid=compare-a]').value === 'original' && document.querySelector('[data-testid=compare-b]').value === '3'`)
	req, resp, note = p.comparison()
	for _, want := range []change{
		{"header X-Debug", nil, ptr("1")},
		{"header Content-Length", ptr("25"), ptr("27")},
		{"body $.order", ptr("7"), ptr("8")},
		{"body $.items[2]", nil, ptr("3")},
	} {
		got := find(req, want.Where)
		if got == nil || str(got.A) != str(want.A) || str(got.B) != str(want.B) {
			t.Errorf("request change at %q: got %+v, want %s → %s; all: %+v", want.Where, got, str(want.A), str(want.B), req)
		}
	}
	if len(req) != 4 {
		t.Errorf("the edit changed %d things, want 4: %+v", len(req), req)
	}
	if resp != nil || !strings.HasPrefix(note, "a side has no response") {
		t.Errorf("the recorded request has no response, yet the comparison shows %+v (note %q)", resp, note)
	}
	wantAPI(t, token, did, "original", "3", req, resp, note)

	// A choice made by hand stays through a new attempt.
	p.do(chromedpSetValue(`[data-testid=compare-a]`, "2"))
	p.waitFor("attempt 2 against 3", `document.querySelector('[data-testid=compare-sides]').textContent.startsWith('Comparing attempt 2: 200')`)
	req, _, _ = p.comparison()
	wantAPI(t, token, did, "2", "3", req, nil, "")
	retry(nil)
	p.waitFor("a fourth attempt", `document.querySelectorAll('[data-testid=attempt-status]').length === 4`)
	if a, b := eval[string](p, `document.querySelector('[data-testid=compare-a]').value`), eval[string](p, `document.querySelector('[data-testid=compare-b]').value`); a != "2" || b != "3" {
		t.Errorf("after a new attempt the comparison is of %s and %s, want the chosen 2 and 3", a, b)
	}
	p.assertLabelled()
	p.screenshot("compare.png")
}

func ptr(s string) *string { return &s }

// wantAPI fails the test unless the API's comparison (Delivery.compare)
// and relay deliveries diff -o json list the request changes shown (and,
// when response is not nil or note not empty, the response changes and
// note shown) for the same two sides.
func wantAPI(t *testing.T, token, id, a, b string, request, response []change, note string) {
	t.Helper()
	api := apiComparison(t, token, id, a, b)
	var cli comparisonJSON
	out := cliDiff(t, token, id, a, b)
	if err := json.Unmarshal([]byte(out), &cli); err != nil {
		t.Fatalf("diff -o json: %v\n%s", err, out)
	}
	for _, got := range []struct {
		who string
		c   comparisonJSON
	}{{"the API answers", api}, {"relay deliveries diff lists", cli}} {
		if !reflect.DeepEqual(nonNil(got.c.Request), nonNil(request)) {
			t.Errorf("%s vs %s: the console shows request changes\n%s\n%s\n%s", a, b, show(request), got.who, show(got.c.Request))
		}
		if response == nil && note == "" {
			continue
		}
		if !reflect.DeepEqual(nonNil(got.c.Response), nonNil(response)) || got.c.Note != note {
			t.Errorf("%s vs %s: the console shows response changes\n%s(note %q)\n%s\n%s(note %q)", a, b, show(response), note, got.who, show(got.c.Response), got.c.Note)
		}
	}
}

// comparisonJSON is a comparison as relay deliveries diff -o json prints it.
type comparisonJSON struct {
	Request, Response []change
	Note              string
}

// apiComparison is the API's comparison of two sides of delivery id, in
// the command line's terms (before and after as a and b).
func apiComparison(t *testing.T, token, id, a, b string) comparisonJSON {
	t.Helper()
	var q struct {
		Delivery struct {
			Compare struct {
				Request, Response []struct {
					Where         string
					Before, After *string
				}
				Note *string
			}
		}
	}
	srv.MustGraphQL(t, token, `query($id: ID!, $a: String!, $b: String!){ delivery(id: $id){ compare(a: $a, b: $b){
		request{ where before after } response{ where before after } note } } }`, map[string]any{"id": id, "a": a, "b": b}, &q)
	var out comparisonJSON
	for _, c := range q.Delivery.Compare.Request {
		out.Request = append(out.Request, change{c.Where, c.Before, c.After})
	}
	for _, c := range q.Delivery.Compare.Response {
		out.Response = append(out.Response, change{c.Where, c.Before, c.After})
	}
	if n := q.Delivery.Compare.Note; n != nil {
		out.Note = *n
	}
	return out
}

// cliDiff is relay deliveries diff -o json of two sides of delivery id.
func cliDiff(t *testing.T, token, id, a, b string) string {
	t.Helper()
	return cli(t, token, "deliveries", "diff", id, a, b, "-o", "json")
}

func nonNil(cs []change) []change {
	if cs == nil {
		return []change{}
	}
	return cs
}

func show(cs []change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %s: %s → %s\n", c.Where, str(c.A), str(c.B))
	}
	return b.String()
}

// TestCompareShownAsAnswered: for answers that differ in every way a body
// can (JSON formatted otherwise, nested JSON with keys to sort and
// characters Go escapes, text lines, binary, more than a hundred
// differences, text against JSON, an empty body), the console shows
// exactly what the API answers, and relay deliveries diff prints it too.
func TestCompareShownAsAnswered(t *testing.T) {
	many := func(v int) []byte {
		m := map[string]int{}
		for i := range 150 {
			m[fmt.Sprintf("k%03d", i)] = v
		}
		b, _ := json.Marshal(m)
		return b
	}
	cases := map[string][2][]byte{
		"/formatted": {[]byte(`{"a":1,"b":[1,2]}`), []byte("{ \"a\": 1,\n  \"b\": [1, 2] }")},
		"/nested":    {[]byte(`{"z":{"é":1,"A":[1,{"x":"<a&b>"}]},"gone":null}`), []byte(`{"z":{"é":2,"A":[1,{"x":"<a&c>"},3],"b":"\u2028"},"new":true}`)},
		"/text":      {[]byte("line 1\nline 2\nline 3"), []byte("line 1\nchanged\nline 3\nline 4")},
		"/binary":    {{0xff, 0xfe, 0x00, 0x01}, {0xff, 0xfe, 0x00, 0x02, 0x03}},
		"/many":      {many(1), many(2)},
		"/kinds":     {[]byte("ok"), []byte(`{"ok":true}`)},
		"/empty":     {nil, []byte("now something")},
	}
	var mu sync.Mutex
	seen := map[string]int{} // answers given per path: the first gets the first body
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := seen[r.URL.Path]
		seen[r.URL.Path]++
		mu.Unlock()
		_, _ = w.Write(cases[r.URL.Path][min(n, 1)])
	}))
	t.Cleanup(local.Close)
	target := strings.TrimPrefix(local.URL, "http://")
	token := signUp(t, "Parity")
	id := proxyEndpoint(t, token, "parity", target)
	srv.StartAgent(t, token, id, target)
	waitAgent(t, token, id)

	p := newPage(t, 1280, 800)
	p.openEndpoint(token, id)
	for path := range cases {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			send(t, id, http.MethodPost, path, nil, []byte(`{}`))
			did := deliveryAt(t, token, id, path)
			srv.MustGraphQL(t, token, `mutation($id: ID!){ retryDelivery(id: $id){ id } }`, map[string]any{"id": did}, nil)

			p.openRow(path)
			p.waitFor("two attempts", `document.querySelectorAll('[data-testid=attempt-status]').length === 2`)
			if !eval[bool](p, `document.querySelector('[data-testid=compare]').open`) {
				p.click(`[data-testid=compare] summary`)
			}
			var console comparisonJSON
			console.Request, console.Response, console.Note = p.comparison()
			raw := show(console.Response)
			if len(console.Response) == 0 {
				t.Fatalf("the console shows no difference between the answers (note %q)", console.Note)
			}
			if path == "/text" {
				// A changed line is one change, not a removal and an addition
				// (headers such as Content-Length may differ besides).
				var body []change
				for _, c := range console.Response {
					if strings.HasPrefix(c.Where, "body") {
						body = append(body, c)
					}
				}
				if len(body) != 2 || body[0].Where != "body line 2" || body[0].A == nil || *body[0].A != "line 2" || body[0].B == nil || *body[0].B != "changed" {
					t.Errorf("the console shows\n%sfor a changed line 2 and an added line 4", raw)
				}
			}
			wantAPI(t, token, did, "1", "2", console.Request, console.Response, console.Note)
		})
	}
}
