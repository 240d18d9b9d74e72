package graph

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/relayhq/relay/graph/generated"
	"github.com/relayhq/relay/graph/model"
)

// TestSizedCache: entries over maxEntry are never kept, and the total
// stays under maxTotal by evicting the least recently used.
func TestSizedCache(t *testing.T) {
	ctx := context.Background()
	c := newSizedCache(100, 10, 25, func(_ string, v string) int { return len(v) })
	c.Add(ctx, "big", strings.Repeat("x", 11))
	if _, ok := c.Get(ctx, "big"); ok {
		t.Error("an entry over maxEntry was kept")
	}
	for _, k := range []string{"a", "b", "c"} {
		c.Add(ctx, k, strings.Repeat(k, 10))
	}
	if _, ok := c.Get(ctx, "a"); ok {
		t.Error("the oldest entry survived a total over maxTotal")
	}
	for _, k := range []string{"b", "c"} {
		if _, ok := c.Get(ctx, k); !ok {
			t.Errorf("entry %s evicted though the total allowed it", k)
		}
	}
	c.Add(ctx, "c", "cc") // replacing an entry replaces its weight
	if got := c.bytes(); got != 12 {
		t.Errorf("total = %d, want 12", got)
	}
	small := newSizedCache(2, 100, 1000, func(_ string, v string) int { return len(v) })
	for _, k := range []string{"a", "b", "c"} {
		small.Add(ctx, k, k)
	}
	if got := small.bytes(); got != 2 {
		t.Errorf("total after an eviction by count = %d, want 2", got)
	}
}

// TestSizedCacheConcurrent: the caches are shared by every request.
func TestSizedCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	c := newSizedCache(50, 64, 1000, func(_ string, v string) int { return len(v) })
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				k := strconv.Itoa((g*500 + i) % 97)
				c.Add(ctx, k, strings.Repeat("v", i%70))
				c.Get(ctx, k)
			}
		}()
	}
	wg.Wait()
	if got := c.bytes(); got < 0 || got > 1000 {
		t.Errorf("total = %d, want within 0..1000", got)
	}
}

// TestCountFields: fragments count each time they are spread, and the
// count stops soon after the limit however large the expansion.
func TestCountFields(t *testing.T) {
	tests := []struct {
		name, query string
		limit, want int
	}{
		{"plain", `{ a b { c d } }`, 100, 4},
		{"aliases", `{ x: a y: a z: a }`, 100, 3},
		{"spreads repeat", `{ ...F ...F } fragment F on Q { a b }`, 100, 4},
		{"inline fragment", `{ ... on Q { a } }`, 100, 1},
		{"stops past the limit", `{ ...F ...F ...F ...F } fragment F on Q { ...G ...G ...G ...G } fragment G on Q { a a a a a a a a a a }`, 15, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := parser.ParseQuery(&ast.Source{Input: tt.query})
			if err != nil {
				t.Fatal(err)
			}
			link(doc)
			if got := countFields(doc.Operations[0].SelectionSet, tt.limit); got != tt.want {
				t.Errorf("countFields = %d, want %d", got, tt.want)
			}
		})
	}
}

// link sets the fragment definitions of spreads, as validation does.
func link(doc *ast.QueryDocument) {
	var walk func(ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, s := range set {
			switch s := s.(type) {
			case *ast.Field:
				walk(s.SelectionSet)
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			case *ast.FragmentSpread:
				s.Definition = doc.Fragments.ForName(s.Name)
			}
		}
	}
	walk(doc.Operations[0].SelectionSet)
	for _, f := range doc.Fragments {
		walk(f.SelectionSet)
	}
}

