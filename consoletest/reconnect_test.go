package consoletest

import (
	"fmt"
	"net/http"
	"testing"
)

// After the WebSocket drops, rows that arrived meanwhile are fetched on
// reconnect, across more than one page, with no gap and no duplicate.
func TestReconnectCatchesUp(t *testing.T) {
	id := newInspector(t)
	send(t, id, http.MethodPost, "/before/1", nil, nil)
	send(t, id, http.MethodPost, "/before/2", nil, nil)

	p := newPage(t, 1280, 800)
	p.open("/i/" + id)
	p.waitLive()
	p.waitFor("two rows", `document.querySelectorAll('tr.row').length === 2`)

	// Drop the socket and hold the reconnect until the test releases it, so
	// the missed rows can only come from the catch-up.
	eval[bool](p, `(async () => {
		const { subscriptions } = await import('/assets/graphql.js');
		window.heldConnect = subscriptions.connect;
		subscriptions.connect = function () {};
		subscriptions.ws.close();
		return true;
	})()`)
	p.waitFor("the offline state", `document.querySelector('.live').dataset.state === 'offline'`)

	const missed = 55 // more than one page of 50
	for i := range missed {
		send(t, id, http.MethodPost, fmt.Sprintf("/missed/%d", i), nil, nil)
	}
	if n := p.rowCount(); n != 2 {
		t.Fatalf("%d rows while offline, want 2: the socket was not down", n)
	}

	eval[bool](p, `(async () => {
		const { subscriptions } = await import('/assets/graphql.js');
		subscriptions.connect = window.heldConnect;
		subscriptions.connect();
		return true;
	})()`)
	p.waitLive()
	p.waitFor("every missed row", fmt.Sprintf(`document.querySelectorAll('tr.row').length === %d`, missed+2))

	paths := eval[[]string](p, `[...document.querySelectorAll('tr.row .path-wrap code')].map(c => c.textContent)`)
	if paths[0] != fmt.Sprintf("/missed/%d", missed-1) || paths[len(paths)-1] != "/before/1" {
		t.Errorf("rows not newest first: first %q, last %q", paths[0], paths[len(paths)-1])
	}
	seen := map[string]bool{}
	for _, path := range paths {
		if seen[path] {
			t.Errorf("row %s shown twice", path)
		}
		seen[path] = true
	}
}
