package graph

import (
	"context"

	"github.com/vektah/gqlparser/v2"

	"github.com/relayhq/relay/graph/generated"
)

// SearchesWaiting is how many admitted log-reading searches wait for a
// global turn, for tests that hold the running ones.
func (r *Resolver) SearchesWaiting() int {
	g := &r.searches
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// OperationCost is what the relay charges query (its only operation)
// under the default limits.
func OperationCost(query string) (int, error) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}, Complexity: costs(Limits{})})
	doc, errs := gqlparser.LoadQuery(es.Schema(), query)
	if errs != nil {
		return 0, errs
	}
	return operationCost(context.Background(), es, doc.Operations[0], nil), nil
}
