package explain_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/explain"
	"github.com/relayhq/relay/readmodel"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// sessions is the views' agent sessions as a plain list.
type sessions []readmodel.AgentSession

func (ss sessions) AgentSessions(_ context.Context, ids []string) (map[string]readmodel.AgentSession, error) {
	out := map[string]readmodel.AgentSession{}
	for _, s := range ss {
		if slices.Contains(ids, s.AgentID) {
			out[s.AgentID] = s
		}
	}
	return out, nil
}

func (ss sessions) LastAgentSession(_ context.Context, endpointID string, t time.Time) (readmodel.AgentSession, bool, error) {
	var last readmodel.AgentSession
	found := false
	for _, s := range ss {
		if s.EndpointID == endpointID && !s.ConnectedAt.After(t) && (!found || s.ConnectedAt.After(last.ConnectedAt)) {
			last, found = s, true
		}
	}
	return last, found, nil
}

func intp(n int) *int       { return &n }
func int64p(n int64) *int64 { return &n }

// endpointDelivery is a delivery of Endpoint ep-1 received at t0.
func endpointDelivery(status *int, answer *readmodel.RelayAnswer, attempts ...readmodel.Attempt) readmodel.Delivery {
	if attempts == nil {
		attempts = []readmodel.Attempt{}
	}
	return readmodel.Delivery{ID: "d-1", Address: "ep-1", Kind: domain.AddressEndpoint, Method: "POST", BodySize: 7,
		ReceivedAt: t0, ResponseStatus: status, RelayAnswer: answer, Attempts: attempts}
}

// failed is attempt a1, requested at 1 s, failed with status and err at 2 s.
func failed(status int, err, agent string) readmodel.Attempt {
	return readmodel.Attempt{ID: "a1", Status: intp(status), StartedAt: at(1), DurationMs: int64p(1000), Error: err,
		AgentID: agent, Node: "node-a", OutcomeAt: at(2)}
}

var (
	// agentA served the attempts of most cases.
	agentA = readmodel.AgentSession{AgentID: "conn-1/ep-1", EndpointID: "ep-1", Target: "127.0.0.1:3000", ConnectedAt: t0.Add(-time.Hour), Node: "node-a"}
	// agentGone connected and ended before the delivery.
	agentGone = readmodel.AgentSession{AgentID: "conn-0/ep-1", EndpointID: "ep-1", Target: "127.0.0.1:3000", ConnectedAt: t0.Add(-2 * time.Hour),
		Node: "node-b", DisconnectedAt: t0.Add(-90 * time.Minute), Reason: domain.SessionAgentDisconnected}
)

