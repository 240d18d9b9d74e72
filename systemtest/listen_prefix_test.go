package systemtest

import (
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestListenPrefixRefusesDotSegments: `relay listen
// http://localhost:PORT/api` forwards /hook to /api/hook, but a delivery
// whose path has a dot-segment (/../admin, /%2E%2e/admin, /./x) never
// reaches the local server: it would leave /api. The sender is answered
// 400 saying why, and the delivery's attempt records it. A dot in the
// query is no segment and goes through.
func TestListenPrefixRefusesDotSegments(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	seen, port := recordingTarget(t)
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "dots", "mode": "PROXY", "target": "localhost:" + port})
	listen := h.startIn(t, t.TempDir(), "listen", "http://localhost:"+port+"/api", "dots")
	if got := waitOutput(t, listen, publicURLLine)[1]; got != ep.ID {
		t.Fatalf("listen served %s, want %s", got, ep.ID)
	}
	waitAgent(t, r, acct.Token, ep.ID, true)

	for _, path := range []string{"/../admin", "/%2E%2e/admin", "/./admin", "/x/..%2f..%2fadmin"} {
		resp := send(t, r, ep.ID, "POST", path, nil, []byte("x"))
		if resp.Status != 400 || !strings.Contains(string(resp.Body), "no path with a . or .. segment") {
			t.Errorf("%s: sender got %d %q, want 400 naming the dot-segment rule", path, resp.Status, resp.Body)
		}
		d := deliveryAt(t, r, acct.Token, ep.ID, path)
		if len(d.Attempts) != 1 || d.Attempts[0].Error == nil || !strings.Contains(*d.Attempts[0].Error, "dot-segment") || *d.ResponseStatus != 400 {
			t.Errorf("%s recorded as %+v, want one attempt answered 400 with the refusal", path, d)
		}
	}
	if n := len(seen.all()); n != 0 {
		t.Fatalf("the local server got %d requests with dot-segments: %+v", n, seen.all())
	}
	for path, want := range map[string]string{"/hook": "/api/hook", "/hook?next=/../admin": "/api/hook?next=/../admin"} {
		if resp := send(t, r, ep.ID, "POST", path, nil, []byte("x")); resp.Status != 200 {
			t.Fatalf("%s: sender got %d %q", path, resp.Status, resp.Body)
		}
		if got := seen.last(t); got.RequestURI != want {
			t.Errorf("local server got %q, want %q", got.RequestURI, want)
		}
	}
}
