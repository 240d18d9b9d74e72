package graph_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/readmodel"
)

// seed appends events to stream, one second apart from start, as the
// relay's recorder would, and waits for the views to apply them.
func (e *env) seed(t *testing.T, stream string, start time.Time, events ...domain.Event) {
	t.Helper()
	codec := domain.NewCodec()
	data := make([]domain.EventData, len(events))
	for i, ev := range events {
		d, err := codec.Encode(commands.NewEventID(), ev, start.Add(time.Duration(i)*time.Second), domain.Trace{})
		if err != nil {
			t.Fatal(err)
		}
		data[i] = d
	}
	res, err := e.store.Append(context.Background(), stream, domain.Any(), data...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.views.WaitFor(context.Background(), res.Position); err != nil {
		t.Fatal(err)
	}
}

type explanationJSON struct {
	ResponseStatus *int
	Explanation    string
	Why            struct {
		Status  *int
		Summary string
		Facts   []struct{ At, Text string } // the client decodes through mapstructure: a time stays text
	}
}

const explanationFields = `responseStatus explanation why { status summary facts { at text } }`

// TestExplanationOfEveryRelayAnswer: for each status the relay decides
// itself, recorded as the relay records it, delivery(id) explains it:
// explanation is the summary and the dated facts, why the same in parts,
// and both name what decided the status. Lists explain their rows too.
func TestExplanationOfEveryRelayAnswer(t *testing.T) {
	e := newEnv(t)
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000"}`)
	auth := acct.auth
	account := acct.id
	epID := acct.endpoint

	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	// An agent session that served for a minute and ended an hour ago,
	// and one that is open now.
	e.seed(t, domain.AgentStream(epID), base.Add(-time.Hour),
		domain.AgentConnected{EndpointID: epID, AgentID: "conn-0/" + epID, Target: "127.0.0.1:3000", Node: "node-b"},
		domain.AgentDisconnected{EndpointID: epID, AgentID: "conn-0/" + epID, Reason: domain.SessionRelayRestarted})

	received := func(id string, answer *domain.ReceiptAnswer) domain.Event {
		return domain.DeliveryReceived{DeliveryID: id, Address: epID, AddressKind: domain.AddressEndpoint, AccountID: account,
			Method: "POST", Target: "/hook", Host: epID + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
			Body: []byte("{}"), BodySize: 2, Complete: true, Answer: answer}
	}
	requested := func(id string) domain.Event {
		return domain.ForwardRequested{DeliveryID: id, AttemptID: id + "-a1", EndpointID: epID, Node: "node-a"}
	}
	failed := func(id string, status int, err, agent string) domain.Event {
		return domain.ForwardFailed{DeliveryID: id, AttemptID: id + "-a1", AgentID: agent, Status: status, Error: err, DurationMs: 12}
	}
	agent := "conn-1/" + epID
	tests := []struct {
		name    string
		status  int
		events  func(id string) []domain.Event
		summary []string
	}{
		{"LOG mode", 204, func(id string) []domain.Event {
			return []domain.Event{received(id, &domain.ReceiptAnswer{Status: 204})}
		}, []string{"Answered 204 by the relay", "LOG mode"}},
		{"configured answer", 202, func(id string) []domain.Event {
			return []domain.Event{received(id, &domain.ReceiptAnswer{Status: 202, Reason: domain.ReasonConfiguredAnswer})}
		}, []string{"Answered 202 by the relay", "configured answer"}},
		{"zoom handshake", 200, func(id string) []domain.Event {
			return []domain.Event{received(id, &domain.ReceiptAnswer{Status: 200, Reason: domain.ReasonHandshake + domain.HandshakeZoomName})}
		}, []string{"Answered 200 by the relay", "Zoom URL validation, a provider's verification request", "answered by the relay"}},
		{"meta handshake refused", 403, func(id string) []domain.Event {
			return []domain.Event{received(id, &domain.ReceiptAnswer{Status: 403, Reason: domain.ReasonHandshake + domain.HandshakeMetaWrongName})}
		}, []string{"Answered 403 by the relay", "Meta verification refused (wrong verify token)"}},
		{"wrong protocol", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, &domain.ReceiptAnswer{Status: 503, Reason: domain.ReasonWrongProtocol})}
		}, []string{"Answered 503 by the relay", "plain HTTP"}},
		{"body budget", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, &domain.ReceiptAnswer{Status: 503, Reason: domain.ReasonBodyBudget})}
		}, []string{"relay busy", "--proxy-body-budget"}},
		{"body over --max-body", 413, func(id string) []domain.Event {
			return []domain.Event{received(id, &domain.ReceiptAnswer{Status: 413, Reason: domain.ReasonBodyTooLarge + "1024 bytes"})}
		}, []string{"Answered 413 by the relay", "--max-body of 1024 bytes"}},
		{"body stalled", 408, func(id string) []domain.Event {
			return []domain.Event{received(id, &domain.ReceiptAnswer{Status: 408, Reason: domain.ReasonBodyStalled + "i/o timeout"})}
		}, []string{"Answered 408 by the relay", "--body-timeout"}},
		{"body unreadable", 400, func(id string) []domain.Event {
			return []domain.Event{received(id, &domain.ReceiptAnswer{Status: 400, Reason: domain.ReasonBodyUnreadable + "malformed chunked encoding"})}
		}, []string{"Answered 400 by the relay", "malformed chunked encoding"}},
		{"no outcome in time", 504, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id),
				domain.DeliveryAnswered{DeliveryID: id, Status: 504, Reason: domain.ReasonNoOutcome + "forward: timeout"}}
		}, []string{"Answered 504 by the relay", "no outcome of the forward", "attempt 1"}},
		{"outcome not recorded", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id),
				domain.DeliveryAnswered{DeliveryID: id, Status: 503, Reason: domain.ReasonOutcomeNotRecorded + "append: JetStream unavailable"}}
		}, []string{"Answered 503 by the relay", "(store unavailable)", "did not take its outcome (append: JetStream unavailable)", "attempt 1"}},
		{"no agent", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 503, domain.FailureNoAgent, "")}
		}, []string{"no agent was connected", "last agent session on node node-b", "(relay restarted)"}},
		{"agent disconnected", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 503, domain.FailureAgentDisconnected, agent)}
		}, []string{"disconnected before the local answer came"}},
		{"relay shutting down", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 503, domain.FailureShuttingDown, agent)}
		}, []string{"the relay shut down while attempt 1 waited"}},
		{"forward timeout", 504, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 504, domain.FailureTimeout+"30s", agent)}
		}, []string{"did not answer within 30s (--forward-timeout)", "the forward requested at"}},
		{"node lost", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 503, domain.FailureNodeLost+" (node-c)", "")}
		}, []string{"relay node node-c, which held the agent's session, stopped answering"}},
		{"node unreachable", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 503, domain.FailureNodeUnreachable+" (node-c)", "")}
		}, []string{"could not be sent to relay node node-c"}},
		{"node out of body budget", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 503, domain.FailureNodeBodyBudget+" (node-c)", "")}
		}, []string{"(relay busy)", "relay node node-c, which held the agent's session", "--proxy-body-budget"}},
		{"relay restarted", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 503, domain.FailureRestarted, "")}
		}, []string{"the relay stopped while attempt 1 waited"}},
		{"node lost before the answer", 503, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 503, domain.FailureNodeLostBeforeAnswer, "")}
		}, []string{"relay node node-a, which the sender was connected to, was lost"}},
		{"invalid status", 502, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 502, domain.FailureInvalidStatus+"42", agent)}
		}, []string{"reported status 42"}},
		{"local target refused", 502, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id), failed(id, 502, "nothing listening on 127.0.0.1:3000", agent)}
		}, []string{"got no answer from your local process (attempt 1): nothing listening on 127.0.0.1:3000"}},
		{"local answer", 201, func(id string) []domain.Event {
			return []domain.Event{received(id, nil), requested(id),
				domain.ForwardResponded{DeliveryID: id, AttemptID: id + "-a1", AgentID: agent, Status: 201, DurationMs: 3}}
		}, []string{"Answered 201 by your local process", "attempt 1 via the agent"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := commands.NewEventID()
			e.seed(t, domain.DeliveryStream(id), base.Add(time.Duration(i)*time.Minute), tc.events(id)...)
			var out struct{ Delivery *explanationJSON }
			e.c.MustPost(`query($id: ID!) { delivery(id: $id) { `+explanationFields+` } }`, &out, client.Var("id", id), auth)
			d := out.Delivery
			if d != nil {
				t.Logf("explanation:\n%s", d.Explanation)
			}
			if d == nil || d.ResponseStatus == nil || *d.ResponseStatus != tc.status {
				t.Fatalf("delivery %+v, want responseStatus %d", d, tc.status)
			}
			if d.Why.Status == nil || *d.Why.Status != tc.status {
				t.Errorf("why.status %v, want %d", d.Why.Status, tc.status)
			}
			for _, want := range tc.summary {
				if !strings.Contains(d.Why.Summary, want) {
					t.Errorf("summary %q\ndoes not say %q", d.Why.Summary, want)
				}
			}
			if !strings.HasPrefix(d.Explanation, d.Why.Summary+"\n") || len(d.Why.Facts) < 1 ||
				!strings.HasSuffix(d.Explanation, d.Why.Facts[len(d.Why.Facts)-1].Text) {
				t.Errorf("explanation %q is not the summary then the facts %+v", d.Explanation, d.Why.Facts)
			}
			if f := d.Why.Facts[0]; !strings.HasPrefix(f.Text, "Received POST") && !strings.HasPrefix(f.Text, "Agent session") {
				t.Errorf("first fact %+v", f)
			}
		})
	}

	// A page explains each row, from the row it already read.
	var page struct {
		Endpoint struct {
			Deliveries struct{ Nodes []explanationJSON }
		}
	}
	e.c.MustPost(`query($id: ID!) { endpoint(id: $id) { deliveries(first: 100) { nodes { `+explanationFields+` } } } }`,
		&page, client.Var("id", epID), auth)
	if n := len(page.Endpoint.Deliveries.Nodes); n != len(tests) {
		t.Fatalf("%d rows, want %d", n, len(tests))
	}
	for _, d := range page.Endpoint.Deliveries.Nodes {
		if d.Why.Summary == "" || !strings.HasPrefix(d.Explanation, d.Why.Summary) || *d.Why.Status != *d.ResponseStatus {
			t.Errorf("row %+v is not explained", d)
		}
	}
}

