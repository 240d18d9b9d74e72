package systemtest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestQueueAcrossNodes: three relay nodes on one NATS server (JetStream
// log and bus). The leader (node a, first by name) drives the queue of a
// QUEUE Endpoint whose listener is on node c; a is killed (SIGKILL) while
// it drains a backlog, and another node leads and finishes it: every
// delivery reaches the local process, and each it got twice was sent
// again marked a possible duplicate.
func TestQueueAcrossNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server and three relays")
	}
	nats := natstest.Start(t)
	flags := func(node string) []string {
		return []string{"--eventstore", nats.URL(), "--bus", nats.URL(), "--node-id", node, "--node-lease", clusterLease,
			"--forward-timeout", "5s", "--address-rate", "off"}
	}
	a := harness.Start(t, "", flags("a")...)
	b := harness.Start(t, "", flags("b")...)
	c := harness.Start(t, "", flags("c")...)

	var up struct{ SignUp struct{ Token string } }
	pos := gqlAfter(t, c, "", 0, `mutation{ signUp(name: "queues"){ token } }`, nil, &up)
	token := up.SignUp.Token
	var created struct{ CreateEndpoint endpointInfo }
	pos = gqlAfter(t, c, token, pos, `mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ `+endpointFields+` } }`,
		map[string]any{"in": map[string]any{"name": "orders", "mode": "QUEUE", "queue": map[string]any{"maxInFlight": 5, "ratePerSecond": 100}}}, &created)
	ep := created.CreateEndpoint
	var onB struct{ Endpoint *endpointInfo }
	gqlAfter(t, b, token, pos, `query($id: ID!){ endpoint(id: $id){ `+endpointFields+` } }`, map[string]any{"id": ep.ID}, &onB)
	if onB.Endpoint == nil {
		t.Fatal("B does not show the Endpoint created on C")
	}

	local := newQueueTarget(t, always(200))
	local.delay = 20 * time.Millisecond // so the kill finds attempts out
	const n = 300
	ids := sendQueued(t, c, ep.ID, n, "/order")
	c.StartAgent(t, token, ep.ID, local.port)
	harness.Eventually(t, 60*time.Second, "a part of the backlog delivered", func() bool { return local.delivered() >= n/5 })
	a.Kill(t)
	before := local.delivered()
	harness.Eventually(t, 120*time.Second, "the whole backlog delivered after the leader died", func() bool { return local.delivered() == n })
	if before >= n {
		t.Fatalf("the backlog was drained before the kill (%d): the test shows nothing", before)
	}
	// The attempts name the node that requested them: a (the leader)
	// drove the first delivery, b (the next by name) the last. B's views
	// follow the log by subscription: the local process may have answered
	// before they apply the outcome.
	drivenBy := func(id string) string {
		t.Helper()
		var m [][]string
		attempt := regexp.MustCompile(`Forward requested \(attempt \d+[^)]*\) on node (\w+)`)
		testwait.CheckFor(t, 30*time.Second, 25*time.Millisecond, func() error {
			var out struct{ Delivery struct{ Explanation string } }
			b.MustGraphQL(t, token, `query($id: ID!){ delivery(id: $id){ explanation } }`, map[string]any{"id": id}, &out)
			m = attempt.FindAllStringSubmatch(out.Delivery.Explanation, -1)
			if len(m) == 0 || !strings.Contains(out.Delivery.Explanation, "queue: delivered") {
				return fmt.Errorf("delivery %s not delivered in B's views:\n%s", id, out.Delivery.Explanation)
			}
			return nil
		})
		return m[len(m)-1][1]
	}
	if first, last := drivenBy(ids[0]), drivenBy(ids[n-1]); first != "a" || last != "b" {
		for name, r := range map[string]*harness.Relay{"a": a, "b": b, "c": c} {
			for _, line := range strings.Split(r.Output(), "\n") {
				if strings.Contains(line, "drives the queues") {
					t.Logf("%s: %s", name, line)
				}
			}
		}
		t.Fatalf("the first delivery was sent by node %s and the last by node %s, want a (the leader) then b (the next leader)", first, last)
	}
	counts := map[string]int{}
	for _, s := range local.all() {
		counts[s.ID]++
	}
	twice := 0
	for _, id := range ids {
		switch {
		case counts[id] == 0:
			t.Fatalf("delivery %s never reached the local process", id)
		case counts[id] > 1:
			twice++
			var q *queueEntry
			harness.Eventually(t, 15*time.Second, "the delivery's queue entry on B", func() bool {
				q = deliveryQueue(t, b, token, id)
				return q != nil && q.State == "delivered"
			})
			if q.PossibleDuplicates == 0 {
				t.Errorf("delivery %s reached the local process %d times but its queue says %+v: not marked a possible duplicate", id, counts[id], q)
			}
		}
	}
	t.Logf("%d delivered before node a was killed; %d requests for %d deliveries, %d sent again as possible duplicates", before, len(local.all()), n, twice)
}