// TestQuoteless: error messages lose what they quote of the request.
func TestQuoteless(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"short message", "Cannot query field \"x\" on type \"Query\".", "Cannot query field \"x\" on type \"Query\"."},
		{"json body dropped", "json request body could not be decoded: unexpected EOF body:{\"query\": \"secret", "json request body could not be decoded: unexpected EOF"},
		{"long message cut", strings.Repeat("é", 150), strings.Repeat("é", 100) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quoteless(tt.in); got != tt.want {
				t.Errorf("quoteless = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPageCost: a page weighs its clamped size times a row; payload
// fields weigh the capture cap in KiB.
func TestPageCost(t *testing.T) {
	c := costs(Limits{CaptureCap: 64 << 10})
	if got := c.Delivery.Body(0); got != payloadCost {
		t.Errorf("body = %d, want %d", got, payloadCost)
	}
	if got := c.Delivery.BodyBase64(0); got != payloadCost {
		t.Errorf("bodyBase64 = %d, want %d", got, payloadCost)
	}
	if got := c.Delivery.Compare(1000, "1", "2"); got != compareCost {
		t.Errorf("compare = %d, want %d", got, compareCost)
	}
	for _, tt := range []struct {
		first *int
		want  int
	}{{nil, 1 + 50*10}, {ptr(0), 1 + 50*10}, {ptr(7), 1 + 7*10}, {ptr(1 << 30), 1 + 100*10}, {ptr(-1), 1 + 50*10}} {
		if got := c.Inspector.Deliveries(10, tt.first, nil, nil); got != tt.want {
			t.Errorf("deliveries(first: %v) of rows of 10 = %d, want %d", tt.first, got, tt.want)
		}
	}
	if got := c.Endpoint.Deliveries(10, ptr(7), nil, &model.DeliveryFilter{}); got != 1000+1+7*10 {
		t.Errorf("a filtered page of 7 rows of 10 = %d, want the scan's 1000 + 71", got)
	}
	if got := c.Query.Events(3, nil, ptr(1)); got != 1000+1+3 {
		t.Errorf("events(first: 1) of rows of 3 = %d, want the scan's 1000 + 4", got)
	}
	if got := c.Query.Events(1<<30, nil, ptr(100)); got <= 0 {
		t.Errorf("a huge cost overflowed to %d", got)
	}
}

func ptr(n int) *int { return &n }

// FuzzQuoteless: whatever a request makes an error say, the message that
// leaves is short and stays valid UTF-8.
func FuzzQuoteless(f *testing.F) {
	f.Add("json request body could not be decoded: unexpected EOF body:{\"query\"")
	f.Add(strings.Repeat("é", 300))
	f.Add("Cannot query field \"x\" on type \"Query\".")
	f.Fuzz(func(t *testing.T, msg string) {
		got := quoteless(msg)
		if len(got) > maxMessage+len("…") {
			t.Errorf("quoteless left %d bytes", len(got))
		}
		if utf8.ValidString(msg) && !utf8.ValidString(got) {
			t.Errorf("quoteless(%q) = %q is not valid UTF-8", msg, got)
		}
		if strings.HasPrefix(msg, "json request body could not be decoded") && strings.Contains(got, " body:") {
			t.Errorf("quoteless(%q) kept the body", msg)
		}
	})
}

// TestClientDocumentsWithinBudget: what the console, the agent and the
// CLI send costs well under the default budget (the documents as in
// console/web/assets/api.js, agentcli/protocol.go and cmd/relay).
func TestClientDocumentsWithinBudget(t *testing.T) {
	const row = `id cursor address method path bodySize complete receivedAt responseStatus attempts { id status startedAt durationMs error retry }`
	const endpoint = `id name url mode target responseCapture agentConnected createdAt`
	docs := []struct {
		name, query string
		vars        map[string]any
	}{
		{"console history page", `query($id: ID!, $first: Int, $after: String) { inspector(id: $id) { id deliveries(first: $first, after: $after) {
			edges { cursor node { ` + row + ` } } pageInfo { hasNextPage endCursor } } } }`, map[string]any{"id": "i", "first": 50}},
		{"console delivery detail", `query($id: ID!) { delivery(id: $id) { ` + row + ` headers { name value } body bodyBase64 responseHeaders { name value } responseBody } }`, map[string]any{"id": "d"}},
		{"console endpoints", `query($first: Int, $after: ID) { endpoints(first: $first, after: $after) { ` + endpoint + ` } }`, map[string]any{"first": 1000}},
		{"console sign up", `mutation($name: String!) { signUp(name: $name) { token account { id name } } }`, map[string]any{"name": "n"}},
		{"console live rows", `subscription($address: ID!, $since: String) { deliveries(address: $address, since: $since) { ` + row + ` } }`, map[string]any{"address": "a"}},
		{"agent forward requests", `subscription($e: ID!){ forwardRequests(endpointId: $e){ attemptId deliveryId method path headers{name value} bodyBase64 } }`, map[string]any{"e": "e"}},
		{"agent complete forward", `mutation($input: CompleteForwardInput!){ completeForward(input: $input) }`, map[string]any{"input": map[string]any{"attemptId": "a", "status": 200}}},
		{"console and relay deliveries diff compare", `query($id: ID!, $a: String!, $b: String!) { delivery(id: $id) { id compare(a: $a, b: $b) {
			request { where before after } response { where before after } responseCompared note } } }`, map[string]any{"id": "d", "a": "1", "b": "2"}},
		{"relay retry", `mutation($id: ID!){ retryDelivery(id: $id){ id responseStatus attempts{ status durationMs error retry } } }`, map[string]any{"id": "d"}},
	}
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}, Complexity: costs(Limits{}.withDefaults())})
	for _, d := range docs {
		t.Run(d.name, func(t *testing.T) {
			doc, errs := gqlparser.LoadQuery(es.Schema(), d.query)
			if errs != nil {
				t.Fatal(errs)
			}
			cost := operationCost(context.Background(), es, doc.Operations[0], d.vars)
			t.Logf("cost %d", cost)
			if cost > DefaultMaxCost/2 {
				t.Errorf("cost %d, want under half the default budget %d", cost, DefaultMaxCost)
			}
		})
	}
}

