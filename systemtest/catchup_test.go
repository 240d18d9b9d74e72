package systemtest

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestCatchUpAfterOffline: deliveries refused while no agent was connected
// are found, offered when an agent connects, and retried all at once,
// oldest first; a second run sends nothing again; relay listen --catch-up
// does it by itself.
func TestCatchUpAfterOffline(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	seen, port := recordingTarget(t)
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "shop", "mode": "PROXY", "target": "localhost:" + port})
	sendAway := func(paths ...string) {
		t.Helper()
		for _, p := range paths {
			if resp := send(t, r, ep.ID, "POST", p, nil, []byte(`{}`)); resp.Status != 503 {
				t.Fatalf("sender got %d with no agent, want 503", resp.Status)
			}
		}
	}
	sendAway("/away-1", "/away-2", "/away-3")
	waitRefused(t, r, acct.Token, ep.ID, 3)

	// With no agent, a catch-up is refused at once, naming why.
	if out, code := h.run(t, "", "retry", "--all", "--refused-offline", "shop"); code != 2 || !strings.Contains(out, "catch-up stopped") {
		t.Fatalf("catch-up with no agent: exit %d\n%s", code, out)
	}
	listen := h.startIn(t, t.TempDir(), "listen", port, "shop")
	waitOutput(t, listen, regexp.MustCompile(`3 deliveries of shop were refused while no agent was connected: relay retry --all --refused-offline shop`))
	if n := len(seen.all()); n != 0 {
		t.Fatalf("the offer sent %d requests by itself", n)
	}

	out, code := h.run(t, "", "retry", "--all", "--refused-offline", "shop", "--concurrency", "1", "--rate", "50")
	if code != 0 || !strings.Contains(out, "catching up 3 deliveries") || !strings.Contains(out, "caught up: 3 answered 2xx, 0 not") {
		t.Fatalf("catch-up: exit %d\n%s", code, out)
	}
	var got []string
	for _, s := range seen.all() {
		got = append(got, s.RequestURI)
	}
	if strings.Join(got, " ") != "/away-1 /away-2 /away-3" {
		t.Fatalf("the local process got %v, want the three oldest first", got)
	}
	if out, code := h.run(t, "", "retry", "--all", "--refused-offline", "shop"); code != 0 || !strings.Contains(out, "nothing to catch up") {
		t.Fatalf("a second catch-up: exit %d\n%s", code, out)
	}
	if n := len(seen.all()); n != 3 {
		t.Fatalf("a second catch-up sent again: %d requests", n)
	}

	// relay listen --catch-up sends what was refused while it was away.
	listen.Stop(t)
	waitAgent(t, r, acct.Token, ep.ID, false)
	sendAway("/away-4", "/away-5")
	waitRefused(t, r, acct.Token, ep.ID, 2) // the views show what the sender was answered
	listen = h.startIn(t, t.TempDir(), "listen", port, "shop", "--catch-up")
	waitOutput(t, listen, regexp.MustCompile(`caught up: 2 answered 2xx, 0 not`))
	if n := len(seen.all()); n != 5 {
		t.Fatalf("after listen --catch-up the local process got %d requests, want 5", n)
	}

	for _, bad := range [][]string{
		{"retry", "--all", "shop"},
		{"retry", "--refused-offline", "shop"},
		{"retry", "--all", "--refused-offline", "shop", "--set-header", "X=1"},
		{"retry", "--all", "--refused-offline", "shop", "--concurrency", "0"},
		{"retry", "--all", "--refused-offline", "shop", "--rate", "0"},
	} {
		if out, code := h.run(t, "", bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", bad, code, out)
		}
	}
}

// waitRefused waits until the views list n deliveries of an Endpoint as
// refused while no agent was connected.
func waitRefused(t *testing.T, r *harness.Relay, token, endpointID string, n int) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, "the refused deliveries in the views", func() bool {
		var res struct {
			Endpoint struct {
				Deliveries struct{ Nodes []struct{ ID string } }
			}
		}
		r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ deliveries(filter: {refusedOffline: true}){ nodes{ id } } } }`, map[string]any{"id": endpointID}, &res)
		return len(res.Endpoint.Deliveries.Nodes) == n
	})
}
