package consoletest

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The Endpoint settings form edits the filters in their text form: saved,
// they decide what is forwarded (a delivery they refuse gets the LOG
// answer, one they let through meets the missing agent); an invalid line
// is refused naming its fault and changes nothing; an empty box removes
// them.
func TestSettingsFormSetsTheFilters(t *testing.T) {
	token := signUp(t, "Filters")
	var created struct {
		CreateEndpoint struct{ ID string } `json:"createEndpoint"`
	}
	srv.MustGraphQL(t, token, `mutation { createEndpoint(input: {name: "Filtered", mode: PROXY, target: "127.0.0.1:9"}) { id } }`, nil, &created)
	id := created.CreateEndpoint.ID
	filtersNow := func() []string {
		t.Helper()
		var out struct {
			Endpoint struct{ Filters []struct{ Text string } }
		}
		srv.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ filters{ text } } }`, map[string]any{"id": id}, &out)
		texts := []string{}
		for _, f := range out.Endpoint.Filters {
			texts = append(texts, f.Text)
		}
		return texts
	}

	p := newPage(t, 1280, 900)
	p.open("/")
	p.waitFor("the sign-in form", `document.querySelector('input[name=token]')`) // once the relay said no session
	p.do(chromedpSetValue(`input[name=token]`, token))
	p.click(`form[aria-labelledby=signin-title] button[type=submit]`)
	p.waitFor("the Endpoints list", `document.querySelector('.endpoint-list a[href="/e/`+id+`"]')`)
	p.click(`.endpoint-list a[href="/e/` + id + `"]`)
	p.waitFor("the Endpoint page", `document.querySelector('#page-title')?.textContent === 'Filtered'`)
	p.click(`details.settings summary`)
	if got := eval[string](p, `document.querySelector('details.settings textarea[name=filters]').value`); got != "" {
		t.Errorf("the filters box of an Endpoint without filters shows %q", got)
	}

	p.do(chromedpSetValue(`details.settings textarea[name=filters]`, "method=POST\n\n  header:X-GitHub-Event=push,release  "))
	p.click(`details.settings button[type=submit]`)
	p.waitFor("the saved notice", `document.querySelector('details.settings .notice-success')`)
	want := []string{"method=POST", "header:X-GitHub-Event=push,release"}
	if got := filtersNow(); !slices.Equal(got, want) {
		t.Fatalf("the Endpoint's filters after saving: %q, want %q", got, want)
	}
	if got := p.text(`[data-testid=endpoint-filters]`); !strings.Contains(got, "method=POST") {
		t.Errorf("the filters line says %q", got)
	}

	// Refused by the filters: recorded and answered as LOG (204). Let
	// through: forwarded, and no agent is connected (503).
	if status, _ := send(t, id, http.MethodGet, "/hook", nil, nil); status != http.StatusNoContent {
		t.Errorf("a GET the filters refuse got %d, want the LOG answer 204", status)
	}
	if status, _ := send(t, id, http.MethodPost, "/hook", http.Header{"X-GitHub-Event": {"push"}}, []byte("{}")); status != http.StatusServiceUnavailable {
		t.Errorf("a POST the filters let through got %d, want 503 (no agent)", status)
	}

	// An invalid line is refused, naming the fault; nothing changes.
	p.do(chromedpSetValue(`details.settings textarea[name=filters]`, "method=POST\njson:a..b=1"))
	p.click(`details.settings button[type=submit]`)
	p.waitFor("the refusal", `document.querySelector('details.settings .notice-error')`)
	if got := p.text(`details.settings .notice-error`); !strings.Contains(got, "empty segment") {
		t.Errorf("the refusal says %q, want the fault named", got)
	}
	if got := filtersNow(); len(got) != 2 {
		t.Errorf("after a refused edit the filters are %q, want the two saved", got)
	}

	// An empty box removes them.
	p.do(chromedpSetValue(`details.settings textarea[name=filters]`, ""))
	p.click(`details.settings button[type=submit]`)
	p.waitFor("the saved notice", `document.querySelector('details.settings .notice-success')`)
	if got := filtersNow(); len(got) != 0 {
		t.Errorf("after clearing the box the filters are %q", got)
	}
	if status, _ := send(t, id, http.MethodGet, "/hook", nil, nil); status != http.StatusServiceUnavailable {
		t.Errorf("a GET with no filters got %d, want 503 (forwarded, no agent)", status)
	}
}
