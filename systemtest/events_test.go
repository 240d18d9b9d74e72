package systemtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestEventsFlowOfProxiedDelivery: the log tells a proxied delivery's
// story in order, tied together by correlation and causation, and records
// agent sessions.
func TestEventsFlowOfProxiedDelivery(t *testing.T) {
	t.Parallel()
	p := startProxyRig(t, echoPath, false)
	if !p.forwardOK(t, "/story") {
		t.Fatalf("forward failed")
	}
	d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/story")
	stream := "delivery-" + d.ID

	var mine []logEvent
	for _, e := range logEvents(t, p.r, p.acct.Token) {
		if e.Stream == stream {
			mine = append(mine, e)
		}
	}
	var types []string
	for _, e := range mine {
		types = append(types, e.Type)
	}
	// The receipt carries its first attempt's request (older logs have a
	// forward.requested.v1 after it) and, when the agent answered within
	// the receipt's hold, the answer (else a forward.responded.v1 follows,
	// caused by the receipt).
	answer, inReceipt, ok := answerEvent(t, mine)
	want := []string{"delivery.received.v1"}
	if !inReceipt {
		want = append(want, "forward.responded.v1")
	}
	if !ok || !slices.Equal(types, want) {
		t.Fatalf("events of %s = %v, want %v", stream, types, want)
	}
	for _, e := range mine {
		if e.CorrelationID == nil || *e.CorrelationID != d.ID {
			t.Errorf("%s: correlationId %s, want the delivery id %s", e.Type, strp(e.CorrelationID), d.ID)
		}
	}
	if !inReceipt {
		if c := mine[1].CausationID; c == nil || *c != mine[0].ID {
			t.Errorf("forward.responded.v1 caused by %s, want the delivery.received.v1 event requesting it %s", strp(c), mine[0].ID)
		}
	}
	var responded struct {
		AttemptID string `json:"attempt_id"`
		Status    int    `json:"status"`
	}
	if err := json.Unmarshal(answer, &responded); err != nil || responded.Status != 200 || responded.AttemptID != d.Attempts[0].ID {
		t.Errorf("answer recorded as %s, want status 200 for attempt %s", answer, d.Attempts[0].ID)
	}
	// An echo process answers well within the hold: of this delivery and a
	// few more, at least one is recorded as one event (each may not be, on
	// a machine busy enough to hold a process back past the hold).
	for i := 0; !inReceipt && i < 5; i++ {
		path := fmt.Sprintf("/story-%d", i)
		if !p.forwardOK(t, path) {
			t.Fatalf("forward failed")
		}
		again := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, path)
		var its []logEvent
		for _, e := range logEvents(t, p.r, p.acct.Token) {
			if e.Stream == "delivery-"+again.ID {
				its = append(its, e)
			}
		}
		_, inReceipt, _ = answerEvent(t, its)
	}
	if !inReceipt {
		t.Error("no proxied delivery of six was recorded as one event with its answer")
	}

	// The agent's session: connected, made primary as the first listener,
	// disconnected once it stops, and then no primary left.
	p.agent.Stop(t)
	agentStream := "agent-" + p.ep.ID
	var sessions []logEvent
	harness.Eventually(t, 15*time.Second, "agent.disconnected.v1 on "+agentStream, func() bool {
		sessions = sessions[:0]
		for _, e := range logEvents(t, p.r, p.acct.Token) {
			if e.Stream == agentStream {
				sessions = append(sessions, e)
			}
		}
		return len(sessions) >= 4
	})
	wantTypes := []string{"agent.connected.v1", "listener.primary_changed.v1", "agent.disconnected.v1", "listener.primary_changed.v1"}
	got := make([]string, len(sessions))
	for i, e := range sessions {
		got[i] = e.Type
	}
	if !slices.Equal(got, wantTypes) {
		t.Fatalf("events of %s = %+v, want %v", agentStream, sessions, wantTypes)
	}
	agentOf := func(e logEvent) string {
		var v struct {
			AgentID    string `json:"agent_id"`
			Previous   string `json:"previous"`
			EndpointID string `json:"endpoint_id"`
		}
		_ = json.Unmarshal([]byte(e.Data), &v)
		if v.EndpointID != p.ep.ID {
			t.Errorf("%s names endpoint %q, want %s", e.Type, v.EndpointID, p.ep.ID)
		}
		if e.Type == "listener.primary_changed.v1" && v.AgentID == "" {
			return v.Previous // the primary that left
		}
		return v.AgentID
	}
	for _, e := range sessions[1:] {
		if a, b := agentOf(sessions[0]), agentOf(e); a == "" || a != b {
			t.Errorf("%s names agent %q, want the session's %q", e.Type, b, a)
		}
	}
}