// TestEveryRelayDecisionIsExplained: each reason the relay records for an
// answer it decided, a failed attempt or an ended session is a case here
// (the test reads domain/reasons.go to know them all), and each gets a
// summary of its own that names what decided the status, with the time.
func TestEveryRelayDecisionIsExplained(t *testing.T) {
	tests := []struct {
		name     string
		covers   []string // the domain's reason constants this case explains
		d        readmodel.Delivery
		sessions sessions
		summary  []string // in the summary
		facts    []string // each in some fact
	}{
		{name: "guest inspector", d: func() readmodel.Delivery {
			d := endpointDelivery(intp(204), &readmodel.RelayAnswer{Status: 204, At: t0})
			d.Kind, d.Address = domain.AddressInspector, "insp-1"
			return d
		}(), summary: []string{"Answered 204 by the relay at 2026-03-04T05:06:07.890Z", "guest inspector records every request"},
			facts: []string{"Received POST at guest inspector insp-1, 7 bytes of body.", "The relay answered 204 itself."}},
		{name: "LOG Endpoint", d: endpointDelivery(intp(204), &readmodel.RelayAnswer{Status: 204, At: t0}),
			summary: []string{"Answered 204 by the relay", "LOG mode"}},
		{name: "configured answer", covers: []string{"ReasonConfiguredAnswer"},
			d:       endpointDelivery(intp(202), &readmodel.RelayAnswer{Status: 202, Reason: domain.ReasonConfiguredAnswer, At: t0}),
			summary: []string{"Answered 202 by the relay", "configured answer"}},
		{name: "Slack URL verification", covers: []string{"ReasonHandshake", "HandshakeSlackName"},
			d:       endpointDelivery(intp(200), &readmodel.RelayAnswer{Status: 200, Reason: domain.ReasonHandshake + domain.HandshakeSlackName, At: t0}),
			summary: []string{"Answered 200 by the relay", "Slack URL verification, a provider's verification request this address answers itself", "not forwarded"}},
		{name: "Meta verification", covers: []string{"ReasonHandshake", "HandshakeMetaName"},
			d:       endpointDelivery(intp(200), &readmodel.RelayAnswer{Status: 200, Reason: domain.ReasonHandshake + domain.HandshakeMetaName, At: t0}),
			summary: []string{"Answered 200 by the relay", "Meta verification, a provider's verification request this address answers itself", "not forwarded"}},
		{name: "Meta verification refused (wrong verify token)", covers: []string{"ReasonHandshake", "HandshakeMetaWrongName"},
			d:       endpointDelivery(intp(403), &readmodel.RelayAnswer{Status: 403, Reason: domain.ReasonHandshake + domain.HandshakeMetaWrongName, At: t0}),
			summary: []string{"Answered 403 by the relay", "Meta verification refused (wrong verify token), a provider's verification request this address answers itself", "not forwarded"}},
		{name: "Microsoft Graph validation", covers: []string{"ReasonHandshake", "HandshakeGraphName"},
			d:       endpointDelivery(intp(200), &readmodel.RelayAnswer{Status: 200, Reason: domain.ReasonHandshake + domain.HandshakeGraphName, At: t0}),
			summary: []string{"Answered 200 by the relay", "Microsoft Graph validation, a provider's verification request this address answers itself", "not forwarded"}},
		{name: "Dropbox verification", covers: []string{"ReasonHandshake", "HandshakeDropboxName"},
			d:       endpointDelivery(intp(200), &readmodel.RelayAnswer{Status: 200, Reason: domain.ReasonHandshake + domain.HandshakeDropboxName, At: t0}),
			summary: []string{"Answered 200 by the relay", "Dropbox verification, a provider's verification request this address answers itself", "not forwarded"}},
		{name: "Zoom URL validation", covers: []string{"ReasonHandshake", "HandshakeZoomName"},
			d:       endpointDelivery(intp(200), &readmodel.RelayAnswer{Status: 200, Reason: domain.ReasonHandshake + domain.HandshakeZoomName, At: t0}),
			summary: []string{"Answered 200 by the relay", "Zoom URL validation, a provider's verification request this address answers itself", "not forwarded"}},
		{name: "a Slack verification a LOG Endpoint does not answer", covers: []string{"ReasonUnansweredHandshake"},
			d:       endpointDelivery(intp(204), &readmodel.RelayAnswer{Status: 204, Reason: domain.WithUnansweredHandshake("", domain.HandshakeSlack), At: t0}),
			summary: []string{"Answered 204 by the relay", "LOG mode", "This looks like a Slack URL verification, which this address does not answer; enable the Slack handshake to answer it: relay endpoints update ep-1 --handshake slack"}},
		{name: "a Meta verification answered with the configured answer", covers: []string{"ReasonUnansweredHandshake"},
			d:       endpointDelivery(intp(202), &readmodel.RelayAnswer{Status: 202, Reason: domain.WithUnansweredHandshake(domain.ReasonConfiguredAnswer, domain.HandshakeMeta), At: t0}),
			summary: []string{"Answered 202 by the relay", "configured answer", "This looks like a Meta verification (hub.challenge)", "relay endpoints update ep-1 --handshake meta --meta-verify-token-file FILE"}},
		{name: "wrong protocol", covers: []string{"ReasonWrongProtocol"},
			d:       endpointDelivery(intp(503), &readmodel.RelayAnswer{Status: 503, Reason: domain.ReasonWrongProtocol, At: t0}),
			summary: []string{"Answered 503 by the relay", "plain HTTP", "https only"},
			facts:   []string{`recorded reason: "wrong protocol: plain HTTP"`}},
		{name: "filtered", covers: []string{"ReasonFiltered"},
			d: endpointDelivery(intp(204), &readmodel.RelayAnswer{Status: 204, At: t0,
				Reason: domain.ReasonFiltered + "no listener matched: json type=charge.failed not in [charge.succeeded]"}),
			summary: []string{"Answered 204 by the relay", "filtered, not forwarded: no listener matched: json type=charge.failed not in [charge.succeeded]", "as a LOG Endpoint answers"}},
		{name: "a copy dropped beside the primary's answer", covers: []string{"FailureCopyDropped"},
			d: endpointDelivery(intp(200), nil,
				readmodel.Attempt{ID: "a1", Status: intp(200), StartedAt: at(1), DurationMs: int64p(3), AgentID: agentA.AgentID, OutcomeAt: at(2)},
				readmodel.Attempt{ID: "a2", Status: intp(503), StartedAt: at(3), DurationMs: int64p(0), Error: domain.FailureCopyDropped, AgentID: "conn-9/ep-1", OutcomeAt: at(3), Copy: true}),
			sessions: sessions{agentA},
			summary:  []string{"Answered 200 by your local process", "attempt 1"},
			facts:    []string{"Attempt 2, a copy for agent conn-9/ep-1 failed with 503", "copy dropped: listener busy"}},
		{name: "a copy's answer lost between nodes", covers: []string{"FailureCopyAnswerLost"},
			d: endpointDelivery(intp(200), nil,
				readmodel.Attempt{ID: "a1", Status: intp(200), StartedAt: at(1), DurationMs: int64p(3), AgentID: agentA.AgentID, OutcomeAt: at(2)},
				readmodel.Attempt{ID: "a2", Status: intp(503), StartedAt: at(3), DurationMs: int64p(12), Error: domain.FailureCopyAnswerLost, AgentID: "conn-9/ep-1", OutcomeAt: at(4), Copy: true}),
			sessions: sessions{agentA},
			summary:  []string{"Answered 200 by your local process", "attempt 1"},
			facts:    []string{"Attempt 2, a copy for agent conn-9/ep-1 failed with 503", "copy's answer lost between relay nodes"}},
		{name: "body budget", covers: []string{"ReasonBodyBudget"},
			d:       endpointDelivery(intp(503), &readmodel.RelayAnswer{Status: 503, Reason: domain.ReasonBodyBudget, At: t0}),
			summary: []string{"Answered 503 by the relay", "relay busy", "--proxy-body-budget", "Retry-After"}},
		{name: "body over --max-body", covers: []string{"ReasonBodyTooLarge"},
			d:       endpointDelivery(intp(413), &readmodel.RelayAnswer{Status: 413, Reason: domain.ReasonBodyTooLarge + "1048576 bytes", At: t0}),
			summary: []string{"Answered 413 by the relay", "--max-body of 1048576 bytes", "it read 7 bytes"}},
		{name: "body stalled", covers: []string{"ReasonBodyStalled"},
			d:       endpointDelivery(intp(408), &readmodel.RelayAnswer{Status: 408, Reason: domain.ReasonBodyStalled + "i/o timeout", At: t0}),
			summary: []string{"Answered 408 by the relay", "--body-timeout", "7 bytes arrived"}},
		{name: "body unreadable", covers: []string{"ReasonBodyUnreadable"},
			d:       endpointDelivery(intp(400), &readmodel.RelayAnswer{Status: 400, Reason: domain.ReasonBodyUnreadable + "malformed chunked encoding", At: t0}),
			summary: []string{"Answered 400 by the relay", "could not be read (malformed chunked encoding)"}},
		{name: "no outcome in time, then a late local answer", covers: []string{"ReasonNoOutcome"},
			d: endpointDelivery(intp(504), &readmodel.RelayAnswer{Status: 504, Reason: domain.ReasonNoOutcome + "forward a1: timeout", At: at(36)},
				readmodel.Attempt{ID: "a1", Status: intp(200), StartedAt: at(1), DurationMs: int64p(40000), AgentID: agentA.AgentID, OutcomeAt: at(41), Late: true}),
			sessions: sessions{agentA},
			summary: []string{"Answered 504 by the relay at 2026-03-04T05:06:43.890Z", "no outcome", "--forward-timeout and 5 s more", "attempt 1, requested at 2026-03-04T05:06:08.890Z",
				"its outcome, 200, came at 2026-03-04T05:06:48.890Z, too late to be sent"},
			facts: []string{"Your local process answered 200 after 40000 ms (attempt 1)", "late: the relay had already answered the sender itself"}},
		{name: "outcome not recorded, then landed after all", covers: []string{"ReasonOutcomeNotRecorded"},
			d: endpointDelivery(intp(503), &readmodel.RelayAnswer{Status: 503, Reason: domain.ReasonOutcomeNotRecorded + "append: JetStream unavailable", At: at(12)},
				readmodel.Attempt{ID: "a1", Status: intp(200), StartedAt: at(1), DurationMs: int64p(5), AgentID: agentA.AgentID, OutcomeAt: at(13), Late: true}),
			sessions: sessions{agentA},
			summary: []string{"Answered 503 by the relay", "store unavailable", "attempt 1, requested at 2026-03-04T05:06:08.890Z",
				"did not take its outcome (append: JetStream unavailable)", "the outcome, 200, reached the log after all"}},
		{name: "an agent that altered the request",
			d: endpointDelivery(intp(200), nil,
				readmodel.Attempt{ID: "a1", Status: intp(200), StartedAt: at(1), DurationMs: int64p(3), AgentID: agentA.AgentID, OutcomeAt: at(2),
					Fidelity: &readmodel.Fidelity{Differences: []string{domain.PartHeaders, domain.PartBody}}}),
			sessions: sessions{agentA},
			summary:  []string{"200"},
			facts:    []string{"the agent reports that the headers and body it handed your local process differed from what the relay sent"}},
		{name: "a copy's agent that altered the request",
			d: endpointDelivery(intp(200), nil,
				readmodel.Attempt{ID: "a1", Status: intp(200), StartedAt: at(1), DurationMs: int64p(3), AgentID: agentA.AgentID, OutcomeAt: at(2),
					Fidelity: &readmodel.Fidelity{Differences: []string{}}},
				readmodel.Attempt{ID: "a2", Status: intp(200), StartedAt: at(1), DurationMs: int64p(4), AgentID: "conn-9/ep-1", OutcomeAt: at(2), Copy: true,
					Fidelity: &readmodel.Fidelity{Differences: []string{domain.PartBody}}}),
			sessions: sessions{agentA},
			summary:  []string{"200"},
			facts: []string{"Your local process answered 200 after 4 ms (attempt 2, a copy for agent conn-9/ep-1), reported by agent conn-9/ep-1; " +
				"the agent reports that the body it handed your local process differed from what the relay sent."}},
		{name: "no agent ever connected", covers: []string{"FailureNoAgent"},
			d:       endpointDelivery(intp(503), nil, failed(503, domain.FailureNoAgent, "")),
			summary: []string{"Answered 503 by the relay at 2026-03-04T05:06:09.890Z", "no agent was connected", "no agent had ever connected to it"},
			facts:   []string{"No agent session of Endpoint ep-1 had started by then."}},
		{name: "no agent since the last one ended", covers: []string{"SessionAgentDisconnected"},
			d:        endpointDelivery(intp(503), nil, failed(503, domain.FailureNoAgent, "")),
			sessions: sessions{agentGone},
			summary:  []string{"no agent was connected", "last agent session on node node-b started at 2026-03-04T03:06:07.890Z and ended at 2026-03-04T03:36:07.890Z (agent disconnected)"},
			facts:    []string{"Agent session conn-0/ep-1 connected on node node-b, forwarding to 127.0.0.1:3000", "Agent session conn-0/ep-1 ended: agent disconnected."}},
		{name: "no agent since the relay restarted", covers: []string{"SessionRelayRestarted"},
			d: endpointDelivery(intp(503), nil, failed(503, domain.FailureNoAgent, "")),
			sessions: sessions{func() readmodel.AgentSession {
				s := agentGone
				s.Reason = domain.SessionRelayRestarted
				return s
			}()},
			summary: []string{"ended at 2026-03-04T03:36:07.890Z (relay restarted)"}},
		{name: "no agent since its node was lost", covers: []string{"SessionNodeLost"},
			d: endpointDelivery(intp(503), nil, failed(503, domain.FailureNoAgent, "")),
			sessions: sessions{func() readmodel.AgentSession {
				s := agentGone
				s.Reason = domain.SessionNodeLost
				return s
			}()},
			summary: []string{"(relay node lost)"}},
		{name: "agent disconnected mid-forward", covers: []string{"FailureAgentDisconnected"},
			d: endpointDelivery(intp(503), nil, failed(503, domain.FailureAgentDisconnected, agentA.AgentID)),
			sessions: sessions{func() readmodel.AgentSession {
				s := agentA
				s.DisconnectedAt, s.Reason = at(2).Add(time.Millisecond), domain.SessionAgentDisconnected
				return s
			}()},
			summary: []string{"Answered 503 by the relay", "the agent on node node-a that had taken the forward (attempt 1) disconnected"},
			facts:   []string{"Agent session conn-1/ep-1 ended: agent disconnected."}},
		{name: "relay shutting down", covers: []string{"FailureShuttingDown"},
			d:       endpointDelivery(intp(503), nil, failed(503, domain.FailureShuttingDown, agentA.AgentID)),
			summary: []string{"Answered 503 by the relay", "shut down while attempt 1 waited"}},
		{name: "forward timeout", covers: []string{"FailureTimeout"},
			d:        endpointDelivery(intp(504), nil, failed(504, domain.FailureTimeout+"30s", agentA.AgentID)),
			sessions: sessions{agentA},
			summary:  []string{"Answered 504 by the relay at 2026-03-04T05:06:09.890Z", "did not answer within 30s (--forward-timeout)", "requested at 2026-03-04T05:06:08.890Z", "attempt 1 via the agent on node node-a"},
			facts:    []string{"Attempt 1 failed with 504 after 1000 ms: local target did not answer within 30s (agent conn-1/ep-1 on node node-a)."}},
		{name: "node holding the session lost", covers: []string{"FailureNodeLost"},
			d:       endpointDelivery(intp(503), nil, failed(503, domain.FailureNodeLost+" (node-c)", "")),
			summary: []string{"relay node node-c, which held the agent's session, stopped answering"}},
		{name: "node holding the session unreachable", covers: []string{"FailureNodeUnreachable"},
			d:       endpointDelivery(intp(503), nil, failed(503, domain.FailureNodeUnreachable+" (node-c)", "")),
			summary: []string{"attempt 1 could not be sent to relay node node-c"}},
		{name: "node holding the session out of body budget", covers: []string{"FailureNodeBodyBudget"},
			d:       endpointDelivery(intp(503), nil, failed(503, domain.FailureNodeBodyBudget+" (node-c)", "")),
			summary: []string{"Answered 503 by the relay", "relay busy", "relay node node-c, which held the agent's session", "--proxy-body-budget", "attempt 1 was not given to the agent"}},
		{name: "relay restarted mid-forward", covers: []string{"FailureRestarted"},
			d:       endpointDelivery(intp(503), nil, failed(503, domain.FailureRestarted, "")),
			summary: []string{"Recorded 503 by the relay", "the relay stopped while attempt 1 waited", "the sender got no answer from it"}},
		{name: "node of the sender lost mid-forward", covers: []string{"FailureNodeLostBeforeAnswer"},
			d:       endpointDelivery(intp(503), nil, failed(503, domain.FailureNodeLostBeforeAnswer, "")),
			summary: []string{"Recorded 503 by the relay", "relay node node-a, which the sender was connected to, was lost"}},
		{name: "invalid status from the agent", covers: []string{"FailureInvalidStatus"},
			d:       endpointDelivery(intp(502), nil, failed(502, domain.FailureInvalidStatus+"42", agentA.AgentID)),
			summary: []string{"Answered 502 by the relay", "reported status 42", "no sender can be given"}},
		{name: "local target refused", d: endpointDelivery(intp(502), nil, failed(502, "nothing listening on 127.0.0.1:3000: connect: connection refused", agentA.AgentID)),
			sessions: sessions{agentA},
			summary:  []string{"Answered 502 by the relay", "the agent on node node-a got no answer from your local process (attempt 1): nothing listening on 127.0.0.1:3000"}},
		{name: "local answer", d: endpointDelivery(intp(404), nil,
			readmodel.Attempt{ID: "a1", Status: intp(404), StartedAt: at(1), DurationMs: int64p(12), AgentID: agentA.AgentID, OutcomeAt: at(2)}),
			sessions: sessions{agentA},
			summary:  []string{"Answered 404 by your local process at 2026-03-04T05:06:09.890Z (attempt 1 via the agent on node node-a, 12 ms)."},
			facts:    []string{"Agent session conn-1/ep-1 connected on node node-a, forwarding to 127.0.0.1:3000 (it served attempt 1)."}},
		{name: "a retry answered", d: endpointDelivery(intp(200), nil,
			failed(503, domain.FailureNoAgent, ""),
			readmodel.Attempt{ID: "a2", Status: intp(200), StartedAt: at(60), DurationMs: int64p(5), Retry: true, AgentID: agentA.AgentID, OutcomeAt: at(61)}),
			sessions: sessions{agentA},
			summary: []string{"The sender was answered 503 by the relay at 2026-03-04T05:06:09.890Z: no agent was connected",
				"Shown now: 200, from attempt 2, a retry, which the sender never saw: answered 200 by your local process", "(attempt 2, a retry, via the agent on node node-a, 5 ms)"},
			facts: []string{"Attempt 1 failed with 503 after 1000 ms: no agent connected.", "Forward requested (attempt 2, a retry); no sender waited for it."}},
		{name: "an edited retry answered after the sender's answer", d: endpointDelivery(intp(200), nil,
			readmodel.Attempt{ID: "a1", Status: intp(500), StartedAt: at(1), DurationMs: int64p(3), AgentID: agentA.AgentID, Node: "node-a", OutcomeAt: at(2)},
			readmodel.Attempt{ID: "a2", Status: intp(200), StartedAt: at(60), DurationMs: int64p(5), Retry: true, Edit: &domain.RequestEdit{Method: "PUT"},
				AgentID: agentA.AgentID, Node: "node-a", OutcomeAt: at(61)}),
			sessions: sessions{agentA},
			summary: []string{"The sender was answered 500 by your local process at 2026-03-04T05:06:09.890Z (attempt 1 via the agent on node node-a, 3 ms).",
				"Shown now: 200, from attempt 2, an edited retry, which the sender never saw"},
			facts: []string{"Forward requested (attempt 1); the sender waited on node node-a.",
				"Forward requested (attempt 2, an edited retry) on node node-a; no sender waited for it."}},
		{name: "waiting for the local answer", d: endpointDelivery(nil, nil, readmodel.Attempt{ID: "a1", StartedAt: at(1), Node: "node-a"}),
			summary: []string{"No answer yet: attempt 1, requested at 2026-03-04T05:06:08.890Z, is waiting"},
			facts:   []string{"Forward requested (attempt 1); the sender waited on node node-a; no outcome yet."}},
		{name: "nothing recorded yet", d: endpointDelivery(nil, nil),
			summary: []string{"No answer is recorded yet"}},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range tc.covers {
				covered[c] = true
			}
			x, err := explain.Delivery(t.Context(), tc.d, tc.sessions)
			if err != nil {
				t.Fatal(err)
			}
			if (x.Status == nil) != (tc.d.ResponseStatus == nil) || (x.Status != nil && *x.Status != *tc.d.ResponseStatus) {
				t.Errorf("Status = %v, want the delivery's responseStatus %v", x.Status, tc.d.ResponseStatus)
			}
			for _, want := range tc.summary {
				if !strings.Contains(x.Summary, want) {
					t.Errorf("summary %q\ndoes not say %q", x.Summary, want)
				}
			}
			if strings.Contains(x.Summary, "\n") {
				t.Errorf("summary %q is more than one line", x.Summary)
			}
			text := x.Text()
			for _, want := range tc.facts {
				if !strings.Contains(text, want) {
					t.Errorf("facts\n%s\ndo not say %q", text, want)
				}
			}
			for i := 1; i < len(x.Facts); i++ {
				if x.Facts[i].At.Before(x.Facts[i-1].At) {
					t.Errorf("facts out of time order:\n%s", text)
				}
			}
			if !slices.ContainsFunc(x.Facts, func(f explain.Fact) bool { return f.At.Equal(t0) && strings.HasPrefix(f.Text, "Received POST") }) {
				t.Errorf("no fact tells of the request's receipt:\n%s", text)
			}
		})
	}
	for _, name := range reasonConstants(t) {
		if !covered[name] {
			t.Errorf("domain.%s has no case here: every reason the relay records must be explained", name)
		}
	}
}

