package systemtest

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// benchLocalAnswer is what the local handler of the proxy benchmark answers.
var benchLocalAnswer = []byte(`{"received":true}`)

// BenchmarkProxy compares a PROXY Endpoint — sender → relay → real agent
// process → local handler and back — with the same local handler called
// directly: same client, same 1 KiB JSON body, same machine, same run. Each
// op is one request to each. It reports the rate and latency of both, the
// p50 the relay path adds, and the CPU the relay and the agent spend per
// 1000 requests. The agent speaks the relay's binary data path
// ("binary") or GraphQL messages as a third-party agent does ("graphql").
//
//	go test -run '^$' -bench 'Proxy$' -benchtime 5000x -timeout 30m ./systemtest
func BenchmarkProxy(b *testing.B) {
	for _, wire := range []struct {
		name string
		args []string
	}{{"binary", nil}, {"graphql", []string{"--plain-graphql"}}} {
		b.Run(wire.name, func(b *testing.B) { benchProxy(b, wire.args...) })
	}
}

func benchProxy(b *testing.B, agentArgs ...string) {
	local := benchServer(b, http.StatusOK, benchLocalAnswer)
	direct := benchTarget{name: "direct", addr: local, host: local, want: http.StatusOK}
	proxy := benchStartProxy(b, local, agentArgs...)
	benchCompare(b, direct, proxy, "proxy/direct", benchP50Overhead)
}

// benchStartProxy starts a relay with a PROXY Endpoint to local and the real
// agent for it, waits for the agent to connect and checks one request; it
// returns the target that sends the load through the relay. agentArgs go
// to the agent (--plain-graphql).
func benchStartProxy(b *testing.B, local string, agentArgs ...string) benchTarget {
	b.Helper()
	r := harness.Start(b, "", profArgs()...)
	keepLog(b, r)
	token, endpointID := benchProxyEndpoint(b, r, local)
	if p := os.Getenv("RELAY_BENCH_AGENT_CPUPROFILE"); p != "" {
		agentArgs = append(append([]string(nil), agentArgs...), "--cpuprofile", p)
	}
	if p := os.Getenv("RELAY_BENCH_AGENT_TRACE"); p != "" {
		agentArgs = append(append([]string(nil), agentArgs...), "--trace", p)
	}
	agent := r.StartAgentVia(b, "http://127.0.0.1:"+strconv.Itoa(r.Port), token, endpointID, local, agentArgs...)
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("agent output (last lines):\n%s", benchTail(agent.Output(), 20))
		}
	})
	harness.Eventually(b, 30*time.Second, "the agent to connect", func() bool {
		var out struct{ Endpoint struct{ AgentConnected bool } }
		r.MustGraphQL(b, token, `query($id: ID!){ endpoint(id: $id){ agentConnected } }`, map[string]any{"id": endpointID}, &out)
		return out.Endpoint.AgentConnected
	})
	proxy := benchTarget{
		name: "proxy", addr: "127.0.0.1:" + strconv.Itoa(r.Port), host: r.AddressHost(endpointID), want: http.StatusOK,
		procs: []benchProc{{"relay", r.PID()}, {"agent", agent.PID()}},
	}
	benchCheckProxied(b, proxy)
	return proxy
}

// benchP50Overhead reports the p50 the proxied path adds to the direct one.
func benchP50Overhead(b *testing.B, base, got benchRun) {
	b.ReportMetric(ms(got.res.P50-base.res.P50), "p50-overhead-ms")
}

// benchTail is the last n lines of s.
func benchTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// benchProxyEndpoint signs up and creates a PROXY Endpoint to target; it
// returns the account's token and the Endpoint's id.
func benchProxyEndpoint(b *testing.B, r *harness.Relay, target string) (token, id string) {
	b.Helper()
	var up struct{ SignUp struct{ Token string } }
	r.MustGraphQL(b, "", `mutation{ signUp(name: "bench"){ token } }`, nil, &up)
	var ep struct{ CreateEndpoint struct{ ID string } }
	r.MustGraphQL(b, up.SignUp.Token, `mutation($t: String!){ createEndpoint(input: {name: "bench", mode: PROXY, target: $t}){ id } }`,
		map[string]any{"t": target}, &ep)
	return up.SignUp.Token, ep.CreateEndpoint.ID
}

// benchCheckProxied sends one request through the relay and checks that the
// local handler's answer came back unchanged, so the benchmark measures a
// working path.
func benchCheckProxied(b *testing.B, proxy benchTarget) {
	b.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+proxy.addr+"/webhooks/check", bytes.NewReader(jsonBody))
	req.Host = proxy.host
	resp, err := harness.Client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, benchLocalAnswer) {
		b.Fatalf("proxied answer: %s %q, want 200 %q", resp.Status, body, benchLocalAnswer)
	}
}
