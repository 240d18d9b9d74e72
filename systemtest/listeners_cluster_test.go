package systemtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestListenersAcrossNodes: two relay nodes sharing a JetStream log and a
// NATS bus (a real nats-server), `relay listen` on each. The primary rule
// and the filters cover both nodes:
//   - with the session on B started --primary, a delivery sent to A is
//     answered with B's local answer, both local processes get it, and it
//     holds two attempts, PRIMARY (B's session) and COPY (A's);
//   - Endpoint.listeners is the same on both nodes: both sessions, their
//     nodes, B's primary;
//   - B's session leaves: A's takes over, says so, both nodes show it, and
//     the log holds that change once;
//   - a session on B whose filter refuses a delivery sent to A, with no
//     other session: the delivery is answered as the Endpoint's configured
//     answer (204) and explained as filtered with the reason; one it
//     matches is answered by it.
func TestListenersAcrossNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server and two relays")
	}
	nats := natstest.Start(t)
	flags := func(node string) []string {
		return []string{"--eventstore", nats.URL(), "--bus", nats.URL(), "--node-id", node, "--node-lease", clusterLease}
	}
	a := harness.Start(t, "", flags("a")...)
	b := harness.Start(t, "", flags("b")...)

	var up struct{ SignUp struct{ Token string } }
	pos := gqlAfter(t, a, "", 0, `mutation{ signUp(name: "listeners"){ token } }`, nil, &up)
	token := up.SignUp.Token
	logA, portA := answeringTarget(t, 200, "from-a")
	logB, portB := answeringTarget(t, 201, "from-b")
	var created struct{ CreateEndpoint endpointInfo }
	pos = gqlAfter(t, a, token, pos, `mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ `+endpointFields+` } }`,
		map[string]any{"in": map[string]any{"name": "shared", "mode": "PROXY", "target": "localhost:" + portA}}, &created)
	ep := created.CreateEndpoint
	var onB struct{ Endpoint *endpointInfo }
	gqlAfter(t, b, token, pos, `query($id: ID!){ endpoint(id: $id){ `+endpointFields+` } }`, map[string]any{"id": ep.ID}, &onB)
	if onB.Endpoint == nil {
		t.Fatal("B does not show the Endpoint created on A")
	}
	home := func(r *harness.Relay) cliHome {
		h := newCLIHome(t)
		if out, code := h.run(t, "", "login", "--server", "http://127.0.0.1:"+strconv.Itoa(r.Port), "--token", token); code != 0 {
			t.Fatalf("login exited %d:\n%s", code, out)
		}
		return h
	}
	homeA, homeB := home(a), home(b)
	// listenersOn reads Endpoint.listeners from a node as one comparable text.
	listenersOn := func(r *harness.Relay) string {
		t.Helper()
		var out struct {
			Endpoint struct {
				Listeners []struct {
					AgentID     string
					Primary     bool
					Node        string
					ConnectedAt string
					Filters     []struct{ Text string }
				}
			}
		}
		r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ listeners{ agentId primary node connectedAt filters{ text } } } }`,
			map[string]any{"id": ep.ID}, &out)
		var parts []string
		for _, l := range out.Endpoint.Listeners {
			role := "copy"
			if l.Primary {
				role = "primary"
			}
			var fs []string
			for _, f := range l.Filters {
				fs = append(fs, f.Text)
			}
			parts = append(parts, fmt.Sprintf("%s@%s:%s:%s[%s]", l.AgentID, l.Node, role, l.ConnectedAt, strings.Join(fs, " ")))
		}
		return strings.Join(parts, " ")
	}
	// sameOnBoth waits until both nodes list the listeners alike, matching want.
	sameOnBoth := func(what string, want *regexp.Regexp) string {
		t.Helper()
		var onA, onB string
		harness.Eventually(t, 15*time.Second, what+" on both nodes", func() bool {
			onA, onB = listenersOn(a), listenersOn(b)
			return onA == onB && want.MatchString(onA)
		})
		return onA
	}

	// A's session connects first; B's asks to be primary.
	la := homeA.startIn(t, t.TempDir(), "listen", portA, "shared")
	waitOutput(t, la, regexp.MustCompile(`(?m)^endpoint shared \(`+ep.ID+`\): primary`))
	lb := homeB.startIn(t, t.TempDir(), "listen", portB, "shared", "--primary")
	waitOutput(t, lb, regexp.MustCompile(`(?m)^endpoint shared \(`+ep.ID+`\): primary`))
	waitOutput(t, la, regexp.MustCompile(`(?m)^no longer primary on endpoint shared`))
	both := sameOnBoth("two listeners, B's primary", regexp.MustCompile(`^\S+@a:copy:\S+\[\] \S+@b:primary:\S+\[\]$`))
	t.Logf("listeners on both nodes: %s", both)

	// A delivery sent to A: B's answer reaches the sender, A's process
	// gets a copy.
	res := send(t, a, ep.ID, "POST", "/hook", [][2]string{{"Content-Type", "application/json"}}, []byte(`{"n":1}`))
	if res.Status != 201 || string(res.Body) != "from-b" {
		t.Fatalf("sender on A got %d %q, want the primary's (on B) 201 from-b", res.Status, res.Body)
	}
	id := waitOutput(t, lb, regexp.MustCompile(`POST /hook → 201 \(\d+ ms\)  delivery (\S+)`))[1]
	waitOutput(t, la, regexp.MustCompile(`POST /hook → 200 .*delivery `+id))
	if len(logA.all()) != 1 || len(logB.all()) != 1 || string(logA.last(t).Body) != `{"n":1}` || string(logB.last(t).Body) != `{"n":1}` {
		t.Errorf("local processes got %d and %d requests, want the delivery once each", len(logA.all()), len(logB.all()))
	}
	for _, r := range []*harness.Relay{a, b} {
		var d apiRoles
		harness.Eventually(t, 15*time.Second, "two attempts with their outcomes", func() bool {
			d = deliveryRoles(t, r, token, id)
			return len(d.Attempts) == 2 && d.Attempts[0].Status != nil && d.Attempts[1].Status != nil
		})
		if intp(d.ResponseStatus) != "201" || d.Attempts[0].Role != "PRIMARY" || intp(d.Attempts[0].Status) != "201" ||
			d.Attempts[1].Role != "COPY" || intp(d.Attempts[1].Status) != "200" || d.Attempts[0].AgentID == nil ||
			d.Attempts[1].AgentID == nil || !strings.Contains(both, *d.Attempts[0].AgentID+"@b:primary") ||
			!strings.Contains(both, *d.Attempts[1].AgentID+"@a:copy") {
			t.Errorf("delivery on node %d: %+v; want responseStatus 201, PRIMARY 201 by B's session, COPY 200 by A's", r.Port, d)
		}
	}

	// B's session leaves: A's takes over, on both nodes, recorded once.
	lbAgent := regexp.MustCompile(`(\S+)@b:primary`).FindStringSubmatch(both)[1]
	laAgent := regexp.MustCompile(`(\S+)@a:copy`).FindStringSubmatch(both)[1]
	lb.Stop(t)
	waitOutput(t, la, regexp.MustCompile(`(?m)^now primary on endpoint shared \(`+ep.ID+`\)`))
	sameOnBoth("A's listener alone, primary", regexp.MustCompile(`^`+regexp.QuoteMeta(laAgent)+`@a:primary:\S+\[\]$`))
	res = send(t, b, ep.ID, "POST", "/after", nil, []byte(`{"n":2}`))
	if res.Status != 200 || string(res.Body) != "from-a" {
		t.Errorf("after B's listener left, a sender on B got %d %q, want A's 200 from-a", res.Status, res.Body)
	}
	changes := primaryChanges(t, nats.URL(), ep.ID)
	want := []string{
		laAgent + "<:first listener",
		lbAgent + "<" + laAgent + ":asked to be primary",
		laAgent + "<" + lbAgent + ":primary left",
	}
	if strings.Join(changes, " ") != strings.Join(want, " ") {
		t.Errorf("PrimaryChanged in the log %q, want each change once: %q", changes, want)
	}

	// A session on B with a filter, alone once A's leaves.
	lf := homeB.startIn(t, t.TempDir(), "listen", portB, "shared", "--filter", "method=PUT")
	waitOutput(t, lf, regexp.MustCompile(`(?m)^endpoint shared \(`+ep.ID+`\): receives copies`))
	la.Stop(t)
	waitOutput(t, lf, regexp.MustCompile(`(?m)^now primary on endpoint shared`))
	sameOnBoth("B's filtered listener alone", regexp.MustCompile(`^\S+@b:primary:\S+\[method=PUT\]$`))
	before := len(logB.all())
	seen := map[string]bool{id: true}
	newestDelivery(t, a, token, ep.ID, seen) // /after, once A's views show it
	res = send(t, a, ep.ID, "POST", "/refused", nil, []byte(`{"n":3}`))
	if res.Status != 204 {
		t.Errorf("a delivery on A that B's only listener refuses: %d %q, want 204 as the Endpoint's configured answer", res.Status, res.Body)
	}
	refused := newestDelivery(t, a, token, ep.ID, seen)
	x := explainOf(t, a, token, refused)
	if intp(x.ResponseStatus) != "204" || !strings.Contains(x.Why.Summary, "filtered, not forwarded: no listener matched: method=POST not in [PUT]") {
		t.Errorf("explanation of the refused delivery: %+v", x)
	}
	res = send(t, a, ep.ID, "PUT", "/taken", nil, []byte(`{"n":4}`))
	if res.Status != 201 || string(res.Body) != "from-b" {
		t.Errorf("a delivery on A that B's listener takes: %d %q, want 201 from-b", res.Status, res.Body)
	}
	if got := logB.all(); len(got) != before+1 || got[len(got)-1].Method != "PUT" {
		t.Errorf("B's process got %d more requests, want only the PUT", len(got)-before)
	}
}

// primaryChanges lists the Endpoint's PrimaryChanged events in the log as
// "agent<previous:reason".
func primaryChanges(t *testing.T, store, endpointID string) []string {
	t.Helper()
	var out []string
	for _, e := range exportLogFrom(t, "--eventstore", store) {
		if e.Type != "listener.primary_changed.v1" || e.Stream != "agent-"+endpointID {
			continue
		}
		var c struct {
			AgentID  string `json:"agent_id"`
			Previous string `json:"previous"`
			Reason   string `json:"reason"`
		}
		if err := json.Unmarshal(e.Data, &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c.AgentID+"<"+c.Previous+":"+c.Reason)
	}
	return out
}
