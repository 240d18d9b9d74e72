package systemtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/systemtest/harness"
)

// clusterLease is the node lease in the cluster tests: short, so a killed
// node is found out within seconds.
const clusterLease = "3s"

// TestCluster runs three relay nodes on a 3-node NATS cluster (JetStream
// for the log, NATS core for the bus), each with its own data folder, and
// an agent that reaches them through a small failover proxy, as agents
// reach a cluster through a load balancer:
//   - a change made on A is read on C at once by naming its position;
//   - an agent on B serves a sender on A and a retry asked on C, and every
//     node says it is connected; a subscription on C sees A's deliveries;
//   - a restart of A leaves the sessions on B and C open (a second agent
//     connects to C directly);
//   - kill -9 of B under load: the forwards in flight end (503, relay node
//     lost) within a bound printed by the test, each attempt has exactly
//     one recorded outcome, which is what its sender got; the agent
//     reconnects to C and forwarding resumes; the reaper closes B's
//     session and fails the attempts of the senders B had;
//   - kill -9 of a NATS server process while deliveries flow (embedded
//     servers, one shut down, when nats-server is not installed): no
//     answered delivery is missing from the log;
//   - every node's history equals that of a node that joins with an empty
//     data folder and rebuilds its views from the log;
//   - an Endpoint deleted through C is refused on A, and nothing sent to
//     it there is recorded.
func TestCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS cluster and four relays")
	}
	seeds, killNATS := startNATSCluster(t)
	store := seeds + "?replicas=3"
	flags := func(node string) []string {
		return []string{"--eventstore", store, "--bus", seeds, "--node-id", node, "--node-lease", clusterLease,
			"--forward-timeout", "20s"}
	}
	a := harness.Start(t, "", flags("a")...)
	b := harness.Start(t, "", flags("b")...)
	c := harness.Start(t, "", flags("c")...)

	// Read-your-writes across nodes: what A answers carries its position,
	// and C, asked to read after it, shows it at once.
	var signUp struct{ SignUp struct{ Token string } }
	pos := gqlAfter(t, a, "", 0, `mutation{ signUp(name: "cluster"){ token } }`, nil, &signUp)
	token := signUp.SignUp.Token
	var created struct{ CreateEndpoint endpointInfo }
	pos = gqlAfter(t, a, token, pos, `mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ `+endpointFields+` } }`,
		map[string]any{"in": map[string]any{"name": "cluster", "mode": "PROXY", "target": "127.0.0.1:1", "responseCapture": true}}, &created)
	ep := created.CreateEndpoint
	var onC struct{ Endpoint *endpointInfo }
	gqlAfter(t, c, token, pos, `query($id: ID!){ endpoint(id: $id){ `+endpointFields+` } }`, map[string]any{"id": ep.ID}, &onC)
	if onC.Endpoint == nil || onC.Endpoint.ID != ep.ID {
		t.Fatalf("C does not show the Endpoint created on A at position %d: %+v", pos, onC.Endpoint)
	}
	// A socket on C authenticates with the token issued on A, naming the
	// position in connection_init, and watches the Endpoint's deliveries.
	live := c.SubscribeInit(t, token, map[string]any{"relayPosition": pos}, watchQuery, map[string]any{"a": ep.ID})

	var slow atomic.Bool // the local handler takes 100 ms while set, so forwards are in flight when B dies
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			select {
			case <-time.After(100 * time.Millisecond): // the local handler's work, not synchronisation
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, "ok "+r.URL.Path)
	}))
	lb := startFailover(t, b, c) // B first; C once B refuses connections
	agent := b.StartAgentVia(t, lb, token, ep.ID, target)
	for _, r := range []*harness.Relay{a, b, c} {
		waitAgent(t, r, token, ep.ID, true)
	}
	if nodes := openSessionNodes(t, store); !slices.Equal(nodes, []string{"b"}) {
		t.Fatalf("agent sessions recorded on nodes %v, want [b]", nodes)
	}

	// A sender on A is served by the agent on B.
	if resp := send(t, a, ep.ID, "POST", "/first", nil, []byte(`{"n":1}`)); resp.Status != 200 || string(resp.Body) != "ok /first" {
		t.Fatalf("sender on A: %d %q, want 200 from the agent on B", resp.Status, resp.Body)
	}
	seen := false
	for !seen {
		var m struct{ Deliveries struct{ Path string } }
		if err := json.Unmarshal(live.Next(t, 15*time.Second), &m); err != nil {
			t.Fatal(err)
		}
		seen = m.Deliveries.Path == "/first"
	}
	// A retry asked on C goes to the agent on B too.
	first := deliveryAt(t, c, token, ep.ID, "/first")
	var retried struct{ RetryDelivery proxied }
	c.MustGraphQL(t, token, retryMutation, map[string]any{"id": first.ID}, &retried)
	if got := attemptStatuses(retried.RetryDelivery); !slices.Equal(got, []int{200, 200}) {
		t.Fatalf("retry on C: attempts %v, want [200 200]", got)
	}

	// A restart of A closes only A's own sessions: those on B and C stay.
	c.StartAgent(t, token, ep.ID, target)
	harness.Eventually(t, 15*time.Second, "sessions on B and C", func() bool {
		return slices.Equal(openSessionNodes(t, store), []string{"b", "c"})
	})
	a.Stop(t)
	a.Restart(t)
	waitAgent(t, a, token, ep.ID, true)
	for _, e := range exportLogFrom(t, "--eventstore", store) {
		if e.Type == "agent.disconnected.v1" {
			t.Fatalf("restarting A closed a session of another node: %s", e.Data)
		}
	}
	if nodes := openSessionNodes(t, store); !slices.Equal(nodes, []string{"b", "c"}) {
		t.Fatalf("after A's restart the open sessions are on %v, want [b c]", nodes)
	}
	if resp := send(t, a, ep.ID, "POST", "/after-restart", nil, nil); resp.Status != 200 {
		t.Fatalf("after A's restart: %d %q", resp.Status, resp.Body)
	}

	// kill -9 of B in the middle of a bounded load on A.
	slow.Store(true)
	results := make([]clusterAnswer, 200)
	var answered atomic.Int64
	loaded := make(chan struct{})
	go func() { clusterLoad(a, ep.ID, "/load/", results, 8, &answered); close(loaded) }()
	// Senders on B too: they go with B, and so must their attempts.
	onB := make([]clusterAnswer, 60)
	loadedB := make(chan struct{})
	go func() { clusterLoad(b, ep.ID, "/on-b/", onB, 2, nil); close(loadedB) }()
	harness.Eventually(t, 30*time.Second, "40 load requests answered", func() bool { return answered.Load() >= 40 })
	killedAt := time.Now()
	b.Kill(t)
	<-loaded // bounded: 200 requests, each within the client's timeout
	<-loadedB
	slow.Store(false)
	var inFlight int
	var longest time.Duration
	statuses := map[int]int{}
	for _, r := range results {
		statuses[r.status]++
		if r.start.Before(killedAt) && r.end.After(killedAt) {
			inFlight++
			longest = max(longest, r.end.Sub(killedAt))
		}
	}
	t.Logf("kill -9 of B: %d requests in flight ended within %s of the kill (lease %s); statuses %v",
		inFlight, longest.Round(time.Millisecond), clusterLease, statuses)
	if inFlight == 0 {
		t.Error("no request was in flight when B was killed")
	}
	for i, r := range results {
		if r.err != nil || (r.status != 200 && r.status != 503) {
			t.Errorf("load request %d: status %d, %v", i, r.status, r.err)
		}
	}
	// The agent reconnects through the proxy to C and forwarding resumes
	// (C's own agent served part of the load all along).
	waitAgent(t, a, token, ep.ID, true)
	if resp := send(t, a, ep.ID, "POST", "/resumed", nil, nil); resp.Status != 200 || string(resp.Body) != "ok /resumed" {
		t.Fatalf("after B's death: %d %q\nagent:\n%s", resp.Status, resp.Body, agent.Output())
	}
	// The reaper closed the session B held; the agent's new one is on C.
	harness.Eventually(t, 15*time.Second, "the open sessions to be C's only", func() bool {
		return slices.Equal(openSessionNodes(t, store), []string{"c"})
	})
	// ... and failed the attempts whose senders were on B.
	harness.Eventually(t, 15*time.Second, "every attempt of a sender on B to have an outcome", func() bool {
		return len(unsettled(t, store, "/on-b/")) == 0
	})
	reaped := 0
	lost := map[string]string{} // the kind of each loss → a delivery it failed
	for _, e := range exportLogFrom(t, "--eventstore", store) {
		if e.Type == "forward.failed.v1" && strings.Contains(string(e.Data), "relay node lost before the local answer") {
			reaped++
		}
		var failed struct {
			DeliveryID string `json:"delivery_id"`
			Error      string `json:"error"`
		}
		if e.Type == "forward.failed.v1" && json.Unmarshal(e.Data, &failed) == nil && strings.HasPrefix(failed.Error, "relay node lost") {
			lost[failed.Error] = failed.DeliveryID
		}
	}
	t.Logf("attempts of senders on B failed by the reaper: %d", reaped)
	// The 503s B's loss decided are explained, whichever node answered:
	// the reaper's for senders on B, A's for forwards B held.
	for failure, id := range lost {
		harness.Eventually(t, 15*time.Second, "A's views to show the outcome of "+id, func() bool {
			d := deliveryByID(t, a, token, id)
			return d != nil && d.ResponseStatus != nil
		})
		if failure == "relay node lost before the local answer" {
			explained(t, a, token, id, 503, []string{"Recorded 503 by the relay", "relay node b, which the sender was connected to, was lost"}, nil)
		} else {
			explained(t, a, token, id, 503, []string{"Answered 503 by the relay", "relay node b, which held the agent's session, stopped answering"}, nil)
		}
	}
	if len(lost) == 0 {
		t.Log("no attempt failed for B's loss: nothing to explain")
	}

	// A NATS server is killed (SIGKILL) while deliveries flow on A: the
	// log (R3) and the bus go on with the other two.
	after := make([]clusterAnswer, 60)
	var afterAnswered atomic.Int64
	natsLoaded := make(chan struct{})
	go func() { clusterLoad(a, ep.ID, "/nats/", after, 4, &afterAnswered); close(natsLoaded) }()
	harness.Eventually(t, 30*time.Second, "10 requests answered before the NATS kill", func() bool { return afterAnswered.Load() >= 10 })
	natsKilledAt := time.Now()
	killNATS()
	<-natsLoaded // bounded: 60 requests, each within the client's timeout
	natsStatuses := map[int]int{}
	var natsInFlight int
	var natsStall, before time.Duration // the longest request across the kill; the longest one before it
	for _, r := range after {
		natsStatuses[r.status]++
		switch {
		case r.end.Before(natsKilledAt):
			before = max(before, r.end.Sub(r.start))
		case r.start.Before(natsKilledAt):
			natsInFlight++
			natsStall = max(natsStall, r.end.Sub(r.start))
		default:
			natsStall = max(natsStall, r.end.Sub(r.start))
		}
	}
	t.Logf("first NATS server gone (killed, or shut down when embedded): %d requests in flight; the longest request from the kill on took %s (longest before it %s); last answer %s after the kill; statuses %v",
		natsInFlight, natsStall.Round(time.Millisecond), before.Round(time.Millisecond),
		lastEnd(after).Sub(natsKilledAt).Round(time.Millisecond), natsStatuses)
	if natsStatuses[504] > 0 {
		for name, r := range map[string]*harness.Relay{"a": a, "c": c} {
			for _, line := range strings.Split(r.Output(), "\n") {
				if strings.Contains(line, "ERROR") || strings.Contains(line, "WARN") {
					t.Logf("relay %s logged: %s", name, line)
				}
			}
		}
	}
	if natsStatuses[200] == 0 || natsStatuses[200]+natsStatuses[503]+natsStatuses[504] != len(after) {
		t.Errorf("no request was forwarded with one NATS server gone: %v", natsStatuses)
	}

	// Every answered request is in the log with what its sender got: one
	// outcome for each attempt of the load under which B died; while a
	// NATS server goes, an outcome the store could not take is answered
	// 503 "store unavailable" by the relay, and that answer is recorded
	// instead when the store takes it; a reply that never came is 504.
	checkClusterLog(t, store, map[string][]clusterAnswer{"/load/": results, "/nats/": after}, "/load/")

	// Views converge: A's and C's histories equal that of a new node whose
	// views are rebuilt from the log.
	var d *harness.Relay
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for name, r := range map[string]*harness.Relay{"a": a, "c": c, "d": d} {
			if r == nil {
				continue
			}
			for _, line := range strings.Split(r.Output(), "\n") {
				if strings.Contains(line, "nats") || strings.Contains(line, "projections") || strings.Contains(line, "ERROR") || strings.Contains(line, "WARN") {
					t.Logf("relay %s logged: %s", name, line)
				}
			}
		}
	})
	rebuildStart := time.Now()
	d = harness.Start(t, "", flags("d")...)
	// D starts even when its views could not catch up in time (as after
	// the SIGKILL below): its history is taken once they hold the log.
	var end uint64
	for _, e := range exportLogFrom(t, "--eventstore", store) {
		end = max(end, e.Position)
	}
	harness.Eventually(t, 100*time.Second, "D's views to reach the log's end", func() bool { return viewsReach(t, d, token, end) })
	rebuiltHistory := clusterHistory(t, d, token, ep.ID)
	rebuilt := time.Since(rebuildStart)
	if n := strings.Count(rebuiltHistory, `"path":`); n < len(results)+len(after) {
		t.Fatalf("rebuilt history has %d deliveries, want at least %d", n, len(results)+len(after))
	}
	// The limit is long because of the SIGKILL: until the surviving
	// servers take the killed one for gone (they hear nothing for three
	// 30 s system heartbeats; an orderly shutdown announces itself), they
	// may place a relay's ordered consumer, which feeds its views, on it,
	// and the client finds that out only by missed heartbeats.
	for name, r := range map[string]*harness.Relay{"a": a, "c": c} {
		testwait.CheckFor(t, 100*time.Second, 25*time.Millisecond, func() error {
			got := clusterHistory(t, r, token, ep.ID)
			// D's views follow the log on: what lands after the end read
			// above reaches them too.
			want := clusterHistory(t, d, token, ep.ID)
			if want != rebuiltHistory {
				t.Logf("D's history changed after it reached the log's end %d: %s", end, firstDifference(want, rebuiltHistory))
				rebuiltHistory = want
			}
			if got != want {
				// Whether its views follow the log tells a stalled
				// subscription from views that went wrong.
				_, ready := getBare(t, r, "/readyz")
				return fmt.Errorf("history of %s differs from the rebuilt one (its /readyz: %s; its views reach the log's end %d: %v): %s",
					name, strings.TrimSpace(ready), end, viewsReach(t, r, token, end), firstDifference(got, want))
			}
			return nil
		})
	}
	t.Logf("views: D started and caught up with the log in %s; A's and C's equal its history %s after the NATS kill",
		rebuilt.Round(time.Millisecond), time.Since(natsKilledAt).Round(time.Millisecond))

	// An Endpoint deleted through C is refused on A too (two processes on
	// one data folder once kept recording for it).
	var deleted struct{ DeleteEndpoint bool }
	pos = gqlAfter(t, c, token, 0, `mutation($id: ID!){ deleteEndpoint(id: $id) }`, map[string]any{"id": ep.ID}, &deleted)
	var left struct{ Endpoints []struct{ ID string } }
	gqlAfter(t, a, token, pos, `{ endpoints{ id } }`, nil, &left) // A's views have the deletion
	if len(left.Endpoints) != 0 {
		t.Errorf("A lists %v after the deletion on C", left.Endpoints)
	}
	if resp := send(t, a, ep.ID, "POST", "/after-delete", nil, nil); resp.Status != http.StatusServiceUnavailable {
		t.Errorf("A answered %d %q for the Endpoint deleted on C, want 503", resp.Status, resp.Body)
	}
	for _, e := range exportLogFrom(t, "--eventstore", store) {
		if e.Type == "delivery.received.v1" && strings.Contains(string(e.Data), `"target":"/after-delete"`) {
			t.Errorf("a request to the deleted Endpoint was recorded: %s", e.Data)
		}
	}
}

