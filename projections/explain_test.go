package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// TestRelayAnswerAndAttemptAgents: the facts an explanation reads are in
// the views, whether the events of a delivery arrive in one batch or one
// batch each: why and when the relay answered itself, which agent session
// served each attempt, which node waited for it and when its outcome came.
func TestRelayAnswerAndAttemptAgents(t *testing.T) {
	const ep = "ep-1"
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	requested := func(att string, retry bool) domain.Event {
		return domain.ForwardRequested{AttemptID: att, EndpointID: ep, Retry: retry, Node: "node-a"}
	}
	tests := []struct {
		name     string
		receipt  *domain.ReceiptAnswer
		events   []domain.Event // after the DeliveryReceived, at 1 s, 2 s, …
		answer   *readmodel.RelayAnswer
		attempts []readmodel.Attempt // ID, AgentID, Node, OutcomeAt, Late
	}{
		{name: "answered at receipt", receipt: &domain.ReceiptAnswer{Status: 413, Reason: domain.ReasonBodyTooLarge + "1024 bytes"},
			answer: &readmodel.RelayAnswer{Status: 413, Reason: domain.ReasonBodyTooLarge + "1024 bytes", At: at(0)}},
		{name: "inspector's plain 204", receipt: &domain.ReceiptAnswer{Status: 204},
			answer: &readmodel.RelayAnswer{Status: 204, At: at(0)}},
		{name: "local answer through an agent", events: []domain.Event{
			requested("a1", false),
			domain.ForwardResponded{AttemptID: "a1", AgentID: "ag-1", Status: 200, DurationMs: 3},
		}, attempts: []readmodel.Attempt{{ID: "a1", AgentID: "ag-1", Node: "node-a", OutcomeAt: at(2)}}},
		{name: "no agent, then a retry", events: []domain.Event{
			requested("a1", false),
			domain.ForwardFailed{AttemptID: "a1", Status: 503, Error: domain.FailureNoAgent},
			domain.RetryRequested{AttemptID: "a2", AccountID: "acct-1"},
			requested("a2", true),
			domain.ForwardFailed{AttemptID: "a2", AgentID: "ag-2", Status: 502, Error: "nothing listening on 127.0.0.1:9"},
		}, attempts: []readmodel.Attempt{
			{ID: "a1", Node: "node-a", OutcomeAt: at(2)},
			{ID: "a2", AgentID: "ag-2", Node: "node-a", OutcomeAt: at(5)},
		}},
		{name: "the relay's 504, then the late local answer", events: []domain.Event{
			requested("a1", false),
			domain.DeliveryAnswered{Status: 504, Reason: domain.ReasonNoOutcome + "timeout"},
			domain.ForwardResponded{AttemptID: "a1", AgentID: "ag-1", Status: 200},
		},
			answer:   &readmodel.RelayAnswer{Status: 504, Reason: domain.ReasonNoOutcome + "timeout", At: at(2)},
			attempts: []readmodel.Attempt{{ID: "a1", AgentID: "ag-1", Node: "node-a", OutcomeAt: at(3), Late: true}}},
	}
	e := newEnv(t, Options{})
	for i, tc := range tests {
		for _, batched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, batched %v", tc.name, batched), func(t *testing.T) {
				e := e.with(t)
				id := fmt.Sprintf("d-%d-%v", i, batched)
				var d *domain.Delivery
				var err error
				if tc.receipt != nil {
					d, err = domain.ReceiveAndAnswer(id, ep, domain.AddressEndpoint, "acct-1", request("/x", "{}"), tc.receipt.Status, tc.receipt.Reason)
				} else {
					d, err = domain.ReceiveDelivery(id, ep, domain.AddressEndpoint, "acct-1", request("/x", "{}"))
				}
				if err != nil {
					t.Fatal(err)
				}
				events := make([]domain.Event, len(tc.events))
				for k, ev := range tc.events {
					events[k] = withDelivery(ev, id)
				}
				stream := domain.DeliveryStream(id)
				if batched {
					// One append: the views apply the delivery in one batch
					// (the deferred update), all at one time.
					e.do(e.save(e.ctx, stream, d.Expected(), at(0), append(d.Changes(), events...)...))
				} else {
					e.do(e.save(e.ctx, stream, d.Expected(), at(0), d.Changes()...))
					for k, ev := range events {
						e.do(e.save(e.ctx, stream, domain.Any(), at(k+1), ev))
					}
				}
				got := e.delivery(id)
				want := tc.answer
				if batched && want != nil {
					w := *want
					w.At = at(0)
					want = &w
				}
				if fmt.Sprintf("%+v", deref(got.RelayAnswer)) != fmt.Sprintf("%+v", deref(want)) || (got.RelayAnswer == nil) != (want == nil) {
					t.Errorf("RelayAnswer = %+v, want %+v", deref(got.RelayAnswer), deref(want))
				}
				if len(got.Attempts) != len(tc.attempts) {
					t.Fatalf("attempts %+v, want %d", got.Attempts, len(tc.attempts))
				}
				for k, a := range got.Attempts {
					w := tc.attempts[k]
					if batched {
						w.OutcomeAt = at(0)
					}
					if a.ID != w.ID || a.AgentID != w.AgentID || a.Node != w.Node || !a.OutcomeAt.Equal(w.OutcomeAt) || a.Late != w.Late {
						t.Errorf("attempt %d = {%s agent %q node %q outcome at %v late %v}, want %+v",
							k, a.ID, a.AgentID, a.Node, a.OutcomeAt, a.Late, w)
					}
				}
			})
		}
	}
}

