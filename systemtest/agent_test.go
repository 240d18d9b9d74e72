package systemtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// echoPath answers 200 with the request target.
var echoPath = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	fmt.Fprint(w, "local "+r.RequestURI)
})

// forwardOK sends one request and reports whether the local handler answered it.
func (p *proxyRig) forwardOK(t *testing.T, path string) bool {
	t.Helper()
	resp := p.send(t, "POST", path, nil, []byte("{}"))
	return resp.Status == 200 && string(resp.Body) == "local "+path
}

// TestAgentKilledAndRestarted: a SIGKILLed agent is noticed within seconds
// (503, agentConnected false); a new agent restores forwarding without a
// server restart.
func TestAgentKilledAndRestarted(t *testing.T) {
	t.Parallel()
	p := startProxyRig(t, echoPath, false)
	pid := p.r.PID()
	if !p.forwardOK(t, "/before") {
		t.Fatalf("forwarding does not work with the agent connected")
	}

	p.agent.Kill()
	var last harness.Response
	harness.Eventually(t, 15*time.Second, "503 after the agent was killed", func() bool {
		last = p.send(t, "POST", "/after-kill", nil, nil)
		return last.Status == 503
	})
	if !strings.HasPrefix(string(last.Body), "No agent for client") {
		t.Errorf("503 body %q, want No agent for client", last.Body)
	}
	waitAgent(t, p.r, p.acct.Token, p.ep.ID, false)
	// The first 503 may be a forward the dying agent had already taken
	// (explained as such); once the relay has seen the session end, a
	// delivery finds no agent at all, and its 503 is recorded after the
	// session's end: its explanation names the end.
	if resp := p.send(t, "POST", "/while-away", nil, nil); resp.Status != 503 {
		t.Fatalf("a delivery after the session ended got %d, want 503", resp.Status)
	}
	d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/while-away")
	if *d.ResponseStatus != 503 {
		t.Errorf("recorded %d for a request answered 503", *d.ResponseStatus)
	}
	explained(t, p.r, p.acct.Token, d.ID, 503, []string{"Answered 503 by the relay", "no agent was connected to the Endpoint; its last agent session on node ",
		"(agent disconnected)"}, []string{"forwarding to " + p.target + " (the last to start before attempt 1).", "ended: agent disconnected."})

	startAgentFor(t, p.r, p.acct.Token, p.ep.ID, p.target)
	if !p.forwardOK(t, "/after-restart") {
		t.Fatalf("forwarding does not work with a new agent")
	}
	if p.r.PID() != pid || p.r.Exited() {
		t.Fatalf("the relay was restarted")
	}
}

// TestAgentReconnectsAfterServerRestart: the same agent process is told
// the relay went away, finds it again after a clean restart and
// forwarding resumes.
func TestAgentReconnectsAfterServerRestart(t *testing.T) {
	t.Parallel()
	p := startProxyRig(t, echoPath, false)
	if !p.forwardOK(t, "/before") {
		t.Fatalf("forwarding does not work with the agent connected")
	}
	port := p.r.Port
	p.r.Stop(t)
	p.r.RestartSamePort(t)
	if p.r.Port != port {
		t.Fatalf("relay moved from port %d to %d; the agent cannot follow", port, p.r.Port)
	}
	waitAgent(t, p.r, p.acct.Token, p.ep.ID, true)
	if !p.forwardOK(t, "/after") {
		t.Fatalf("forwarding did not resume after the restart:\nagent:\n%s", p.agent.Output())
	}
	// A clean stop tells the agent the relay went away (a close frame
	// 1001), not that its connection was lost.
	if out := p.agent.Output(); !strings.Contains(out, "the relay went away (1001 relay shutting down)") {
		t.Errorf("the agent was not told the relay is shutting down:\n%s", out)
	}
	if n := strings.Count(p.agent.Output(), "connected to "); n < 2 {
		t.Errorf("agent reports %d connections, want a reconnect by the same process:\n%s", n, p.agent.Output())
	}
	// On each connection the agent tells the address to give to senders.
	want := "public URL " + p.ep.URL + " → http://" + p.target
	harness.Eventually(t, 15*time.Second, "the public URL printed on both connections", func() bool {
		return strings.Count(p.agent.Output(), want) >= 2
	})
}

// TestAgentSeveralGetEveryDelivery: two agents on one Endpoint both get
// every delivery: the first connected (the primary) answers the senders,
// the other gets a copy of each.
func TestAgentSeveralGetEveryDelivery(t *testing.T) {
	t.Parallel()
	p := startProxyRig(t, echoPath, false)
	second := p.r.StartAgent(t, p.acct.Token, p.ep.ID, p.target)
	harness.Eventually(t, 15*time.Second, "two agent sessions", func() bool {
		n := 0
		for _, typ := range streamTypes(logEvents(t, p.r, p.acct.Token), "agent-"+p.ep.ID) {
			switch typ {
			case "agent.connected.v1":
				n++
			case "agent.disconnected.v1":
				n--
			}
		}
		return n == 2
	})

	const total = 20
	for i := 0; i < total; i++ {
		if path := fmt.Sprintf("/work/%02d", i); !p.forwardOK(t, path) {
			t.Fatalf("request %s was not forwarded", path)
		}
	}
	lines := func(a *harness.Agent) int { return strings.Count(a.Output(), " → 200") }
	harness.Eventually(t, 10*time.Second, "both agents to print every forward", func() bool {
		return lines(p.agent) >= total && lines(second) >= total
	})
	if first, other := lines(p.agent), lines(second); first != total || other != total {
		t.Fatalf("forwards per agent: %d and %d, want %d each\nfirst:\n%s\nsecond:\n%s",
			first, other, total, p.agent.Output(), second.Output())
	}
}
