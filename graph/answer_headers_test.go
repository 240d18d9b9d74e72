package graph

import (
	"errors"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/internal/agentwire"
)

// TestCompleteForwardHeadersAreBounded: completeForward takes an answer's
// headers up to the bounds a C frame has, and refuses one header more, a
// header without a name, or names and values past the byte bound.
func TestCompleteForwardHeadersAreBounded(t *testing.T) {
	headers := func(n int, value string) []*model.HeaderInput {
		hs := make([]*model.HeaderInput, n)
		for i := range hs {
			hs[i] = &model.HeaderInput{Name: "a", Value: value}
		}
		return hs
	}
	status := 200
	in := func(hs []*model.HeaderInput) model.CompleteForwardInput {
		return model.CompleteForwardInput{AttemptID: "a", Status: &status, Headers: hs}
	}
	if out, err := toOutcome(in(headers(agentwire.MaxAnswerHeaders, ""))); err != nil || len(out.Headers) != agentwire.MaxAnswerHeaders {
		t.Fatalf("%d headers: %d, %v", agentwire.MaxAnswerHeaders, len(out.Headers), err)
	}
	value := string(make([]byte, 1<<10))
	for name, hs := range map[string][]*model.HeaderInput{
		"one header more":       headers(agentwire.MaxAnswerHeaders+1, ""),
		"a header without name": {{Name: "a"}, {Name: ""}},
		"past the bytes":        headers(agentwire.MaxAnswerHeaderBytes/(1+len(value))+1, value),
	} {
		var invalid *domain.InvalidInputError
		if _, err := toOutcome(in(hs)); !errors.As(err, &invalid) {
			t.Errorf("%s: %v, want INVALID_INPUT", name, err)
		}
	}
}