// TestConsoleSparklinePagesFitTheBudget: the home page reads its
// sparklines' stats SPARKLINES_PAGE Endpoints a request (console/web/assets
// charts.js), with api.js ENDPOINTS_STATS: that page must pass the default
// budget, and one row more must not, or the console asks for fewer rows
// than a request holds. Both are read from the console's files, so a change
// to the document, the page or the price of stats fails here.
func TestConsoleSparklinePagesFitTheBudget(t *testing.T) {
	dir := filepath.Join("..", "console", "web", "assets")
	page := readFrom(t, filepath.Join(dir, "charts.js"), `export const SPARKLINES_PAGE = (\d+);`)
	query := readFrom(t, filepath.Join(dir, "api.js"), "export const ENDPOINTS_STATS = `([^`]+)`;")
	pageFitsTheBudget(t, "sparklines", query, page)
}

// TestDesktopStatsPagesFitTheBudget: the desktop window reads its cards'
// charts statsPage Endpoints a request (desktop/api.go), each row selecting
// statsFields, through apiclient.EndpointsIn's document: that page must
// pass the default budget, and one row more must not. All three are read
// from the files, so a change to the fields, the page, the document or the
// price of stats fails here.
func TestDesktopStatsPagesFitTheBudget(t *testing.T) {
	api := filepath.Join("..", "desktop", "api.go")
	page := readFrom(t, api, `(?m)^const statsPage = (\d+)$`)
	fields := readFrom(t, api, "(?m)^const statsFields = `([^`]+)`$")
	doc := readFrom(t, filepath.Join("..", "apiclient", "endpoints.go"), "(?m)^const endpointsQuery = `([^`]+)`$")
	pageFitsTheBudget(t, "cards' stats", fmt.Sprintf(doc, fields), page)
}

// readFrom returns the first submatch of pattern in the file at path.
func readFrom(t *testing.T, path, pattern string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(pattern).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s holds no %s", path, pattern)
	}
	return string(m[1])
}

// pageFitsTheBudget checks that query (an endpoints page with $first and
// $after) costs at most DefaultMaxCost with first = page, and more with
// page+1, so a client's page is the most a request holds.
func pageFitsTheBudget(t *testing.T, what, query, page string) {
	t.Helper()
	n, err := strconv.Atoi(page)
	if err != nil {
		t.Fatal(err)
	}
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}, Complexity: costs(Limits{}.withDefaults())})
	doc, errs := gqlparser.LoadQuery(es.Schema(), query)
	if errs != nil {
		t.Fatal(errs)
	}
	cost := func(first int) int {
		return operationCost(context.Background(), es, doc.Operations[0], map[string]any{"first": first, "after": "e"})
	}
	t.Logf("a page of %d %s costs %d, of %d %d", n, what, cost(n), n+1, cost(n+1))
	if c := cost(n); c > DefaultMaxCost {
		t.Errorf("a page of %d %s costs %d, over the default budget %d", n, what, c, DefaultMaxCost)
	}
	if c := cost(n + 1); c <= DefaultMaxCost {
		t.Errorf("a page of %d %s costs %d, within the default budget %d: the page could be larger", n+1, what, c, DefaultMaxCost)
	}
}

// allFields selects every field of the named type, and of the object types
// under it, from the schema itself: a field added to Delivery is priced by
// the test below without anyone editing it.
func allFields(t *testing.T, s *ast.Schema, name string, depth int) string {
	t.Helper()
	var b strings.Builder
	for _, f := range s.Types[name].Fields {
		if strings.HasPrefix(f.Name, "__") || len(f.Arguments) > 0 {
			continue
		}
		b.WriteString(f.Name)
		if inner := s.Types[f.Type.Name()]; inner.Kind == ast.Object {
			if depth == 0 {
				b.Reset()
				continue
			}
			b.WriteString(" { " + allFields(t, s, inner.Name, depth-1) + " }")
		}
		b.WriteString(" ")
	}
	return b.String()
}

