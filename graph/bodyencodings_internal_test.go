package graph

import (
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/relayhq/relay/graph/generated"
)

// TestCountBodyFields: the body fields a page's rows select, as its answer
// has them: aliases each, fields of one alias once (GraphQL merges them),
// through fragments, under nodes or edges' node, and not an attempt's
// edit's body.
func TestCountBodyFields(t *testing.T) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}})
	for _, tc := range []struct {
		name         string
		rows         string
		text, base64 int
	}{
		{"none", `nodes { id method }`, 0, 0},
		{"one of each", `nodes { body bodyBase64 }`, 1, 1},
		{"a field twice is one", `nodes { body body }`, 1, 0},
		{"aliases", `nodes { a: body b: body c: bodyBase64 }`, 2, 1},
		{"nodes twice merge", `nodes { body } nodes { body bodyBase64 }`, 1, 1},
		{"aliased nodes", `x: nodes { body } y: nodes { body }`, 2, 0},
		{"edges", `edges { node { bodyBase64 } }`, 0, 1},
		{"inline fragment", `nodes { ... on Delivery { body } }`, 1, 0},
		{"named fragment", `nodes { ...F }`, 1, 1},
		{"skipped", `nodes { body @skip(if: true) bodyBase64 }`, 0, 1},
		{"an edit's body is not the row's", `nodes { attempts { edit { bodyBase64 } } }`, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := `query($id: ID!){ endpoint(id: $id){ deliveries(first: 5){ ` + tc.rows + ` } } }
fragment F on Delivery { body bodyBase64 }`
			if tc.name != "named fragment" {
				q = `query($id: ID!){ endpoint(id: $id){ deliveries(first: 5){ ` + tc.rows + ` } } }`
			}
			doc, errs := gqlparser.LoadQuery(es.Schema(), q)
			if errs != nil {
				t.Fatal(errs)
			}
			deliveries := doc.Operations[0].SelectionSet[0].(*ast.Field).SelectionSet[0].(*ast.Field)
			text, base64 := countBodyFields(&graphql.OperationContext{Doc: doc}, deliveries.SelectionSet)
			if text != tc.text || base64 != tc.base64 {
				t.Errorf("%s: %d body, %d bodyBase64; want %d, %d", tc.rows, text, base64, tc.text, tc.base64)
			}
		})
	}
}
