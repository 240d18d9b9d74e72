package consoletest

import (
	"net/http"
	"testing"
)

// A click the row does not take (the row moved or was re-rendered as the
// mouse came down) is clicked again by openRow, as a person would, instead
// of the test waiting for a detail that no click asked for. The page here
// swallows the first click on a row.
func TestOpenRowClicksAgainWhenAClickMisses(t *testing.T) {
	token := signUp(t, "Misses")
	var created struct {
		CreateEndpoint struct{ ID string } `json:"createEndpoint"`
	}
	srv.MustGraphQL(t, token, `mutation { createEndpoint(input: {name: "Missed", mode: LOG}) { id } }`, nil, &created)
	id := created.CreateEndpoint.ID

	p := newPage(t, 1280, 800)
	p.openEndpoint(token, id)
	send(t, id, http.MethodPost, "/missed-once", nil, []byte("x"))
	p.waitFor("the row", rowSelector("/missed-once"))
	eval[bool](p, `(() => {
		window.__swallowed = 0;
		document.addEventListener('click', (e) => {
			if (window.__swallowed === 0 && e.target.closest('tr.row')) {
				window.__swallowed++;
				e.stopPropagation();
				e.preventDefault();
			}
		}, true);
		return true; })()`)
	p.openRow("/missed-once")
	if n := eval[int](p, `window.__swallowed`); n != 1 {
		t.Errorf("%d clicks swallowed, want 1: the test did not miss a click", n)
	}
}
