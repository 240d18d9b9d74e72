package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// GQLError is one GraphQL error.
type GQLError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// Code is extensions.code.
func (e GQLError) Code() string { s, _ := e.Extensions["code"].(string); return s }

// GQLResult is a GraphQL answer.
type GQLResult struct {
	Data   json.RawMessage `json:"data"`
	Errors []GQLError      `json:"errors"`
}

// GraphQL posts a query with an optional bearer token.
func (r *Relay) GraphQL(t testing.TB, token, query string, vars map[string]any) GQLResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, r.BareURL()+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := r.client().Do(r.Route(req))
	if err != nil {
		t.Fatalf("graphql: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out GQLResult
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("graphql answered %s: %s", resp.Status, raw)
	}
	return out
}

// MustGraphQL is GraphQL that fails the test on any error and decodes data into v.
func (r *Relay) MustGraphQL(t testing.TB, token, query string, vars map[string]any, v any) {
	t.Helper()
	res := r.GraphQL(t, token, query, vars)
	if len(res.Errors) > 0 {
		t.Fatalf("graphql errors: %+v\nquery: %s", res.Errors, query)
	}
	if v != nil {
		if err := json.Unmarshal(res.Data, v); err != nil {
			t.Fatalf("decode %s: %v", res.Data, err)
		}
	}
}

// ErrorCode runs a query expected to be refused and returns the code.
func (r *Relay) ErrorCode(t testing.TB, token, query string, vars map[string]any) string {
	t.Helper()
	res := r.GraphQL(t, token, query, vars)
	if len(res.Errors) == 0 {
		t.Fatalf("expected an error, got data %s", res.Data)
	}
	return res.Errors[0].Code()
}

// String formats an error list for messages.
func (res GQLResult) String() string { return fmt.Sprintf("data=%s errors=%+v", res.Data, res.Errors) }