// reasonConstants lists the constants of domain/reasons.go.
func reasonConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../domain/reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, decl := range f.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					names = append(names, n.Name)
				}
			}
		}
	}
	if len(names) < 15 {
		t.Fatalf("read %d constants from domain/reasons.go: %v", len(names), names)
	}
	return names
}

// TestManyAttemptsAreBounded: a delivery retried many times is explained
// by its first and latest attempts, and reads the sessions of those only.
func TestManyAttemptsAreBounded(t *testing.T) {
	var attempts []readmodel.Attempt
	for i := range 50 {
		attempts = append(attempts, readmodel.Attempt{ID: "a", Status: intp(500), StartedAt: at(i + 1), DurationMs: int64p(1),
			Retry: i > 0, AgentID: "agent-" + string(rune('A'+i%26)) + string(rune('a'+i/26)), OutcomeAt: at(i + 1)})
	}
	reads := &countingSessions{}
	x, err := explain.Delivery(t.Context(), endpointDelivery(intp(500), nil, attempts...), reads)
	if err != nil {
		t.Fatal(err)
	}
	if reads.ids > 10 {
		t.Errorf("read %d agent sessions for 50 attempts, want at most 10", reads.ids)
	}
	text := x.Text()
	if !strings.Contains(text, "(attempt 1)") || !strings.Contains(text, "(attempt 50, a retry)") || strings.Contains(text, "(attempt 2, a retry)") {
		t.Errorf("facts of 50 attempts:\n%s", text)
	}
	if !strings.Contains(text, "40 attempts in between are not told of here") {
		t.Errorf("the facts do not say attempts were left out:\n%s", text)
	}
	if !strings.Contains(x.Summary, "The sender was answered 500 by your local process") || !strings.Contains(x.Summary, "(attempt 1 via the agent") ||
		!strings.Contains(x.Summary, "Shown now: 500, from attempt 50, a retry") {
		t.Errorf("summary %q", x.Summary)
	}
}

