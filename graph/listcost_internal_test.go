package graph

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/generated"
	"github.com/relayhq/relay/readmodel"
)

// inRow are the list fields of schema.graphqls that need no price of their
// own: their elements are held by a row (or a result) the operation has
// already read or computed, and priced, whatever the list holds; their
// bytes are bounded as the answer is built. A list field of the schema
// that is neither priced by costs nor named here fails
// TestSchemaListsArePriced, so a new list is priced when it is added.
var inRow = map[string]string{
	"QueuePolicy.retryOn":        "a column of the queue policy: at most 4 outcomes",
	"Filter.values":              "a column of its filter: at most 32 values",
	"Listener.filters":           "held by its session in memory: at most 16 filters",
	"Endpoint.filters":           "a column of the Endpoint's row (see columns): at most 16 filters",
	"Fidelity.differences":       "a column of its attempt: at most 3 parts",
	"AttemptResponse.headers":    "read with the attempts' one read of the delivery's stream (Attempt.response)",
	"RequestEdit.setHeaders":     "a column of its attempt: the edit's headers",
	"RequestEdit.unsetHeaders":   "a column of its attempt: the edit's header names",
	"Delivery.redactedQuery":     "a column of the delivery's row",
	"Delivery.trailers":          "a column of the delivery's row",
	"AttemptComparison.request":  "made by its comparison (compareCost): at most 101 changes",
	"AttemptComparison.response": "made by its comparison (compareCost): at most 101 changes",
	"Explanation.facts":          "made by its explanation (explanationCost), made once a row",
	"DeliveryConnection.edges":   "the rows of its page, which the page prices",
	"DeliveryConnection.nodes":   "the rows of its page, which the page prices",
	"EventConnection.edges":      "the rows of its page, which the page prices",
	"EventConnection.nodes":      "the rows of its page, which the page prices",
	"AddressAnswer.headers":      "a column of its address's row: at most 32 headers",
	"Handshakes.enabled":         "a column of its address's row: at most 5 handshakes",
	"AccountUsage.refusals":      "this node's counts in memory: one a reason (storage, rate)",
}

// oneRead are the fields with resolvers of their own (gqlgen.yml) that
// need no price of their own: each makes one read of a row, as a root
// field such as delivery(id) does, priced a point like any field.
var oneRead = map[string]string{
	"Account.member": "one read of the member row the request acts for",
	"Account.usage":  "one read of the account's usage (its own account: me)",
}

// mostRows is, for each priced list, the most rows it can return under the
// relay's caps, with the arguments that ask for the most.
func mostRows(c generated.ComplexityRoot, l Limits) map[string]struct {
	price func(child int) int
	rows  int
} {
	most := func(n int) *int { return &n }
	type priced = struct {
		price func(child int) int
		rows  int
	}
	return map[string]priced{
		"Query.endpoints":        {func(child int) int { return c.Query.Endpoints(child, most(1<<20), nil) }, l.Endpoints},
		"Query.tokens":           {c.Query.Tokens, domain.MaxTokens + domain.MaxMembers*domain.MaxSessions},
		"Account.members":        {c.Account.Members, domain.MaxMembers},
		"Endpoint.listeners":     {c.Endpoint.Listeners, domain.MaxEndpointSessions},
		"Query.accountsUsage":    {func(child int) int { return c.Query.AccountsUsage(child, nil, most(maxUsageFirst)) }, maxUsageFirst},
		"Query.queuedDeliveries": {func(child int) int { return c.Query.QueuedDeliveries(child, "e", nil, most(1<<20)) }, 1000},
		"Account.activity":       {func(child int) int { return c.Account.Activity(child, most(1<<20)) }, maxActivity},
		"Stats.buckets":          {c.Stats.Buckets, readmodel.StatsBuckets},
		"Endpoint.deliveries":    {func(child int) int { return c.Endpoint.Deliveries(child, most(1<<20), nil, nil) }, MaxPageSize},
		"Inspector.deliveries":   {func(child int) int { return c.Inspector.Deliveries(child, most(1<<20), nil, nil) }, MaxPageSize},
	}
}

// priced tells whether costs gives typ.field a price of its own.
func priced(c generated.ComplexityRoot, typ, field string) bool {
	t := reflect.ValueOf(c).FieldByName(typ)
	if !t.IsValid() {
		return false
	}
	for i := range t.NumField() {
		if strings.EqualFold(t.Type().Field(i).Name, field) {
			return !t.Field(i).IsNil()
		}
	}
	return false
}

