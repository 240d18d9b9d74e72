package graph_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"

	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/readmodel"
)

// statsReads is the real views, counting the stats reads the API makes.
type statsReads struct {
	graph.Views
	n atomic.Int64
}

func (s *statsReads) Stats(ctx context.Context, address string, r readmodel.StatsRange, now time.Time, endpoint bool, since time.Time) (readmodel.Stats, error) {
	s.n.Add(1)
	return s.Views.Stats(ctx, address, r, now, endpoint, since)
}

// TestStatsReadsPerOperationAreBounded: a stats field reads its 60 buckets
// (up to a week of rollup rows, and an Endpoint's sessions of the range)
// whatever it selects, so its weight does not depend on the selection.
// Selecting only `range` used to cost 51 points: one anonymous operation
// of 80 aliases read 80 weeks, and `endpoints { stats }` read every
// Endpoint of an account (up to --account-endpoints, priced as 100).
func TestStatsReadsPerOperationAreBounded(t *testing.T) {
	var counted *statsReads
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		counted = &statsReads{Views: r.Views}
		r.Views = counted
	})
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	// A week's read takes 14 ms of a core (BenchmarkStatsWeek): an
	// operation holds at most 11, a dozen are refused.
	const maxReads = 11

	var in struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &in)
	var q strings.Builder
	q.WriteString(`query($id: ID!) { inspector(id: $id) { `)
	for i := range 80 {
		fmt.Fprintf(&q, "a%d: stats(range: WEEK) { range } ", i)
	}
	q.WriteString(`} }`)
	body := fmt.Sprintf(`{"query":%q,"variables":{"id":%q}}`, q.String(), in.CreateInspector.ID)
	err := postGraphQL(srv.URL, "", body, nil)
	t.Logf("aliases: %d reads, error %v", counted.n.Load(), err)
	if n := counted.n.Load(); n > maxReads {
		t.Errorf("80 aliases of an inspector's stats read %d weeks in one operation (error %v), want at most %d", n, err, maxReads)
	}

	var su struct{ SignUp struct{ Token string } }
	e.c.MustPost(`mutation { signUp(name: "ada") { token } }`, &su)
	auth := client.AddHeader("Authorization", "Bearer "+su.SignUp.Token)
	const endpoints = 120
	for i := range endpoints {
		e.c.MustPost(`mutation($n: String!) { createEndpoint(input: {name: $n, mode: LOG}) { id } }`,
			&struct{ CreateEndpoint struct{ ID string } }{}, auth, client.Var("n", fmt.Sprint("ep", i)))
	}
	counted.n.Store(0)
	err = postGraphQL(srv.URL, su.SignUp.Token, `{"query":"{ endpoints { stats(range: WEEK) { range } } }"}`, nil)
	if n := counted.n.Load(); n > maxReads {
		t.Errorf("stats of every Endpoint read %d weeks in one operation (error %v), want at most %d", n, err, maxReads)
	}

	// The console's read of one address still passes.
	const bucket = `start deliveries status2xx status3xx status4xx status5xx pending filtered refused answers p50Ms p95Ms offlineSeconds`
	counted.n.Store(0)
	var one struct {
		Data struct {
			Inspector struct {
				Stats struct{ Buckets []struct{ Start string } }
			}
		}
	}
	full := fmt.Sprintf(`{"query":%q,"variables":{"id":%q}}`,
		`query($id: ID!) { inspector(id: $id) { id stats(range: WEEK) { range bucketSeconds from to totals { `+bucket+` } buckets { `+bucket+` } } } }`,
		in.CreateInspector.ID)
	if err := postGraphQL(srv.URL, "", full, &one); err != nil || len(one.Data.Inspector.Stats.Buckets) != 60 || counted.n.Load() != 1 {
		t.Fatalf("the console's stats: %d buckets, %d reads, error %v", len(one.Data.Inspector.Stats.Buckets), counted.n.Load(), err)
	}
}