// withDelivery sets the delivery ID of a delivery event.
func withDelivery(ev domain.Event, id string) domain.Event {
	switch e := ev.(type) {
	case domain.ForwardRequested:
		e.DeliveryID = id
		return e
	case domain.ForwardResponded:
		e.DeliveryID = id
		return e
	case domain.ForwardFailed:
		e.DeliveryID = id
		return e
	case domain.DeliveryAnswered:
		e.DeliveryID = id
		return e
	case domain.RetryRequested:
		e.DeliveryID = id
		return e
	}
	panic(fmt.Sprintf("not a delivery event: %T", ev))
}

func deref[T any](p *T) T {
	var zero T
	if p != nil {
		return *p
	}
	return zero
}

// TestAgentSessionsOfAnEndpoint: an explanation finds the sessions that
// served attempts by their IDs, and the Endpoint's session that started
// last before a moment, open or ended, with when and why it ended.
func TestAgentSessionsOfAnEndpoint(t *testing.T) {
	e := newEnv(t, Options{})
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	e.do(e.agent(e.ctx, "ep-1", domain.AgentConnected{EndpointID: "ep-1", AgentID: "ag-1", Target: "127.0.0.1:3000", Node: "node-a"}, at(1)))
	e.do(e.agent(e.ctx, "ep-1", domain.AgentDisconnected{EndpointID: "ep-1", AgentID: "ag-1", Reason: domain.SessionAgentDisconnected}, at(2)))
	e.do(e.agent(e.ctx, "ep-1", domain.AgentConnected{EndpointID: "ep-1", AgentID: "ag-2", Target: "127.0.0.1:4000", Node: "node-b"}, at(3)))
	e.do(e.agent(e.ctx, "ep-2", domain.AgentConnected{EndpointID: "ep-2", AgentID: "ag-3", Node: "node-a"}, at(4)))

	first := readmodel.AgentSession{AgentID: "ag-1", EndpointID: "ep-1", Target: "127.0.0.1:3000", ConnectedAt: at(1), Node: "node-a",
		DisconnectedAt: at(2), Reason: domain.SessionAgentDisconnected}
	second := readmodel.AgentSession{AgentID: "ag-2", EndpointID: "ep-1", Target: "127.0.0.1:4000", ConnectedAt: at(3), Node: "node-b"}
	tests := []struct {
		name     string
		endpoint string
		at       time.Time
		want     *readmodel.AgentSession
	}{
		{"before any session", "ep-1", at(1).Add(-time.Nanosecond), nil},
		{"as the first connects", "ep-1", at(1), &first},
		{"after the first ended", "ep-1", at(2).Add(time.Second), &first},
		{"while the second is open", "ep-1", at(5), &second},
		{"another Endpoint's", "ep-2", at(3), nil},
		{"an Endpoint never served", "ep-9", at(9), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := e.views.LastAgentSession(e.ctx, tc.endpoint, tc.at)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.want != nil) || (ok && fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", *tc.want)) {
				t.Errorf("LastAgentSession = %+v, %v; want %+v", got, ok, deref(tc.want))
			}
		})
	}

	byID, err := e.views.AgentSessions(e.ctx, []string{"ag-2", "ag-1", "ag-unknown"})
	if err != nil {
		t.Fatal(err)
	}
	if len(byID) != 2 || fmt.Sprintf("%+v", byID["ag-1"]) != fmt.Sprintf("%+v", first) || fmt.Sprintf("%+v", byID["ag-2"]) != fmt.Sprintf("%+v", second) {
		t.Errorf("AgentSessions = %+v, want ag-1 %+v and ag-2 %+v", byID, first, second)
	}
	if none, err := e.views.AgentSessions(e.ctx, nil); err != nil || len(none) != 0 {
		t.Errorf("AgentSessions(nil) = %+v, %v", none, err)
	}
}