// TestSchemaListsArePriced reads the schema: every list field is priced
// by costs (at least its most rows under the relay's caps, for those that
// read rows) or held by a row already priced (inRow); every field with a
// resolver of its own (work a row does) is priced, or one read (oneRead).
func TestSchemaListsArePriced(t *testing.T) {
	l := Limits{}.withDefaults()
	c := costs(l)
	s := generated.NewExecutableSchema(generated.Config{}).Schema()
	var names []string
	for name := range s.Types {
		names = append(names, name)
	}
	sort.Strings(names)
	seen := map[string]bool{}
	for _, name := range names {
		typ := s.Types[name]
		if typ.Kind != ast.Object || strings.HasPrefix(name, "__") {
			continue
		}
		for _, f := range typ.Fields {
			key := name + "." + f.Name
			if f.Type.Elem == nil || strings.HasPrefix(f.Name, "__") {
				continue
			}
			seen[key] = true
			if _, ok := inRow[key]; ok == priced(c, name, f.Name) {
				if ok {
					t.Errorf("%s is priced by costs and listed in inRow: one or the other", key)
				} else {
					t.Errorf("%s returns a list without a price: price it in costs by the most rows it can return, or name it in inRow with why it needs none", key)
				}
			}
		}
	}
	// Fields with resolvers of their own do work for each row.
	roots := reflect.TypeFor[generated.ResolverRoot]()
	for i := range roots.NumMethod() {
		m := roots.Method(i)
		if m.Name == "Query" || m.Name == "Mutation" || m.Name == "Subscription" {
			continue
		}
		res := m.Type.Out(0)
		for j := range res.NumMethod() {
			field := res.Method(j).Name
			var def *ast.FieldDefinition
			for _, f := range s.Types[m.Name].Fields {
				if strings.EqualFold(f.Name, field) {
					def = f
				}
			}
			if def == nil {
				t.Fatalf("%s.%s: no such field in the schema", m.Name, field)
			}
			key := m.Name + "." + def.Name
			seen[key] = true
			if _, ok := oneRead[key]; ok == priced(c, m.Name, def.Name) {
				t.Errorf("%s has a resolver: price it in costs, or name it in oneRead (not both)", key)
			}
		}
	}
	for _, table := range []map[string]string{inRow, oneRead} {
		for key := range table {
			if !seen[key] {
				t.Errorf("%s is named in a table but is no list or resolver of the schema", key)
			}
		}
	}
	for key, p := range mostRows(c, l) {
		if !seen[key] {
			t.Errorf("%s: not a list of the schema", key)
		}
		typ, field, _ := strings.Cut(key, ".")
		if !priced(c, typ, field) {
			continue // told above
		}
		if got := p.price(1); got < p.rows {
			t.Errorf("%s of rows of 1 point costs %d, under the %d rows it can return", key, got, p.rows)
		}
	}
}

// TestListsWithinTheBudget: what clients ask of the lists stays within the
// budget, at their most rows; what reads beyond each row of the largest
// lists is refused.
func TestListsWithinTheBudget(t *testing.T) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}, Complexity: costs(Limits{}.withDefaults())})
	const answer = `answer { status headers { name value } body } handshakes { enabled metaVerifyTokenSet zoomSecretSet inProxy }`
	const endpoint = `id name url mode target responseCapture agentConnected agentCount createdAt refusedRequests filters { text } retention { window isDefault max deletedBefore } ` + answer
	for _, tt := range []struct {
		name, query string
		within      bool
	}{
		{"the console's Endpoints", `query { endpoints { ` + endpoint + ` } }`, true},
		{"the console's Endpoint", `query { endpoint(id: "e") { ` + endpoint + ` listeners { agentId target primary connectedAt filters { text } }
			queue { queued inFlight dead policy { ordering maxInFlight ratePerSecond maxAttempts backoffBase backoffCap } } } }`, true},
		{"the console's tokens", `query { tokens { id name createdAt lastUsedAt expiresAt current member session } }`, true},
		{"the console's team", `query { me { id member { id login role joinedAt you } members { id login role joinedAt you } } }`, true},
		{"the desktop's Endpoints", `query { endpoints { id name url mode target agentConnected agentCount filters{ text } answer{ status } handshakes{ enabled } queue{ queued inFlight dead } } }`, true},
		{"relay endpoints list", `query { endpoints { id name url mode target responseCapture agentConnected agentCount createdAt filters{ text }
			retention{ window seconds isDefault max deletedBefore } queue{ queued inFlight dead policy{ maxInFlight ratePerSecond ordering retryOn backoffBase backoffCap maxAttempts maxAge } }
			answer{ status headers{ name value } body bodyBase64 } handshakes{ enabled metaVerifyTokenSet zoomSecretSet inProxy } } }`, true},
		{"four lists of Endpoints' queues", `query { a: endpoints { queue { queued } } b: endpoints { queue { queued } } c: endpoints { queue { queued } } d: endpoints { queue { queued } } }`, false},
		{"ten lists of Endpoints", `query { a: endpoints { id } b: endpoints { id } c: endpoints { id } d: endpoints { id } e: endpoints { id }
			f: endpoints { id } g: endpoints { id } h: endpoints { id } i: endpoints { id } j: endpoints { id } }`, false},
		{"every Endpoint's listeners", `query { endpoints { listeners { agentId } } }`, false},
		{"every Endpoint's history", `query { endpoints { deliveries { nodes { id } } } }`, false},
		{"four lists of tokens", `query { a: tokens { id } b: tokens { id } c: tokens { id } d: tokens { id } }`, false},
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
