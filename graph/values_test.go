package graph_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/relayhq/relay/graph"
)

// emptyObjectVariables is a request body whose variables are n empty
// objects: two bytes of JSON each, a map each once decoded generically.
func emptyObjectVariables(n int) string {
	return `{"query":"{ __typename }","variables":{"v":[` + strings.TrimSuffix(strings.Repeat("{},", n), ",") + `]}}`
}

// post sends body to h and reports the answer and the bytes allocated
// meanwhile.
func post(h http.Handler, body string) (*httptest.ResponseRecorder, uint64) {
	req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	return rec, after.TotalAlloc - before.TotalAlloc
}

// TestVariablesValuesBounded: a request whose variables hold more JSON
// values than graph.MaxValues is refused 413 REQUEST_TOO_LARGE before they
// are decoded (POST and GET); at the bound it runs.
func TestVariablesValuesBounded(t *testing.T) {
	e := newEnv(t)
	// The query string, the variables object and the array are 3 values,
	// the body's object a fourth.
	rec, _ := post(e.h, emptyObjectVariables(graph.MaxValues-4))
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "errors") {
		t.Fatalf("at the bound: %d %.200s", rec.Code, rec.Body)
	}
	rec, _ = post(e.h, emptyObjectVariables(graph.MaxValues-3))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"code":"REQUEST_TOO_LARGE"`) {
		t.Fatalf("one past the bound: %d %.200s", rec.Code, rec.Body)
	}

	// The largest body the API takes (1 MiB), all empty objects.
	body := emptyObjectVariables((graph.DefaultMaxBody - 64) / 3)
	rec, allocated := post(e.h, body)
	t.Logf("POST of %d bytes of empty objects: %d, %.1f MiB allocated", len(body), rec.Code, float64(allocated)/(1<<20))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"code":"REQUEST_TOO_LARGE"`) {
		t.Fatalf("1 MiB of empty objects: %d %.200s", rec.Code, rec.Body)
	}
	// Reading the body takes a few times its size (4.3 MiB measured, 8.5
	// under the race detector beside other tests' goroutines); a generic
	// decode of its variables took 51 MiB.
	if allocated > 16*uint64(len(body)) {
		t.Fatalf("refusing a %d-byte body allocated %d bytes", len(body), allocated)
	}

	// GET: the variables and extensions count together.
	get := func(variables, extensions string) *httptest.ResponseRecorder {
		q := url.Values{"query": {"{ __typename }"}, "variables": {variables}, "extensions": {extensions}}
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/graphql?"+q.Encode(), nil))
		return rec
	}
	half := `{"v":[` + strings.TrimSuffix(strings.Repeat("{},", graph.MaxValues/2), ",") + `]}`
	if rec := get(half, `{}`); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "errors") {
		t.Fatalf("GET within the bound: %d %.200s", rec.Code, rec.Body)
	}
	if rec := get(half, half); rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"code":"REQUEST_TOO_LARGE"`) {
		t.Fatalf("GET past the bound: %d %.200s", rec.Code, rec.Body)
	}
}
