package systemtest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestTailResumesAfterARelayRestart: `relay tail` outlives a relay that
// crashes and comes back; it resumes after the last delivery it printed, so
// the deliveries recorded while it was away are printed once each, and the
// ones it had printed are not printed again.
func TestTailResumesAfterARelayRestart(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "orders", "mode": "LOG"})

	tail := h.startIn(t, t.TempDir(), "tail", "orders")
	waitOutput(t, tail, regexp.MustCompile(`tailing `))
	if resp := send(t, r, ep.ID, "POST", "/before", nil, []byte("1")); resp.Status != 204 {
		t.Fatalf("sender got %d, want 204", resp.Status)
	}
	waitOutput(t, tail, regexp.MustCompile(`POST /before → 204`))

	r.Kill(t)
	waitOutput(t, tail, regexp.MustCompile(`disconnected: .*reconnecting in`))
	r.Restart(t)
	// Sent at once: tail is still waiting out its backoff.
	for _, p := range []string{"/while-away-1", "/while-away-2"} {
		if resp := send(t, r, ep.ID, "POST", p, nil, []byte("2")); resp.Status != 204 {
			t.Fatalf("sender got %d after the restart, want 204", resp.Status)
		}
	}
	waitOutput(t, tail, regexp.MustCompile(`(?s)POST /while-away-1 → 204.*POST /while-away-2 → 204`))
	out := tail.Output()
	for _, p := range []string{"/before", "/while-away-1", "/while-away-2"} {
		if n := strings.Count(out, "POST "+p+" → 204"); n != 1 {
			t.Errorf("tail printed %s %d times, want once:\n%s", p, n, out)
		}
	}
	if tail.Exited() {
		t.Fatalf("tail ended:\n%s", out)
	}
}
