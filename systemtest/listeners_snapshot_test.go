package systemtest

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestAgentStreamSnapshots: an Endpoint whose listeners came and went some
// 180 times holds snapshots of its sessions in its agent stream; that log
// verifies and rebuilds, and the relay restarted on it (nothing folded)
// decides the primary of the next listener from the newest snapshot.
func TestAgentStreamSnapshots(t *testing.T) {
	r := harness.Start(t, "")
	a := signUpTenant(t, r, "snapshots")
	ep := createEndpointFor(t, r, a.Token, map[string]any{"name": "snapshots", "mode": "PROXY", "target": "127.0.0.1:9"})
	listed := func(n int) {
		t.Helper()
		harness.Eventually(t, 15*time.Second, "the listeners listed", func() bool {
			return len(endpointListeners(t, r, a.Token, ep.ID)) == n
		})
	}
	// Waves within the sockets one address may hold.
	const waves, perWave = 6, 30
	for range waves {
		subs := make([]*harness.Subscription, perWave)
		for i := range subs {
			subs[i] = r.Subscribe(t, a.Token, forwardRequestsSubscription, map[string]any{"e": ep.ID})
		}
		listed(perWave)
		for _, s := range subs {
			s.Close()
		}
		listed(0)
	}
	r.Stop(t)

	type event struct {
		Stream, Type string
		Data         json.RawMessage
	}
	agentStream := func() []event {
		t.Helper()
		out, code := harness.RunCLI(t, "events", "export", "--data", r.Data)
		if code != 0 {
			t.Fatalf("export: exit %d\n%s", code, out)
		}
		var evs []event
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("export line %q: %v", sc.Text(), err)
			}
			if e.Stream == "agent-"+ep.ID {
				evs = append(evs, e)
			}
		}
		return evs
	}
	snapshots := 0
	evs := agentStream()
	for _, e := range evs {
		if e.Type == "listener.snapshot.v1" {
			snapshots++
		}
	}
	if snapshots == 0 {
		t.Fatalf("no snapshot among the agent stream's %d events", len(evs))
	}
	if out, code := harness.RunCLI(t, "events", "verify", "--data", r.Data); code != 0 || !strings.Contains(out, "ok: ") {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	if out, code := harness.RunCLI(t, "events", "rebuild", "--data", r.Data); code != 0 {
		t.Fatalf("rebuild: exit %d\n%s", code, out)
	}

	r.Restart(t)
	r.Subscribe(t, a.Token, forwardRequestsSubscription, map[string]any{"e": ep.ID})
	var agentID string
	harness.Eventually(t, 15*time.Second, "the new listener primary", func() bool {
		ls := endpointListeners(t, r, a.Token, ep.ID)
		if len(ls) == 1 && ls[0].Primary {
			agentID = ls[0].AgentID
		}
		return agentID != ""
	})
	var change struct {
		AgentID  string `json:"agent_id"`
		Previous string `json:"previous"`
		Reason   string `json:"reason"`
	}
	harness.Eventually(t, 15*time.Second, "the change recorded", func() bool {
		evs := agentStream()
		last := evs[len(evs)-1]
		if last.Type == "listener.snapshot.v1" {
			last = evs[len(evs)-2]
		}
		return last.Type == "listener.primary_changed.v1" && json.Unmarshal(last.Data, &change) == nil && change.AgentID == agentID
	})
	if change.Previous != "" || change.Reason != "first listener" {
		t.Errorf("the restarted relay recorded %+v, want %s first listener after none", change, agentID)
	}
	t.Logf("%d events in the agent stream, %d snapshots", len(evs), snapshots)
}