// TestPagesOfEveryField: the first query a user writes — the default page,
// or first: 50, with every field of Delivery — is within the default
// budget; floods of aliases and of pages of payloads are not.
func TestPagesOfEveryField(t *testing.T) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}, Complexity: costs(Limits{}.withDefaults())})
	row := allFields(t, es.Schema(), "Delivery", 2)
	if !strings.Contains(row, "body ") || !strings.Contains(row, "headers { name value") {
		t.Fatalf("every field of Delivery: %s", row)
	}
	pages := func(n int, page, sel string) string {
		var b strings.Builder
		b.WriteString(`query { inspector(id: "i") { `)
		for i := range n {
			b.WriteString("p" + strconv.Itoa(i) + ": deliveries" + page + " { nodes { " + sel + " } pageInfo { hasNextPage endCursor } } ")
		}
		return b.String() + "} }"
	}
	aliases := func(n int, sel string) string {
		var b strings.Builder
		b.WriteString("query { ")
		for i := range n {
			b.WriteString("d" + strconv.Itoa(i) + `: delivery(id: "d") { ` + sel + " } ")
		}
		return b.String() + "}"
	}
	for _, tt := range []struct {
		name   string
		query  string
		within bool
	}{
		{"the default page with id and body", pages(1, "", "id body"), true},
		{"the default page with every field", pages(1, "", row), true},
		{"first: 50 with every field", pages(1, "(first: 50)", row), true},
		{"first: 50 with headers and body", pages(1, "(first: 50)", "id headers { name value } body"), true},
		{"edges of the default page with every field", `query { inspector(id: "i") { deliveries { edges { cursor node { ` + row + ` } } pageInfo { hasNextPage endCursor } } } }`, true},
		{"one delivery with every field", aliases(1, row), true},
		{"first: 100 with every field", pages(1, "(first: 100)", row), false},
		{"four default pages with every field", pages(4, "", row), false},
		{"twelve default pages of bodies", pages(12, "", "body"), false},
		{"200 aliases of a delivery's every field", aliases(200, row), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc, errs := gqlparser.LoadQuery(es.Schema(), tt.query)
			if errs != nil {
				t.Fatal(errs)
			}
			cost := operationCost(context.Background(), es, doc.Operations[0], nil)
			t.Logf("cost %d", cost)
			if within := cost <= DefaultMaxCost; within != tt.within {
				t.Errorf("cost %d within the budget %d: %v, want %v", cost, DefaultMaxCost, within, tt.within)
			}
		})
	}
}

// TestStatsCost: the console's stats query of one address (every bucket
// field, totals too) is within half the default budget; the same on every
// Endpoint of the endpoints list, or aliased a dozen times, is refused.
func TestStatsCost(t *testing.T) {
	const bucket = `start deliveries status2xx status3xx status4xx status5xx pending filtered refused answers p50Ms p95Ms offlineSeconds`
	const stats = `stats(range: WEEK) { range bucketSeconds from to totals { ` + bucket + ` } buckets { ` + bucket + ` } }`
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}, Complexity: costs(Limits{}.withDefaults())})
	cost := func(q string) int {
		doc, errs := gqlparser.LoadQuery(es.Schema(), q)
		if errs != nil {
			t.Fatal(errs)
		}
		return operationCost(context.Background(), es, doc.Operations[0], nil)
	}
	if c := cost(`{ endpoint(id: "e") { id ` + stats + ` } }`); c > DefaultMaxCost/2 {
		t.Errorf("one Endpoint's stats cost %d, want under %d", c, DefaultMaxCost/2)
	}
	if c := cost(`{ inspector(id: "i") { id ` + stats + ` } }`); c > DefaultMaxCost/2 {
		t.Errorf("one inspector's stats cost %d, want under %d", c, DefaultMaxCost/2)
	}
	if c := cost(`{ endpoints { id ` + stats + ` } }`); c <= DefaultMaxCost {
		t.Errorf("stats of every Endpoint cost %d, want over the budget %d", c, DefaultMaxCost)
	}
	var aliases strings.Builder
	for i := range 12 {
		fmt.Fprintf(&aliases, "a%d: inspector(id: \"i\") { %s } ", i, stats)
	}
	if c := cost(`{ ` + aliases.String() + ` }`); c <= DefaultMaxCost {
		t.Errorf("a dozen aliased stats cost %d, want over the budget %d", c, DefaultMaxCost)
	}
}
