package systemtest

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestQueueAttemptsHoldBodiesWithinTheBudget: one account, 4 QUEUE
// Endpoints at maxInFlight 100 (the most a policy allows), 100 deliveries
// of 250 KiB queued to each while nobody listens; then a listener on each,
// to a local process that takes every request and answers none. The
// attempts out hold their requests within the account's quarter of
// --proxy-body-budget 64MiB (16 MiB: at most 65 of these), not 400 of
// them; the others wait, spending no attempt, and once the local process
// answers every delivery is delivered, each sent once.
func TestQueueAttemptsHoldBodiesWithinTheBudget(t *testing.T) {
	r := harness.Start(t, "", "--proxy-body-budget", "64MiB")
	acct := signUpTenant(t, r, "q")
	local := newQueueTarget(t, always(200))
	release := local.hold()
	defer release()
	const endpoints, per, size = 4, 100, 250 << 10
	var eps []string
	for i := range endpoints {
		ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "q" + string(rune('a'+i)), "mode": "QUEUE",
			"queue": map[string]any{"maxInFlight": 100, "ratePerSecond": 1000}})
		eps = append(eps, ep.ID)
	}
	body := make([]byte, size)
	_, _ = rand.Read(body)
	for _, ep := range eps {
		for range per {
			if resp := send(t, r, ep, "POST", "/big", nil, body); resp.Status != 202 {
				t.Fatalf("send: %d %s", resp.Status, resp.Body)
			}
		}
	}
	time.Sleep(2 * time.Second)
	before, err := harness.ProcRSSKiB(r.PID())
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		startAgentFor(t, r, acct.Token, ep, "127.0.0.1:"+local.port)
	}
	// Until the attempts out stop growing (at most 20 s).
	held, steady := 0, 0
	for deadline := time.Now().Add(20 * time.Second); steady < 10 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		if n := local.holding(); n == held && n > 0 {
			steady++
		} else {
			held, steady = n, 0
		}
	}
	now, err := harness.ProcRSSKiB(r.PID())
	if err != nil {
		t.Fatal(err)
	}
	grew := now - before
	t.Logf("the local process holds %d requests; the relay's RSS went from %d MiB to %d MiB (%+d MiB)", held, before>>10, now>>10, grew>>10)
	if held == 0 || held > (16<<20)/size {
		t.Fatalf("one account's queue has %d attempts of 250 KiB out at once, want some and at most %d (its quarter of --proxy-body-budget 64MiB)", held, (16<<20)/size)
	}
	if grew > 64<<10 {
		t.Fatalf("the relay's RSS grew %d MiB with %d attempts out, past --proxy-body-budget 64MiB", grew>>10, held)
	}
	release()
	harness.Eventually(t, 60*time.Second, "every delivery delivered", func() bool { return local.delivered() == endpoints*per })
	if n := len(local.all()); n != endpoints*per {
		t.Fatalf("the local process got %d requests for %d deliveries: an attempt that did not fit the budget was sent, or counted, anyway", n, endpoints*per)
	}
}
