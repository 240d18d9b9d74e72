package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/99designs/gqlgen/client"

	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/readmodel"
)

// listReads is the real views, counting the rows the lists of an account
// read and the reads each of their rows makes.
type listReads struct {
	graph.Views
	rows, reads atomic.Int64
}

func (v *listReads) Endpoints(ctx context.Context, accountID, after string, limit int) ([]readmodel.Endpoint, error) {
	eps, err := v.Views.Endpoints(ctx, accountID, after, limit)
	v.rows.Add(int64(len(eps)))
	return eps, err
}

func (v *listReads) Tokens(ctx context.Context, accountID string) ([]readmodel.Token, error) {
	ts, err := v.Views.Tokens(ctx, accountID)
	v.rows.Add(int64(len(ts)))
	return ts, err
}

func (v *listReads) QueueEntry(ctx context.Context, deliveryID string) (readmodel.QueueEntry, error) {
	v.reads.Add(1)
	return v.Views.(queueViews).QueueEntry(ctx, deliveryID)
}

func (v *listReads) QueueCounts(ctx context.Context, endpointID string) (readmodel.QueueCounts, error) {
	v.reads.Add(1)
	return v.Views.(queueViews).QueueCounts(ctx, endpointID)
}

func (v *listReads) QueueList(ctx context.Context, accountID, endpointID, state, after string, limit int) ([]readmodel.QueueEntry, string, error) {
	v.reads.Add(1)
	return v.Views.(queueViews).QueueList(ctx, accountID, endpointID, state, after, limit)
}

// TestListsChargeTheRowsTheyRead: an operation on an account's lists is
// charged at least the work it does, counted on the real views and log:
// a point a row of a list, a point a read (of the views or the log) for a
// row. 99 aliases of endpoints read 150 rows each; every Endpoint's queue
// read the Endpoint's stream from the log and its counts from the views;
// 99 aliases of tokens read 100 rows each. Each was charged less than
// that; now it is charged more than it reads, or refused before it reads
// anything.
func TestListsChargeTheRowsTheyRead(t *testing.T) {
	var counted *listReads
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		counted = &listReads{Views: r.Views}
		r.Views = counted
	})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	tok := e.signUp(t, "Acme")
	auth := client.AddHeader("Authorization", "Bearer "+tok)
	const endpoints, tokens = 150, 99 // with the sign-up's, the 100 an account may hold
	for i := range endpoints {
		e.c.MustPost(`mutation($n: String!) { createEndpoint(input: {name: $n, mode: QUEUE}) { id } }`,
			&struct{ CreateEndpoint struct{ ID string } }{}, auth, client.Var("n", fmt.Sprint("ep", i)))
	}
	for i := range tokens {
		e.c.MustPost(`mutation($n: String!) { createToken(name: $n) { secret } }`,
			&struct{ CreateToken struct{ Secret string } }{}, auth, client.Var("n", fmt.Sprint("t", i)))
	}
	aliases := func(n int, field string) string {
		var b strings.Builder
		b.WriteString("{ ")
		for i := range n {
			fmt.Fprintf(&b, "a%d: %s ", i, field)
		}
		return b.String() + "}"
	}
	for _, tt := range []struct {
		name, query string
		admitted    bool // the operation is within the budget (and runs)
	}{
		{"the console's list of Endpoints", `{ endpoints { id name url mode target responseCapture agentConnected agentCount createdAt refusedRequests filters { text } } }`, true},
		{"99 aliases of endpoints", aliases(99, "endpoints { id }"), false},
		{"every Endpoint's queue", `{ endpoints { queue { queued inFlight dead } } }`, true},
		{"four lists of every Endpoint's queue", aliases(4, "endpoints { queue { queued } }"), false},
		{"99 aliases of tokens", aliases(99, "tokens { id }"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cost, err := graph.OperationCost(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			counted.rows.Store(0)
			counted.reads.Store(0)
			var runErr error
			logReads := e.reads.during(func() {
				runErr = postGraphQL(srv.URL, tok, fmt.Sprintf(`{"query":%q}`, tt.query), nil)
			})
			charged := cost
			if runErr != nil {
				charged = 0
			}
			work := counted.rows.Load() + counted.reads.Load() + int64(len(logReads))
			t.Logf("cost %d, error %v: %d rows, %d reads of the views, %d of the log: work %d", cost, runErr,
				counted.rows.Load(), counted.reads.Load(), len(logReads), work)
			if work > int64(charged) {
				t.Errorf("the operation did %d points of work (rows, reads) and was charged %d", work, charged)
			}
			if admitted := runErr == nil; admitted != tt.admitted {
				t.Errorf("admitted: %v (error %v), want %v", admitted, runErr, tt.admitted)
			}
		})
	}
}