type countingSessions struct{ ids int }

func (c *countingSessions) AgentSessions(_ context.Context, ids []string) (map[string]readmodel.AgentSession, error) {
	c.ids += len(ids)
	return map[string]readmodel.AgentSession{}, nil
}

func (c *countingSessions) LastAgentSession(context.Context, string, time.Time) (readmodel.AgentSession, bool, error) {
	return readmodel.AgentSession{}, false, nil
}

// TestHint: only a delivery recorded as a handshake its address does not
// answer has a hint, naming the command for its kind of address; the
// note of it splits off any reason it follows.
func TestHint(t *testing.T) {
	inspector := endpointDelivery(intp(204), &readmodel.RelayAnswer{Status: 204, Reason: domain.WithUnansweredHandshake("", domain.HandshakeZoom), At: t0})
	inspector.Kind, inspector.Address = domain.AddressInspector, "insp-1"
	for _, tc := range []struct {
		name string
		d    readmodel.Delivery
		want string
	}{
		{"inspector", inspector, "relay inspector answer insp-1 --handshake zoom --zoom-secret-file FILE"},
		{"dropbox", endpointDelivery(intp(204), &readmodel.RelayAnswer{Status: 204, Reason: domain.WithUnansweredHandshake("", domain.HandshakeDropbox), At: t0}),
			"a Dropbox verification (challenge), which this address does not answer; enable the Dropbox handshake"},
		{"msgraph", endpointDelivery(intp(204), &readmodel.RelayAnswer{Status: 204, Reason: domain.WithUnansweredHandshake("", domain.HandshakeGraph), At: t0}),
			"enable the Microsoft Graph handshake to answer it: relay endpoints update ep-1 --handshake msgraph ("},
		{"a plain LOG answer", endpointDelivery(intp(204), &readmodel.RelayAnswer{Status: 204, At: t0}), ""},
		{"a handshake answered", endpointDelivery(intp(200), &readmodel.RelayAnswer{Status: 200, Reason: domain.ReasonHandshake + domain.HandshakeSlackName, At: t0}), ""},
		{"a local answer", endpointDelivery(intp(200), nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := explain.Hint(tc.d)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Hint = %q, want %q", got, tc.want)
			}
		})
	}
	for _, reason := range []string{"", domain.ReasonConfiguredAnswer, domain.ReasonFiltered + "a; b"} {
		base, h := domain.UnansweredHandshake(domain.WithUnansweredHandshake(reason, domain.HandshakeMeta))
		if base != reason || h != domain.HandshakeMeta {
			t.Errorf("reason %q: split into %q, %q", reason, base, h)
		}
		if base, h := domain.UnansweredHandshake(reason); base != reason || h != "" {
			t.Errorf("reason %q without a note: split into %q, %q", reason, base, h)
		}
	}
}

