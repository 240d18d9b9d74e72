package commands_test

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
)

var webhookBody = []byte(`{"id":7,"pad":"` + strings.Repeat("y", 200) + `"}`)

// answerPong answers 200 with the forwarded target, and makes the agent fail
// to reach its target for "/fail".
func answerPong(cmd domain.ForwardCommand) domain.ForwardOutcome {
	if cmd.Target == "/fail" {
		return domain.ForwardOutcome{Error: "dial tcp 127.0.0.1:3000: connection refused", DurationMs: 1}
	}
	return domain.ForwardOutcome{
		Status:     200,
		Headers:    []domain.Header{{Name: "Set-Cookie", Value: "a=1"}, {Name: "Set-Cookie", Value: "b=2"}},
		Body:       []byte("pong " + cmd.Target),
		DurationMs: 3,
	}
}

func TestRetryDeliveryRefusals(t *testing.T) {
	e := newEnv(t, defaultConfig())
	ada, _ := e.account(t, "Ada")
	bob, _ := e.account(t, "Bob")
	proxy := e.endpoint(t, ada.ID, proxySettings)
	logEp := e.endpoint(t, ada.ID, domain.EndpointSettings{Name: "log", Mode: domain.ModeLog, Target: "127.0.0.1:3000"})
	noAgent := e.endpoint(t, ada.ID, named(proxySettings, "no agent"))
	gone := e.endpoint(t, ada.ID, named(proxySettings, "gone"))
	in, err := e.svc.CreateInspector(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	// Agents everywhere but on noAgent, so that only the refusal named
	// by each case can explain it.
	var agents []<-chan domain.ForwardCommand
	for _, ep := range []string{proxy.ID, logEp.ID, gone.ID} {
		agents = append(agents, e.agent(t, ep, ada.ID, answerPong))
	}

	full := request("/hooks", webhookBody, len(webhookBody))
	partial := request("/hooks", webhookBody, 16)
	endpoint := domain.AddressEndpoint
	inspectorDelivery := e.receive(t, in.ID, domain.AddressInspector, "", full, 204)
	logDelivery := e.receive(t, logEp.ID, endpoint, ada.ID, full, 204)
	logPartial := e.receive(t, logEp.ID, endpoint, ada.ID, partial, 204)
	noAgentDelivery := e.receive(t, noAgent.ID, endpoint, ada.ID, full, 503)
	noAgentPartial := e.receive(t, noAgent.ID, endpoint, ada.ID, partial, 503)
	proxyPartial := e.receive(t, proxy.ID, endpoint, ada.ID, partial, 413)
	adasDelivery := e.receive(t, proxy.ID, endpoint, ada.ID, full, 503)
	goneDelivery := e.receive(t, gone.ID, endpoint, ada.ID, full, 503)
	if err := e.svc.DeleteEndpoint(ctx(t), ada.ID, "", gone.ID); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		account  string
		delivery string
		want     error
	}{
		{"inspector", ada.ID, inspectorDelivery, domain.ErrRetryNotProxy},
		{"LOG Endpoint", ada.ID, logDelivery, domain.ErrRetryNotProxy},
		{"LOG Endpoint, incomplete", ada.ID, logPartial, domain.ErrRetryNotProxy},
		{"no agent", ada.ID, noAgentDelivery, domain.ErrAgentNotConnected},
		{"no agent, incomplete", ada.ID, noAgentPartial, domain.ErrAgentNotConnected},
		{"incomplete", ada.ID, proxyPartial, domain.ErrPayloadIncomplete},
		{"unknown", ada.ID, commands.NewDeliveryID(), domain.ErrNotFound},
		{"malformed id", ada.ID, "../../etc", domain.ErrNotFound},
		{"another account's", bob.ID, adasDelivery, domain.ErrNotFound},
		{"no account", "", adasDelivery, domain.ErrNotFound},
		{"deleted Endpoint", ada.ID, goneDelivery, domain.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.lastPosition(t)
			got, err := e.svc.RetryDelivery(ctx(t), tc.account, tc.delivery, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("RetryDelivery = %+v, %v; want %v", got.ID, err, tc.want)
			}
			e.appended(t, before, 0, "a refused retry")
		})
	}
	for _, got := range agents {
		noWork(t, got)
	}
}

