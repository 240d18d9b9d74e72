package systemtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/systemtest/harness"
)

// BenchmarkProxyAcrossNodes compares a proxied request whose sender
// reaches node A while the agent is connected to node B (the command and
// its answer cross the NATS bus) with the same request on a single node:
// both keep their log in JetStream (each on its own embedded NATS server,
// one replica), same local handler, client, body and run. It reports the
// rate and latency of both and the p50 the crossing adds.
//
//	go test -run '^$' -bench ProxyAcrossNodes -benchtime 2000x -timeout 30m ./systemtest
func BenchmarkProxyAcrossNodes(b *testing.B) {
	local := benchServer(b, http.StatusOK, benchLocalAnswer)

	single := natstest.Start(b).URL()
	s := harness.Start(b, "", append(profArgs(), "--eventstore", single)...)
	sToken, sEndpoint := benchProxyEndpoint(b, s, local)
	sAgent := s.StartAgent(b, sToken, sEndpoint, local)
	benchWaitAgent(b, s, sToken, sEndpoint)
	one := benchTarget{
		name: "single", addr: "127.0.0.1:" + strconv.Itoa(s.Port), host: s.AddressHost(sEndpoint), want: http.StatusOK,
		procs: []benchProc{{"relay", s.PID()}, {"agent", sAgent.PID()}},
	}

	shared := natstest.Start(b).URL()
	flags := func(node string) []string {
		return append(profArgs(), "--eventstore", shared, "--bus", shared, "--node-id", node)
	}
	nodeA := harness.Start(b, "", flags("a")...)
	nodeB := harness.Start(b, "", flags("b")...)
	token, endpoint := benchProxyEndpoint(b, nodeA, local)
	benchWaitAgent(b, nodeB, token, "") // the account is known on B
	agent := nodeB.StartAgent(b, token, endpoint, local)
	benchWaitAgent(b, nodeA, token, endpoint) // A sees the session on B
	across := benchTarget{
		name: "across", addr: "127.0.0.1:" + strconv.Itoa(nodeA.Port), host: nodeA.AddressHost(endpoint), want: http.StatusOK,
		procs: []benchProc{{"relay-a", nodeA.PID()}, {"relay-b", nodeB.PID()}, {"agent", agent.PID()}},
	}
	benchCheckProxied(b, one)
	benchCheckProxied(b, across)

	benchCompare(b, one, across, "across/single", func(b *testing.B, base, got benchRun) {
		b.ReportMetric(ms(got.res.P50-base.res.P50), "p50-crossing-ms")
	})
}

// benchWaitAgent waits until r counts an agent on endpointID, or, with no
// endpointID, until r knows token.
func benchWaitAgent(b *testing.B, r *harness.Relay, token, endpointID string) {
	b.Helper()
	harness.Eventually(b, 30*time.Second, "the agent to connect", func() bool {
		if endpointID == "" {
			return len(r.GraphQL(b, token, `{ endpoints{ id } }`, nil).Errors) == 0
		}
		var out struct {
			Endpoint *struct{ AgentConnected bool }
		}
		res := r.GraphQL(b, token, `query($id: ID!){ endpoint(id: $id){ agentConnected } }`, map[string]any{"id": endpointID})
		return len(res.Errors) == 0 && benchJSONInto(res.Data, &out) && out.Endpoint != nil && out.Endpoint.AgentConnected
	})
}

func benchJSONInto(data []byte, v any) bool { return json.Unmarshal(data, v) == nil }
