package graph

import (
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/relayhq/relay/graph/generated"
)

func TestSelectsPayload(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}}).Schema()
	tests := []struct {
		name, query string
		want        bool
	}{
		{"history rows", `query($id: ID!){ inspector(id: $id){ deliveries { edges { node { id method path responseStatus attempts { status } } } } } }`, false},
		{"body in a page", `query($id: ID!){ inspector(id: $id){ deliveries { edges { node { id bodyBase64 } } } } }`, true},
		{"headers in an inline fragment", `query($id: ID!){ inspector(id: $id){ deliveries { edges { node { ... on Delivery { headers { name } } } } } } }`, true},
		{"response body in a named fragment", `query($id: ID!){ delivery(id: $id){ ...D } } fragment D on Delivery { id responseBody }`, true},
		{"response body bytes", `query($id: ID!){ delivery(id: $id){ id httpVersion responseBodyBase64 } }`, true},
		{"why the response body is not stored", `query($id: ID!){ delivery(id: $id){ id responseNotCaptured } }`, true},
		{"http version alone", `query($id: ID!){ delivery(id: $id){ id httpVersion } }`, false},
		{"fragment without payload", `query($id: ID!){ delivery(id: $id){ ...D } } fragment D on Delivery { id method }`, false},
		{"live rows", `subscription($a: ID!){ deliveries(address: $a){ id path responseStatus } }`, false},
		{"live bodies", `subscription($a: ID!){ deliveries(address: $a){ id body } }`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, errs := gqlparser.LoadQuery(schema, tt.query)
			if errs != nil {
				t.Fatalf("query does not validate: %v", errs)
			}
			top := doc.Operations[0].SelectionSet[0].(*ast.Field)
			if got := selects(top.SelectionSet, payloadFields, map[*ast.FragmentDefinition]bool{}); got != tt.want {
				t.Errorf("selects payload = %v, want %v", got, tt.want)
			}
		})
	}
}