// TestExplanationSenderAndShownApart: after an edited retry, the API's
// explanation says, in parts, what the sender was answered (attempt 1's
// 500) and what the status shown comes from (attempt 2, an edited retry).
func TestExplanationSenderAndShownApart(t *testing.T) {
	e := newEnv(t)
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000"}`)
	auth := acct.auth
	epID := acct.endpoint
	id := commands.NewEventID()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	e.seed(t, domain.DeliveryStream(id), base,
		domain.DeliveryReceived{DeliveryID: id, Address: epID, AddressKind: domain.AddressEndpoint, AccountID: acct.id,
			Method: "POST", Target: "/hook", Host: epID + ".localhost", Proto: "HTTP/1.1", Body: []byte("{}"), BodySize: 2, Complete: true},
		domain.ForwardRequested{DeliveryID: id, AttemptID: "a1", EndpointID: epID, Node: "node-a"},
		domain.ForwardResponded{DeliveryID: id, AttemptID: "a1", AgentID: "conn-1/" + epID, Status: 500, DurationMs: 3},
		domain.RetryRequested{DeliveryID: id, AttemptID: "a2", AccountID: acct.id},
		domain.ForwardRequested{DeliveryID: id, AttemptID: "a2", EndpointID: epID, Retry: true, Edit: &domain.RequestEdit{Method: "PUT"}, Node: "node-a"},
		domain.ForwardResponded{DeliveryID: id, AttemptID: "a2", AgentID: "conn-1/" + epID, Status: 200, DurationMs: 3})
	var out struct {
		Delivery struct {
			ResponseStatus int
			Why            struct {
				Summary    string
				SenderLost bool
				Sender     struct {
					Status  int
					Attempt *int
					At      string
				}
				Shown struct {
					Status  int
					Attempt *int
					Kind    string
				}
			}
		}
	}
	e.c.MustPost(`query($id: ID!) { delivery(id: $id) { responseStatus why { summary senderLost sender { status attempt at } shown { status attempt kind } } } }`,
		&out, client.Var("id", id), auth)
	w := out.Delivery.Why
	t.Logf("summary: %s", w.Summary)
	if out.Delivery.ResponseStatus != 200 || w.Shown.Status != 200 || w.Shown.Attempt == nil || *w.Shown.Attempt != 2 || w.Shown.Kind != "EDITED_RETRY" {
		t.Errorf("responseStatus %d, shown %+v: want 200 from attempt 2, an edited retry", out.Delivery.ResponseStatus, w.Shown)
	}
	at, err := time.Parse(time.RFC3339Nano, w.Sender.At)
	if w.Sender.Status != 500 || w.Sender.Attempt == nil || *w.Sender.Attempt != 1 || err != nil || !at.Equal(base.Add(2*time.Second)) || w.SenderLost {
		t.Errorf("sender %+v (lost %v): want 500 from attempt 1 at %s", w.Sender, w.SenderLost, base.Add(2*time.Second))
	}
	if !strings.HasPrefix(w.Summary, "The sender was answered 500 by your local process") ||
		!strings.Contains(w.Summary, "Shown now: 200, from attempt 2, an edited retry, which the sender never saw") {
		t.Errorf("summary %q", w.Summary)
	}
}

