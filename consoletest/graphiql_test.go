package consoletest

import (
	"strings"
	"testing"
)

// GraphiQL on the bare domain works offline: it renders from the embedded
// assets, loads the schema, and every resource it fetched is same-origin.
func TestGraphiQLOffline(t *testing.T) {
	p := newPage(t, 1280, 800)
	p.open("/graphql")
	p.waitFor("GraphiQL", `document.querySelector('.graphiql-container .graphiql-editors')`)
	// GraphiQL fetches the schema by introspection when it starts.
	p.waitFor("the introspection request", `performance.getEntriesByType('resource')
		.some(e => e.initiatorType === 'fetch' && e.name === location.origin + '/graphql')`)
	urls := eval[[]string](p, `performance.getEntriesByType('resource').map(e => e.name)`)
	if len(urls) == 0 {
		t.Fatal("no resources recorded")
	}
	for _, u := range urls {
		if !strings.HasPrefix(u, srv.BareURL()+"/") && !strings.HasPrefix(u, "ws://localhost") {
			t.Errorf("GraphiQL fetched %s from elsewhere", u)
		}
	}
}