// TestEndpointQueuesReadTheViews: an Endpoint's queue (its policy and its
// counts) is served from the views, so a list of an account's Endpoints
// with their queues reads nothing from the log, however many Endpoints it
// holds and however often each was reconfigured. Before, each row read the
// Endpoint's whole stream from the log for its policy: a list of 40 QUEUE
// Endpoints made 40 stream reads.
func TestEndpointQueuesReadTheViews(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	tok := e.signUp(t, "Acme")
	auth := client.AddHeader("Authorization", "Bearer "+tok)
	const endpoints, changes = 40, 3
	var last string
	for i := range endpoints {
		var out struct{ CreateEndpoint struct{ ID string } }
		e.c.MustPost(`mutation($n: String!) { createEndpoint(input: {name: $n, mode: QUEUE}) { id } }`,
			&out, auth, client.Var("n", fmt.Sprint("ep", i)))
		last = out.CreateEndpoint.ID
		for j := range changes {
			e.c.MustPost(`mutation($id: ID!, $n: Int!) { updateEndpoint(id: $id, input: {queue: {maxInFlight: $n}}) { id } }`,
				&struct{ UpdateEndpoint struct{ ID string } }{}, auth, client.Var("id", last), client.Var("n", j+1))
		}
	}
	for _, tt := range []struct {
		name, query string
		rows        int
	}{
		{"every Endpoint's queue", `{ endpoints { id queue { policy { maxInFlight ratePerSecond ordering retryOn backoffBase backoffCap maxAttempts maxAge } queued inFlight dead } } }`, endpoints},
		{"one Endpoint's queue", `{ endpoint(id: "` + last + `") { queue { policy { maxInFlight } queued } } }`, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out struct{ Data json.RawMessage }
			var runErr error
			logReads := e.reads.during(func() {
				runErr = postGraphQL(srv.URL, tok, fmt.Sprintf(`{"query":%q}`, tt.query), &out)
			})
			body := out.Data
			if runErr != nil {
				t.Fatal(runErr)
			}
			t.Logf("%d rows: %d reads of the log", tt.rows, len(logReads))
			if got := strings.Count(string(body), `"maxInFlight":3`); got != tt.rows {
				t.Errorf("%d policies with the last change (maxInFlight 3), want %d: %s", got, tt.rows, body)
			}
			if len(logReads) != 0 {
				t.Errorf("%d reads of the log (%v), want none: the policy is a column of the Endpoint's row", len(logReads), logReads[:min(3, len(logReads))])
			}
		})
	}
}

// TestEndpointsListReadsWhatItIsPriced: on a relay without a cap on an
// account's Endpoints (--account-endpoints 0, as here), the endpoints list
// is priced at 1 000 rows (Limits.Endpoints' default) and must read no more
// than that, however many the account holds. Before, an account of 1 010
// Endpoints read all 1 010 rows a list, charged 1 001, and nine aliased
// lists (charged 9 009, within the budget) read 9 090. Now a list without
// first reads at most one row past its price and is refused
// INVALID_INPUT, saying to page; first and after page through them all.
func TestEndpointsListReadsWhatItIsPriced(t *testing.T) {
	var counted *listReads
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		counted = &listReads{Views: r.Views}
		r.Views = counted
	})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	tok := e.signUp(t, "Acme")
	auth := client.AddHeader("Authorization", "Bearer "+tok)
	const endpoints = graph.DefaultAccountEndpoints + 10
	ids := make([]string, endpoints)
	for i := range endpoints {
		var out struct{ CreateEndpoint struct{ ID string } }
		e.c.MustPost(`mutation($n: String!) { createEndpoint(input: {name: $n, mode: LOG}) { id } }`,
			&out, auth, client.Var("n", fmt.Sprint("ep", i)))
		ids[i] = out.CreateEndpoint.ID
	}
	aliases := func(n int, field string) string {
		var b strings.Builder
		b.WriteString("{ ")
		for i := range n {
			fmt.Fprintf(&b, "a%d: %s ", i, field)
		}
		return b.String() + "}"
	}
	for _, tt := range []struct {
		name, query string
		rows        int    // rows answered
		code        string // the refusal, "" for none
	}{
		{"a list without first", `{ endpoints { id } }`, 0, "INVALID_INPUT"},
		{"nine aliased lists without first", aliases(9, "endpoints { id }"), 0, "INVALID_INPUT"},
		{"a page of 1 000", `{ endpoints(first: 1000) { id } }`, 1000, ""},
		{"a larger first is held to 1 000", `{ endpoints(first: 5000) { id } }`, 1000, ""},
		{"the page after the 1 000th", `{ endpoints(first: 1000, after: "` + ids[999] + `") { id } }`, 10, ""},
		{"after an id not the account's", `{ endpoints(first: 10, after: "nosuchendpoint12") { id } }`, 0, "INVALID_INPUT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cost, err := graph.OperationCost(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			counted.rows.Store(0)
			var out struct{ Data json.RawMessage }
			runErr := postGraphQL(srv.URL, tok, fmt.Sprintf(`{"query":%q}`, tt.query), &out)
			rows := counted.rows.Load()
			answered := strings.Count(string(out.Data), `"id"`)
			t.Logf("cost %d: %d rows read, %d answered, error %v", cost, rows, answered, runErr)
			if rows > int64(cost) {
				t.Errorf("%d rows read, charged %d", rows, cost)
			}
			if answered != tt.rows {
				t.Errorf("%d rows answered, want %d", answered, tt.rows)
			}
			// postGraphQL gives the message; INVALID_INPUT's begins "invalid".
			if refused := runErr != nil && strings.Contains(runErr.Error(), "invalid "); refused != (tt.code != "") {
				t.Errorf("error %v, want %q", runErr, tt.code)
			}
		})
	}
}
