package graph

import (
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

func TestOnlyAgentAnswers(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want bool
	}{
		{`mutation{ completeForward(input: {}){ ok } }`, true},
		{`mutation{ a: completeForward(input: {}){ ok } b: completeForward(input: {}){ ok } __typename }`, true},
		{`mutation{ completeForward(input: {}){ ok } createInspector{ id } }`, false},
		{`mutation{ ... on Mutation { completeForward(input: {}){ ok } } }`, false},
		{`query{ completeForward }`, false},
		{`mutation{ createInspector{ id } }`, false},
	} {
		doc, err := parser.ParseQuery(&ast.Source{Input: tc.doc})
		if err != nil {
			t.Fatalf("parse %q: %v", tc.doc, err)
		}
		if got := onlyAgentAnswers(doc.Operations[0]); got != tc.want {
			t.Errorf("onlyAgentAnswers(%q) = %v, want %v", tc.doc, got, tc.want)
		}
	}
}