// startNATSCluster runs the three NATS servers the cluster test's relays
// share and returns their seed URLs and a function that makes the first
// one go: nats-server processes killed with SIGKILL when Debian's package
// is installed (as CI has it), embedded servers shut down otherwise, so a
// developer without the package still runs the rest.
func startNATSCluster(t *testing.T) (seeds string, killFirst func()) {
	t.Helper()
	if _, err := os.Stat(natstest.ServerBinary); err == nil {
		nats := natstest.StartProcessCluster(t, 3)
		out, _ := exec.Command(natstest.ServerBinary, "--version").Output()
		t.Logf("NATS: 3 nats-server processes (%s, %s)", natstest.ServerBinary, strings.TrimSpace(string(out)))
		return nats.URL(), func() {
			t.Logf("kill -9 of nats-server pid %d", nats.PID(0))
			nats.Kill(0)
		}
	}
	nats := natstest.StartCluster(t, 3)
	t.Logf("NATS: %s not found; 3 nats-servers embedded in the test process, the first one shut down, not killed", natstest.ServerBinary)
	seeds = nats.URL() // taken once: a stopped server has no address any more
	return seeds, func() { nats.Servers[0].Shutdown() }
}

// viewsReach reports whether r serves a read naming position (its views
// have reached it).
func viewsReach(t *testing.T, r *harness.Relay, token string, position uint64) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.BareURL()+"/graphql", strings.NewReader(`{"query":"{ endpoints{ id } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Relay-Position", strconv.FormatUint(position, 10))
	resp, err := harness.Client.Do(r.Route(req))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var out harness.GQLResult
	return json.NewDecoder(resp.Body).Decode(&out) == nil && resp.StatusCode == http.StatusOK && len(out.Errors) == 0
}

// lastEnd is when the last of results was answered.
func lastEnd(results []clusterAnswer) time.Time {
	var last time.Time
	for _, r := range results {
		if r.end.After(last) {
			last = r.end
		}
	}
	return last
}

// gqlAfter posts a GraphQL operation to r, naming position (if not 0) in
// X-Relay-Position; it fails on any error, decodes data into v and returns
// the position the answer carries (it must carry one after a change).
func gqlAfter(t *testing.T, r *harness.Relay, token string, position uint64, query string, vars map[string]any, v any) uint64 {
	t.Helper()
	out, raw, got := gqlAt(t, r, token, position, query, vars)
	if len(out.Errors) > 0 || out.Data == nil {
		t.Fatalf("graphql on :%d answered %s", r.Port, raw)
	}
	if err := json.Unmarshal(out.Data, v); err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(strings.TrimSpace(query), "mutation") && got == 0 {
		t.Fatalf("the answer to a change carries no X-Relay-Position: %s", raw)
	}
	return got
}

// gqlAt runs query on r as of the log position (none when 0) and returns
// the result, errors included, its raw text and the position it names.
func gqlAt(t *testing.T, r *harness.Relay, token string, position uint64, query string, vars map[string]any) (harness.GQLResult, []byte, uint64) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, r.BareURL()+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if position > 0 {
		req.Header.Set("X-Relay-Position", strconv.FormatUint(position, 10))
	}
	resp, err := harness.Client.Do(r.Route(req))
	if err != nil {
		t.Fatalf("graphql: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out harness.GQLResult
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("graphql on :%d answered %s: %s", r.Port, resp.Status, raw)
	}
	got, _ := strconv.ParseUint(resp.Header.Get("X-Relay-Position"), 10, 64)
	return out, raw, got
}

// startFailover serves a reverse proxy on 127.0.0.1 that sends each
// request to the first of relays that accepts a connection: a load
// balancer in front of a cluster, in the least code.
func startFailover(t *testing.T, relays ...*harness.Relay) string {
	t.Helper()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: "127.0.0.1"})
			pr.Out.Host = pr.In.Host
		},
		Transport: failoverTransport{relays: relays, next: &http.Transport{DisableKeepAlives: true}},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}

type failoverTransport struct {
	relays []*harness.Relay
	next   http.RoundTripper
}

func (f failoverTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var err error
	for _, r := range f.relays {
		out := req.Clone(req.Context())
		out.URL.Host = "127.0.0.1:" + strconv.Itoa(r.Port)
		var resp *http.Response
		if resp, err = f.next.RoundTrip(out); !errors.Is(err, syscall.ECONNREFUSED) {
			return resp, err
		}
	}
	return nil, err
}

type clusterAnswer struct {
	status     int
	body       string
	start, end time.Time
	err        error
}

// clusterLoad sends len(results) requests to an address of r, path prefix+i,
// with concurrency workers, and counts the answered ones in answered.
func clusterLoad(r *harness.Relay, address, prefix string, results []clusterAnswer, concurrency int, answered *atomic.Int64) {
	client := harness.LoadClient(concurrency)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(results) {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, "http://"+r.AddressHost(address)+prefix+strconv.Itoa(i), strings.NewReader("{}"))
				res := clusterAnswer{start: time.Now()}
				resp, err := client.Do(r.Route(req))
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					res.status, res.body = resp.StatusCode, string(b)
				}
				res.end, res.err = time.Now(), err
				results[i] = res
				if answered != nil {
					answered.Add(1)
				}
			}
		})
	}
	wg.Wait()
}

// openSessionNodes lists the nodes holding the sessions the log shows open.
func openSessionNodes(t *testing.T, store string) []string {
	t.Helper()
	open := map[string]string{}
	for _, e := range exportLogFrom(t, "--eventstore", store) {
		var s struct {
			AgentID string `json:"agent_id"`
			Node    string
		}
		switch e.Type {
		case "agent.connected.v1":
			_ = json.Unmarshal(e.Data, &s)
			open[s.AgentID] = s.Node
		case "agent.disconnected.v1":
			_ = json.Unmarshal(e.Data, &s)
			delete(open, s.AgentID)
		}
	}
	var nodes []string
	for _, n := range open {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// checkClusterLog checks that every attempt in the log has at most one outcome
// and that each answered request (by path prefix+i) is in the log with
// what its sender got: its attempt's outcome, or, when no outcome could be
// recorded within the sender's bound (the store failed or stalled), the
// relay's own answer (delivery.answered), whatever outcome landed later.
// exactOutcomes names the prefixes whose attempts must all have an outcome.
func checkClusterLog(t *testing.T, store string, loads map[string][]clusterAnswer, exactOutcomes ...string) {
	t.Helper()
	type event struct {
		DeliveryID string `json:"delivery_id"`
		AttemptID  string `json:"attempt_id"`
		Target     string
		Status     int
		Error      string
		Copy       bool
		Forward    *struct { // the first attempt, requested at receipt
			AttemptID string `json:"attempt_id"`
		}
	}
	byPath := map[string]string{}   // path → delivery
	attempts := map[string]string{} // attempt → delivery
	outcomes := map[string][]event{}
	answers := map[string]int{} // delivery → the relay's own later answer
	copies := map[string]bool{} // attempt → it is a copy
	for _, e := range exportLogFrom(t, "--eventstore", store) {
		var ev event
		_ = json.Unmarshal(e.Data, &ev)
		switch e.Type {
		case "delivery.received.v1":
			byPath[ev.Target] = ev.DeliveryID
			if ev.Forward != nil {
				attempts[ev.Forward.AttemptID] = ev.DeliveryID
			}
		case "forward.requested.v1":
			attempts[ev.AttemptID] = ev.DeliveryID
			// Copies given to the other agent's session never answer
			// the sender.
			copies[ev.AttemptID] = ev.Copy
		case "forward.responded.v1", "forward.failed.v1":
			outcomes[ev.AttemptID] = append(outcomes[ev.AttemptID], ev)
		case "delivery.answered.v1":
			answers[ev.DeliveryID] = ev.Status
		}
	}
	outcomeOf := map[string]event{} // delivery → its attempt's outcome (one sender's attempt per load delivery)
	for attempt, delivery := range attempts {
		switch n := len(outcomes[attempt]); {
		case n > 1:
			t.Errorf("attempt %s of delivery %s has %d recorded outcomes, want 1: %+v", attempt, delivery, n, outcomes[attempt])
		case n == 1 && !copies[attempt]:
			outcomeOf[delivery] = outcomes[attempt][0]
		}
	}
	for prefix, results := range loads {
		lost, unrecorded, late := 0, 0, 0
		for i, r := range results {
			if r.err != nil || r.status == 0 {
				continue
			}
			path := prefix + strconv.Itoa(i)
			id, ok := byPath[path]
			if !ok {
				t.Errorf("%s was answered %d but is not in the log", path, r.status)
				continue
			}
			// A store that stayed away past the sender's bound (a NATS
			// server killed) may not take the outcome either: the relay
			// then answers 503 "store unavailable", never as if recorded.
			// An append that timed out may still have landed: the log can
			// then hold the outcome the relay could not confirm.
			storeAway := r.status == http.StatusServiceUnavailable && strings.Contains(r.body, "store unavailable")
			out, ok := outcomeOf[id]
			if !ok {
				unrecorded++
				if slices.Contains(exactOutcomes, prefix) || answers[id] != r.status && !storeAway {
					t.Errorf("%s: sender got %d %q; the log holds no outcome of its attempt and answered %d", path, r.status, r.body, answers[id])
				}
				continue
			}
			// An outcome recorded after the relay gave up on recording it
			// (the store stalled past the sender's bound) differs from
			// what the sender got; the relay's own answer is then in the
			// log too.
			if out.Status != r.status && (slices.Contains(exactOutcomes, prefix) || answers[id] != r.status && !storeAway) {
				t.Errorf("%s: sender got %d, the log holds %d (%s) and answered %d", path, r.status, out.Status, out.Error, answers[id])
			}
			if out.Status != r.status {
				late++
			}
			if strings.Contains(out.Error, "relay node lost") {
				lost++
			}
		}
		t.Logf("%s: %d answers checked against the log; %d settled as relay node lost, %d answered by the relay without an outcome, %d answered by the relay before a late outcome",
			prefix, len(results), lost, unrecorded, late)
	}
}

// unsettled lists the attempts of deliveries sent to a path starting with
// prefix that have no recorded outcome.
func unsettled(t *testing.T, store, prefix string) []string {
	t.Helper()
	var ev struct {
		DeliveryID string `json:"delivery_id"`
		AttemptID  string `json:"attempt_id"`
		Target     string
		Forward    *struct { // the first attempt, requested at receipt
			AttemptID string `json:"attempt_id"`
		}
	}
	mine := map[string]bool{} // deliveries sent to prefix
	open := map[string]bool{} // their attempts without an outcome
	for _, e := range exportLogFrom(t, "--eventstore", store) {
		ev.DeliveryID, ev.AttemptID, ev.Target, ev.Forward = "", "", "", nil
		_ = json.Unmarshal(e.Data, &ev)
		switch e.Type {
		case "delivery.received.v1":
			mine[ev.DeliveryID] = strings.HasPrefix(ev.Target, prefix)
			if ev.Forward != nil && mine[ev.DeliveryID] {
				open[ev.Forward.AttemptID] = true
			}
		case "forward.requested.v1":
			if mine[ev.DeliveryID] {
				open[ev.AttemptID] = true
			}
		case "forward.responded.v1", "forward.failed.v1":
			delete(open, ev.AttemptID)
		}
	}
	var out []string
	for id := range open {
		out = append(out, id)
	}
	return out
}

// clusterHistory is an Endpoint's history as one relay's views show it, in a
// form that compares across nodes.
func clusterHistory(t *testing.T, r *harness.Relay, token, endpointID string) string {
	t.Helper()
	var all []json.RawMessage
	var after any
	for {
		var out struct {
			Endpoint *struct {
				Deliveries struct {
					Nodes    []json.RawMessage
					PageInfo struct {
						HasNextPage bool
						EndCursor   *string
					}
				}
			}
		}
		r.MustGraphQL(t, token, `query($id: ID!, $after: String){ endpoint(id: $id){ deliveries(first: 50, after: $after){
			nodes{ id path responseStatus attempts{ id status error retry } } pageInfo{ hasNextPage endCursor } } } }`,
			map[string]any{"id": endpointID, "after": after}, &out)
		if out.Endpoint == nil {
			t.Fatalf("endpoint %s is null on :%d", endpointID, r.Port)
		}
		all = append(all, out.Endpoint.Deliveries.Nodes...)
		p := out.Endpoint.Deliveries.PageInfo
		if !p.HasNextPage || p.EndCursor == nil {
			b, _ := json.Marshal(all)
			return string(b)
		}
		after = *p.EndCursor
	}
}

// TestReadAfterPosition: a change's answer names its log position; a
// request naming a position the views have reached is served, one naming a
// position beyond them waits --views-wait and is refused UNAVAILABLE, and a
// WebSocket naming one in connection_init is refused (4403) the same way.
func TestReadAfterPosition(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--views-wait", "300ms")
	var up struct{ SignUp struct{ Token string } }
	pos := gqlAfter(t, r, "", 0, `mutation{ signUp(name: "ryw"){ token } }`, nil, &up)
	var me struct{ Endpoints []struct{ ID string } }
	gqlAfter(t, r, up.SignUp.Token, pos, `{ endpoints{ id } }`, nil, &me)

	beyond := strconv.FormatUint(pos+1_000_000, 10)
	for _, tc := range []struct {
		header string
		status int
		code   string
	}{
		{beyond, http.StatusServiceUnavailable, "UNAVAILABLE"},
		{"not-a-position", http.StatusBadRequest, "INVALID_INPUT"},
	} {
		req, _ := http.NewRequest(http.MethodPost, r.BareURL()+"/graphql", strings.NewReader(`{"query":"{ endpoints{ id } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+up.SignUp.Token)
		req.Header.Set("X-Relay-Position", tc.header)
		resp, err := harness.Client.Do(r.Route(req))
		if err != nil {
			t.Fatal(err)
		}
		var out harness.GQLResult
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != tc.status || len(out.Errors) == 0 || out.Errors[0].Code() != tc.code {
			t.Errorf("X-Relay-Position %s: %d %+v, want %d %s", tc.header, resp.StatusCode, out.Errors, tc.status, tc.code)
		}
	}

	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 10 * time.Second}
	conn, _, err := d.Dial("ws://127.0.0.1:"+strconv.Itoa(r.Port)+"/graphql", http.Header{"Host": {"localhost:" + strconv.Itoa(r.Port)}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{
		"Authorization": "Bearer " + up.SignUp.Token, "relayPosition": beyond}}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = conn.ReadMessage()
	var closed *websocket.CloseError
	if !errors.As(err, &closed) || closed.Code != 4403 {
		t.Fatalf("connection_init beyond the views: %v, want close 4403", err)
	}
}

// firstDifference shows where got and want part: up to 200 bytes of each
// from a little before the first byte they differ in.
func firstDifference(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-60)
	return fmt.Sprintf("at byte %d (of %d and %d):\n got …%s…\nwant …%s…", i, len(got), len(want),
		got[from:min(len(got), from+200)], want[from:min(len(want), from+200)])
}
