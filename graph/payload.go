package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/relayhq/relay/readmodel"
)

// payloadFields are the Delivery fields that only the event log holds; the
// views keep everything else (see Views.DeliverySummary).
var payloadFields = map[string]bool{
	"headers": true, "droppedHeaders": true, "body": true, "bodyBase64": true, "responseHeaders": true, "responseBody": true,
	"responseBodyBase64": true, "responseNotCaptured": true, "trailers": true, "bodyUnread": true, "redactedQuery": true,
	// compare compares the recorded request, read from the log.
	"compare": true,
}

// responseFields are the Delivery fields of its latest local answer, which
// the log holds in an event of its own.
var responseFields = map[string]bool{
	"responseHeaders": true, "responseBody": true, "responseBodyBase64": true, "responseNotCaptured": true,
}

// requestFields are the Delivery fields of its recorded request (and
// compare, which compares it), which the log holds in its receipt: the
// payloadFields that are not responseFields.
var requestFields = func() map[string]bool {
	out := map[string]bool{}
	for f := range payloadFields {
		if !responseFields[f] {
			out[f] = true
		}
	}
	return out
}()

// payloadContext is ctx for reading the payloads the field being resolved
// selects: without the latest answer (readmodel.WithoutResponse) unless it
// selects one of responseFields, so that a query of the request alone, or
// of a comparison, does not read and decode an answer of up to 10 MiB; and
// without the request (readmodel.WithoutRequest) unless it selects one of
// requestFields, so that a query of the answer alone does not read a
// request of up to --max-body. Neither reserves of the answer's log budget
// what it does not read (projections' deliveryRefs.readSize). The fields
// are looked for at any depth: one of the same name deeper (an attempt's
// response's body) reads the request too, as before.
func payloadContext(ctx context.Context) context.Context {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Field.Field == nil {
		return ctx
	}
	switch {
	case !selects(fc.Field.Selections, responseFields, map[*ast.FragmentDefinition]bool{}):
		return readmodel.WithoutResponse(ctx)
	case !selects(fc.Field.Selections, requestFields, map[*ast.FragmentDefinition]bool{}):
		return readmodel.WithoutRequest(ctx)
	}
	return ctx
}

// withPayloadParts is ctx reading what request and response say of a
// delivery's payload (see payloadContext).
func withPayloadParts(ctx context.Context, request, response bool) context.Context {
	if !request {
		ctx = readmodel.WithoutRequest(ctx)
	}
	if !response {
		ctx = readmodel.WithoutResponse(ctx)
	}
	return ctx
}

// wantsPayload reports whether the field being resolved selects, at any
// depth, a Delivery field read from the log. History lists and live rows
// usually do not, and then skip one log read per delivery. A field whose
// selection cannot be inspected is assumed to want everything.
func wantsPayload(ctx context.Context) bool {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Field.Field == nil {
		return true
	}
	return selects(fc.Field.Selections, payloadFields, map[*ast.FragmentDefinition]bool{})
}

// selects reports whether a selection set names one of fields at any
// depth, through fragments too.
func selects(set ast.SelectionSet, fields map[string]bool, seen map[*ast.FragmentDefinition]bool) bool {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if fields[s.Name] || selects(s.SelectionSet, fields, seen) {
				return true
			}
		case *ast.InlineFragment:
			if selects(s.SelectionSet, fields, seen) {
				return true
			}
		case *ast.FragmentSpread:
			if s.Definition == nil {
				return true // not resolved: be safe
			}
			if seen[s.Definition] {
				continue
			}
			seen[s.Definition] = true
			if selects(s.Definition.SelectionSet, fields, seen) {
				return true
			}
		}
	}
	return false
}

// fieldSelections returns the selection sets of the fields named name in
// set, through fragments too (not below those fields): a field selected
// with no sub-selection gives an empty set.
func fieldSelections(set ast.SelectionSet, name string, seen map[*ast.FragmentDefinition]bool) []ast.SelectionSet {
	var out []ast.SelectionSet
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if s.Name == name {
				out = append(out, s.SelectionSet)
			}
		case *ast.InlineFragment:
			out = append(out, fieldSelections(s.SelectionSet, name, seen)...)
		case *ast.FragmentSpread:
			if s.Definition == nil {
				// Not resolved: be safe, as if it selected everything.
				out = append(out, ast.SelectionSet{&ast.Field{Name: "body"}})
				continue
			}
			if seen[s.Definition] {
				continue
			}
			seen[s.Definition] = true
			out = append(out, fieldSelections(s.Definition.SelectionSet, name, seen)...)
		}
	}
	return out
}

// bodyEncodings is the least the request bodies of a page, stored bytes
// of them, take once encoded by the fields the page selects of each
// delivery (a row's body and bodyBase64, aliases each): the bytes
// answersize counts for them as the fields resolve, so they can be
// reserved before the bodies are read.
func bodyEncodings(ctx context.Context, stored int64) int64 {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Field.Field == nil || !graphql.HasOperationContext(ctx) {
		return 0
	}
	text, base64 := countBodyFields(graphql.GetOperationContext(ctx), fc.Field.Selections)
	return int64(text)*stored + int64(base64)*((stored+2)/3*4)
}

// countBodyFields counts the body and bodyBase64 fields of the deliveries
// a connection's selection set lists (its nodes, or edges' node), as the
// answer has them: graphql.CollectFields merges the fields of one
// response key and expands fragments. Fields of the same names deeper (an
// attempt's edit) are not the page's request bodies.
func countBodyFields(op *graphql.OperationContext, set ast.SelectionSet) (text, base64 int) {
	rows := func(set ast.SelectionSet) {
		for _, f := range graphql.CollectFields(op, set, []string{"Delivery"}) {
			switch f.Name {
			case "body":
				text++
			case "bodyBase64":
				base64++
			}
		}
	}
	for _, f := range graphql.CollectFields(op, set, []string{"DeliveryConnection"}) {
		switch f.Name {
		case "nodes":
			rows(f.Selections)
		case "edges":
			for _, e := range graphql.CollectFields(op, f.Selections, []string{"DeliveryEdge"}) {
				if e.Name == "node" {
					rows(e.Selections)
				}
			}
		}
	}
	return text, base64
}