// explanationReads is the real views, counting the reads an explanation
// makes: the agent sessions its attempts name, an Endpoint's last session
// before a 503 "no agent connected", and the delivery's queue entry.
type explanationReads struct {
	graph.Views
	n atomic.Int64
}

type queueViews interface {
	QueueEntry(ctx context.Context, deliveryID string) (readmodel.QueueEntry, error)
	QueueCounts(ctx context.Context, endpointID string) (readmodel.QueueCounts, error)
	QueueList(ctx context.Context, accountID, endpointID, state, after string, limit int) ([]readmodel.QueueEntry, string, error)
}

func (v *explanationReads) AgentSessions(ctx context.Context, ids []string) (map[string]readmodel.AgentSession, error) {
	v.n.Add(1)
	return v.Views.AgentSessions(ctx, ids)
}

func (v *explanationReads) LastAgentSession(ctx context.Context, endpointID string, at time.Time) (readmodel.AgentSession, bool, error) {
	v.n.Add(1)
	return v.Views.LastAgentSession(ctx, endpointID, at)
}

func (v *explanationReads) QueueEntry(ctx context.Context, deliveryID string) (readmodel.QueueEntry, error) {
	v.n.Add(1)
	return v.Views.(queueViews).QueueEntry(ctx, deliveryID)
}

