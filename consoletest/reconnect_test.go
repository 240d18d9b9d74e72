package consoletest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
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

// A graceful restart (SIGTERM, then `relay serve` again on the same port and
// data folder) ends the page's subscription with a complete and then closes
// the socket. The page shows it is not live while the relay is down, and
// subscribes again by itself, from its newest row: a delivery sent after the
// restart appears without a reload, and no row is shown twice.
func TestLiveHistoryResumesAfterGracefulRestart(t *testing.T) {
	r := harness.Start(t, "")
	id := newInspectorOn(t, r)
	sendTo(t, r, id, http.MethodPost, "/before-restart", nil, nil)

	p := newPage(t, 1280, 800)
	// While the relay is down the page's reconnects are refused, and the
	// browser logs each one.
	p.tolerate(`WebSocket connection to .* failed|ERR_CONNECTION_REFUSED`)
	p.openOn(r, "/i/"+id)
	p.waitLive()
	p.waitFor("the first row", rowSelector("/before-restart"))
	eval[bool](p, `import('/assets/graphql.js').then((m) => { window.gql = m; window.sameDocument = true; return true; })`)

	r.Stop(t)
	p.waitFor("the not-live state", `document.querySelector('.live').dataset.state === 'offline'`)
	// It stays so while reconnects are refused.
	p.waitFor("a refused reconnect", `window.gql.subscriptions.attempt >= 2`)
	if got := p.text(`.live`); !strings.HasPrefix(got, "Not live") {
		t.Errorf("live status while the relay is down = %q, want it to say Not live", got)
	}

	r.RestartSamePort(t)
	sendTo(t, r, id, http.MethodPost, "/after-restart", nil, nil)
	p.waitFor("the row sent after the restart", rowSelector("/after-restart"))
	p.waitLive()
	if !eval[bool](p, `window.sameDocument === true`) {
		t.Error("the page reloaded")
	}
	if n := p.rowCount(); n != 2 {
		t.Errorf("%d rows after the restart, want 2", n)
	}
}

// When the server ends the subscription (complete) while the socket stays
// open, the page subscribes again on that socket, under a new id: rows sent
// afterwards still appear.
func TestLiveHistoryResubscribesAfterComplete(t *testing.T) {
	id := newInspector(t)
	send(t, id, http.MethodPost, "/before-complete", nil, nil)

	p := newPage(t, 1280, 800)
	p.open("/i/" + id)
	p.waitLive()
	p.waitFor("the first row", rowSelector("/before-complete"))
	// Deliver a complete for the page's subscription as the server sends it.
	// The server keeps the old operation running, but its rows go to an id
	// the page no longer listens on.
	old := eval[string](p, `import('/assets/graphql.js').then((m) => {
		window.gql = m;
		const [id] = m.subscriptions.byId.keys();
		m.subscriptions.onMessage({ data: JSON.stringify({ id, type: 'complete' }) });
		return id;
	})`)
	p.waitFor("a new subscription", fmt.Sprintf(`window.gql.subscriptions.byId.size === 1 && !window.gql.subscriptions.byId.has(%q)`, old))
	p.waitLive()

	send(t, id, http.MethodPost, "/after-complete", nil, nil)
	p.waitFor("the row sent after the complete", rowSelector("/after-complete"))
	if n := p.rowCount(); n != 2 {
		t.Errorf("%d rows, want 2", n)
	}
}