// TestAttemptNames: each attempt is named by what sent it. A QUEUE
// Endpoint's attempts are recorded as retries, yet the queue sent them and
// the explanation says so; one sent again after an attempt was left open
// says it may be a duplicate and which attempt was left open by what; a
// user's retry stays a retry.
func TestAttemptNames(t *testing.T) {
	queued := func(id string, s int, status *int, err string) readmodel.Attempt {
		a := readmodel.Attempt{ID: id, Status: status, StartedAt: at(s), Error: err, Retry: true, Queued: true}
		if status != nil {
			a.DurationMs, a.OutcomeAt = int64p(1000), at(s+1)
		}
		return a
	}
	dup := func(a readmodel.Attempt) readmodel.Attempt { a.PossibleDuplicate = true; return a }
	tests := []struct {
		name     string
		attempts []readmodel.Attempt
		want     []string // each in the facts
		not      []string // none in the text
	}{
		{name: "queued attempts", attempts: []readmodel.Attempt{
			queued("q1", 1, intp(503), domain.FailureNoAgent), queued("q2", 3, intp(200), "")},
			want: []string{"Forward requested (attempt 1, from the queue)", "Forward requested (attempt 2, from the queue)"},
			not:  []string{"a retry", "duplicate"}},
		{name: "a possible duplicate after a restart", attempts: []readmodel.Attempt{
			queued("q1", 1, intp(503), domain.FailureNoAgent), queued("q2", 3, intp(502), domain.FailureRestarted),
			dup(queued("q3", 5, intp(200), ""))},
			want: []string{"Forward requested (attempt 2, from the queue)",
				"Forward requested (attempt 3, from the queue, a possible duplicate); no sender waited for it; attempt 2 was left open when the relay stopped, so your local process may have had this delivery already.",
				"(attempt 3, from the queue, a possible duplicate, 1000 ms)"},
			not: []string{"a retry"}},
		{name: "a possible duplicate after a shutdown", attempts: []readmodel.Attempt{
			queued("q1", 1, intp(502), domain.FailureShuttingDown), dup(queued("q2", 3, intp(200), ""))},
			want: []string{"(attempt 2, from the queue, a possible duplicate); no sender waited for it; attempt 1 was left open when the relay shut down,"}},
		{name: "a possible duplicate after a lost node", attempts: []readmodel.Attempt{
			queued("q1", 1, intp(502), domain.FailureNodeLostBeforeAnswer), dup(queued("q2", 3, intp(200), ""))},
			want: []string{"(attempt 2, from the queue, a possible duplicate); no sender waited for it; attempt 1 was left open when its relay node was lost,"}},
		{name: "a possible duplicate of an attempt still open", attempts: []readmodel.Attempt{
			queued("q1", 1, nil, ""), dup(queued("q2", 3, intp(200), ""))},
			want: []string{"(attempt 2, from the queue, a possible duplicate); no sender waited for it; attempt 1 was left open without an outcome,"}},
		{name: "a possible duplicate whose open attempt is not known", attempts: []readmodel.Attempt{
			dup(queued("q1", 1, intp(200), ""))},
			want: []string{"(attempt 1, from the queue, a possible duplicate); no sender waited for it; an earlier attempt was left open,"}},
		{name: "a user's retry", attempts: []readmodel.Attempt{
			{ID: "a1", Status: intp(500), StartedAt: at(1), DurationMs: int64p(1), OutcomeAt: at(2)},
			{ID: "a2", Status: intp(200), StartedAt: at(3), DurationMs: int64p(1), OutcomeAt: at(4), Retry: true}},
			want: []string{"Forward requested (attempt 1)", "Forward requested (attempt 2, a retry)"},
			not:  []string{"from the queue", "duplicate"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			last := tc.attempts[len(tc.attempts)-1].Status
			x, err := explain.Delivery(t.Context(), endpointDelivery(last, &readmodel.RelayAnswer{Status: 202, Reason: domain.ReasonQueued, At: t0}, tc.attempts...), sessions{})
			if err != nil {
				t.Fatal(err)
			}
			text := x.Text()
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("missing %q in:\n%s", w, text)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(text, n) {
					t.Errorf("%q in:\n%s", n, text)
				}
			}
		})
	}
}
