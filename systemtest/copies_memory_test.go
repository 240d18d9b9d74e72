package systemtest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestCopiesToSilentListenersHoldABoundedBudget: one account's Endpoint
// has a primary agent that answers at once, and 16 more sessions (16
// sockets of one client address, which may hold 32) that subscribe and
// never read. Each request's body is within --proxy-body-budget (16 MiB
// here) until the primary answers; the copies to the silent sessions are
// within a budget of their own (the same size, a quarter per account, or
// one copy when the account holds none) until their frames are written:
// here one 8 MiB copy, whatever the number of silent sessions, the rest
// dropped. The same run without silent sessions grows the relay by about
// 95 MiB (bodies and frames made and collected); with them it may add the
// two budgets and what the collector lets grow beside them, not a frame
// per session.
func TestCopiesToSilentListenersHoldABoundedBudget(t *testing.T) {
	const (
		silent   = 16
		size     = 8 << 20
		requests = 12
	)
	r := harness.Start(t, t.TempDir(), "--proxy-body-budget", "16MiB", "--max-body", "8MiB", "--forward-timeout", "3s", "--capture-cap", "4KiB")
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer local.Close()
	ten := signUpTenant(t, r, "copies")
	target := strings.TrimPrefix(local.URL, "http://")
	ep := proxyEndpoint(t, r, ten.Token, target, false)
	startAgentFor(t, r, ten.Token, ep.ID, target) // the first session: the primary
	for range silent {
		a := dialBinary(t, r, ten.Token)
		a.json(map[string]any{"id": "f", "type": gqlws.Subscribe,
			"payload": map[string]any{"query": forwardRequestsSubscription, "variables": map[string]any{"e": ep.ID}}})
		// and never reads again
	}
	harness.Eventually(t, 10*time.Second, "17 listeners", func() bool {
		var out struct {
			Endpoint struct{ Listeners []struct{ AgentID string } }
		}
		r.MustGraphQL(t, ten.Token, `query($id: ID!){ endpoint(id: $id){ listeners{ agentId } } }`, map[string]any{"id": ep.ID}, &out)
		return len(out.Endpoint.Listeners) == silent+1
	})
	time.Sleep(300 * time.Millisecond)
	base := resetHWM(t, r.PID())
	body := bytes.Repeat([]byte("x"), size)
	statuses := map[int]int{}
	start := time.Now()
	for range requests {
		status, _, _ := rawPost(t, r, ep.ID, "", body)
		statuses[status]++
	}
	peak := procHWMKiB(t, r.PID())
	t.Logf("%d requests of %d MiB in %v, statuses %v: relay RSS %d MiB → peak %d MiB (+%d MiB), budget 16 MiB",
		requests, size>>20, time.Since(start).Round(time.Millisecond), statuses, base>>10, peak>>10, (peak-base)>>10)
	if grow := (peak - base) >> 10; grow > 192 {
		t.Errorf("peak RSS grew %d MiB with a 16 MiB body budget and one request in flight at a time", grow)
	}
}