func TestRetryDelivery(t *testing.T) {
	for _, capture := range []bool{true, false} {
		name := "without response capture"
		if capture {
			name = "with response capture"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, defaultConfig())
			ada, _ := e.account(t, "Ada")
			set := proxySettings
			set.ResponseCapture = capture
			ep := e.endpoint(t, ada.ID, set)
			work := e.agent(t, ep.ID, ada.ID, answerPong)
			const target = "/hooks//new/?x=%2F&y"
			req := request(target, webhookBody, len(webhookBody))
			id := e.receive(t, ep.ID, domain.AddressEndpoint, ada.ID, req, 503)

			before := e.lastPosition(t)
			d, err := e.svc.RetryDelivery(ctx(t), ada.ID, id, nil)
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			cmd := takeWork(t, work)
			wantHeaders := []domain.Header{
				{Name: "Content-Type", Value: "application/json"}, {Name: "X-Multi", Value: "a"},
				{Name: "X-Multi", Value: "b"}, {Name: "X-Signature", Value: "sha256=abc"},
			}
			if cmd.DeliveryID != id || cmd.EndpointID != ep.ID || cmd.AccountID != ada.ID || cmd.Method != "POST" ||
				cmd.Target != target || !bytes.Equal(cmd.Body, webhookBody) || !slices.Equal(cmd.Headers, wantHeaders) ||
				cmd.CaptureResponse != capture || cmd.Timeout != e.cfg.ForwardTimeout || cmd.CorrelationID != id {
				t.Errorf("the agent got %+v", cmd)
			}

			// The returned delivery already shows the finished attempt.
			if len(d.Attempts) != 1 {
				t.Fatalf("attempts %+v, want one", d.Attempts)
			}
			a := d.Attempts[0]
			if a.ID != cmd.AttemptID || a.Status == nil || *a.Status != 200 || !a.Retry || a.Error != "" || a.DurationMs == nil {
				t.Errorf("attempt %+v with status %s, want the retry's 200", a, intp(a.Status))
			}
			if d.ResponseStatus == nil || *d.ResponseStatus != 200 {
				t.Errorf("responseStatus %s, want 200", intp(d.ResponseStatus))
			}
			wantBody := []byte(nil)
			if capture {
				wantBody = []byte("pong " + target)
			}
			if !bytes.Equal(d.ResponseBody, wantBody) || (d.ResponseBody == nil) != !capture {
				t.Errorf("responseBody %q, want %q", d.ResponseBody, wantBody)
			}

			// The log holds the retry, its forward and the outcome, in order
			// and linked to the delivery.
			recs, events := e.stream(t, domain.DeliveryStream(id))
			e.appended(t, before, 3, "retry")
			if len(events) != 4 {
				t.Fatalf("delivery stream holds %d events, want 4: %+v", len(events), events)
			}
			if got, want := events[1], (domain.RetryRequested{DeliveryID: id, AttemptID: cmd.AttemptID, AccountID: ada.ID}); got != want {
				t.Errorf("event 1 is %+v, want %+v", got, want)
			}
			if got, want := events[2], (domain.ForwardRequested{DeliveryID: id, AttemptID: cmd.AttemptID, EndpointID: ep.ID, Retry: true, Node: e.hub.Node()}); got != want {
				t.Errorf("event 2 is %+v, want %+v", got, want)
			}
			if r, ok := events[3].(domain.ForwardResponded); !ok || r.AttemptID != cmd.AttemptID || r.Status != 200 || r.Captured != capture {
				t.Errorf("event 3 is %+v, want the attempt's ForwardResponded", events[3])
			}
			for _, r := range recs[1:] {
				if r.Metadata.CorrelationID != id {
					t.Errorf("%s carries correlation %q, want %q", r.Type, r.Metadata.CorrelationID, id)
				}
			}
			if recs[2].Metadata.CausationID != recs[1].ID {
				t.Errorf("ForwardRequested caused by %q, want RetryRequested %q", recs[2].Metadata.CausationID, recs[1].ID)
			}

			// A second retry adds a second attempt after the first.
			d, err = e.svc.RetryDelivery(ctx(t), ada.ID, id, nil)
			if err != nil {
				t.Fatalf("second retry: %v", err)
			}
			second := takeWork(t, work)
			if len(d.Attempts) != 2 || d.Attempts[0].ID != cmd.AttemptID || d.Attempts[1].ID != second.AttemptID ||
				second.AttemptID == cmd.AttemptID || d.Attempts[1].StartedAt.Before(d.Attempts[0].StartedAt) {
				t.Errorf("attempts after a second retry: %+v", d.Attempts)
			}
		})
	}
}

func TestRetryDeliveryRecordsAFailedAttempt(t *testing.T) {
	e := newEnv(t, defaultConfig())
	ada, _ := e.account(t, "Ada")
	ep := e.endpoint(t, ada.ID, proxySettings)
	work := e.agent(t, ep.ID, ada.ID, answerPong)
	id := e.receive(t, ep.ID, domain.AddressEndpoint, ada.ID, request("/fail", webhookBody, len(webhookBody)), 0)

	d, err := e.svc.RetryDelivery(ctx(t), ada.ID, id, nil)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	cmd := takeWork(t, work)
	if len(d.Attempts) != 1 {
		t.Fatalf("attempts %+v, want one", d.Attempts)
	}
	a := d.Attempts[0]
	if a.ID != cmd.AttemptID || a.Status == nil || *a.Status != 502 || !strings.Contains(a.Error, "connection refused") {
		t.Errorf("attempt %+v with status %s, want a 502 naming the agent's error", a, intp(a.Status))
	}
	if d.ResponseStatus == nil || *d.ResponseStatus != 502 {
		t.Errorf("responseStatus %s, want 502", intp(d.ResponseStatus))
	}
	_, events := e.stream(t, domain.DeliveryStream(id))
	if f, ok := events[len(events)-1].(domain.ForwardFailed); !ok || f.AttemptID != cmd.AttemptID || f.Status != 502 {
		t.Errorf("last event %+v, want the attempt's ForwardFailed", events[len(events)-1])
	}
}

// takeWork returns the command the agent was given. The agent reports it
// before it answers, so it is there once RetryDelivery has returned.
func takeWork(t *testing.T, got <-chan domain.ForwardCommand) domain.ForwardCommand {
	t.Helper()
	select {
	case cmd := <-got:
		return cmd
	default:
		t.Fatal("RetryDelivery returned but the agent was given no work")
		return domain.ForwardCommand{}
	}
}

func intp(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}