func (v *explanationReads) QueueCounts(ctx context.Context, endpointID string) (readmodel.QueueCounts, error) {
	return v.Views.(queueViews).QueueCounts(ctx, endpointID)
}

func (v *explanationReads) QueueList(ctx context.Context, accountID, endpointID, state, after string, limit int) ([]readmodel.QueueEntry, string, error) {
	return v.Views.(queueViews).QueueList(ctx, accountID, endpointID, state, after, limit)
}

// TestExplanationsAreMadeOncePerRow: explanation and why are one
// explanation in two forms, so a row that selects both, under any
// aliases, makes it once: its reads are those of one explanation.
func TestExplanationsAreMadeOncePerRow(t *testing.T) {
	var counted *explanationReads
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		counted = &explanationReads{Views: r.Views}
		r.Views = counted
	})
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000"}`)
	auth := acct.auth
	epID := acct.endpoint
	const rows = 10
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range rows {
		id := fmt.Sprintf("d%02d", i)
		e.seed(t, domain.DeliveryStream(id), base.Add(time.Duration(i)*time.Minute),
			domain.DeliveryReceived{DeliveryID: id, Address: epID, AddressKind: domain.AddressEndpoint, AccountID: acct.id,
				Method: "POST", Target: "/hook", Host: epID + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
				Body: []byte("{}"), BodySize: 2, Complete: true},
			domain.ForwardRequested{DeliveryID: id, AttemptID: id + "-a1", EndpointID: epID, Node: "node-a"},
			domain.ForwardFailed{DeliveryID: id, AttemptID: id + "-a1", Status: 503, Error: domain.FailureNoAgent, DurationMs: 12})
	}
	page := func(sel string) int64 {
		t.Helper()
		counted.n.Store(0)
		var out struct {
			Endpoint struct {
				Deliveries struct{ Nodes []map[string]any }
			}
		}
		e.c.MustPost(`query($id: ID!) { endpoint(id: $id) { deliveries(first: 10) { nodes { `+sel+` } } } }`, &out, auth, client.Var("id", epID))
		if n := len(out.Endpoint.Deliveries.Nodes); n != rows {
			t.Fatalf("a page of %d rows, want %d", n, rows)
		}
		return counted.n.Load()
	}
	one := page(`explanation`)
	if one == 0 {
		t.Fatal("explaining a page read nothing: the test counts no read")
	}
	for _, tt := range []struct{ name, sel string }{
		{"explanation and why", `explanation why { summary }`},
		{"aliases of both", `explanation a: explanation why { summary } b: why { status facts { text } }`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := page(tt.sel)
			t.Logf("%d rows: %d reads for explanation alone, %d for %s", rows, one, n, tt.sel)
			if n != one {
				t.Errorf("a page selecting %s made %d explanation reads, want %d (one explanation a row)", tt.sel, n, one)
			}
		})
	}
}
