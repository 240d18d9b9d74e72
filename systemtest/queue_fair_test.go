package systemtest

import (
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestQueueOfOneAccountDoesNotHoldAnothers: account "idle" has a QUEUE
// Endpoint (default policy) with no listener and 300 deliveries queued to
// it, which wait for one; account "other" has a QUEUE Endpoint with its
// listener connected to a local process answering 200. The other
// account's delivery, received after the 300, reaches its local process
// within seconds: the queue driver reads Endpoint by Endpoint, so one
// Endpoint's due deliveries never stand before another's.
func TestQueueOfOneAccountDoesNotHoldAnothers(t *testing.T) {
	r := harness.Start(t, "")
	idle := signUpTenant(t, r, "idle")
	other := signUpTenant(t, r, "other")
	idleEP := createEndpointFor(t, r, idle.Token, map[string]any{"name": "idle", "mode": "QUEUE"})
	otherEP := createEndpointFor(t, r, other.Token, map[string]any{"name": "other", "mode": "QUEUE"})
	local := newQueueTarget(t, always(200))
	startAgentFor(t, r, other.Token, otherEP.ID, "127.0.0.1:"+local.port)

	sendQueued(t, r, otherEP.ID, 1, "/before")
	harness.Eventually(t, 15*time.Second, "the other account's first delivery", func() bool { return local.delivered() == 1 })

	// Within the default --address-rate (50/s, burst 100).
	for i := 0; i < 300; i += 30 {
		sendQueued(t, r, idleEP.ID, 30, "/idle")
		time.Sleep(time.Second)
	}
	sendQueued(t, r, otherEP.ID, 1, "/after")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if local.delivered() == 2 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the other account's delivery, sent after 300 queued to an Endpoint with no listener, has not reached its connected local process in 20 s (delivered %d of 2)", local.delivered())
}
