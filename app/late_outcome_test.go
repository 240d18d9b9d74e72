package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/testwait"
)

// stallingStore holds every append that carries a forward.responded.v1
// until release is closed: the outcome's append stalls as it did during a
// JetStream leader election.
type stallingStore struct {
	domain.EventStore
	release chan struct{}
	once    sync.Once
	stalled chan struct{} // closed when the first append stalls
}

func (s *stallingStore) Append(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (domain.AppendResult, error) {
	for _, e := range events {
		if e.Type == domain.TypeForwardResponded {
			s.once.Do(func() { close(s.stalled) })
			select {
			case <-s.release:
			case <-ctx.Done():
				return domain.AppendResult{}, ctx.Err()
			}
			break
		}
	}
	return s.EventStore.Append(ctx, stream, expected, events...)
}

// TestLateOutcomeKeepsTheSendersAnswer: the local process answers 200, but
// the append of that outcome stalls past the forward timeout, so the relay
// answers the sender 504 itself. When the outcome lands afterwards, the
// delivery still says 504 (what the sender got), and the local answer is
// its attempt's, marked late.
func TestLateOutcomeKeepsTheSendersAnswer(t *testing.T) {
	stall := &stallingStore{release: make(chan struct{}), stalled: make(chan struct{})}
	srv, token, id := proxyWithAgent(t, func(s domain.EventStore) domain.EventStore { stall.EventStore = s; return stall })

	if status, _ := sendHook(t, srv, id); status != http.StatusGatewayTimeout {
		t.Fatalf("the sender got %d, want 504 while the outcome's append stalls", status)
	}
	select {
	case <-stall.stalled:
	default:
		t.Fatal("the outcome's append never stalled")
	}
	close(stall.release)

	var d historyRow
	testwait.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		n := history(t, srv, token, id)
		if len(n) == 1 && len(n[0].Attempts) == 1 && n[0].Attempts[0].Status != nil {
			d = n[0]
			return nil
		}
		return fmt.Errorf("the late outcome is not in the history yet: %+v", n)
	})
	if d.ResponseStatus == nil || *d.ResponseStatus != http.StatusGatewayTimeout {
		got := "null"
		if d.ResponseStatus != nil {
			got = fmt.Sprint(*d.ResponseStatus)
		}
		t.Errorf("responseStatus %s, want 504: what the sender was answered", got)
	}
	if a := d.Attempts[0]; *a.Status != http.StatusOK || !a.Late {
		t.Errorf("attempt %d late=%v, want the local 200, late", *a.Status, a.Late)
	}
	// The explanation says the relay answered 504 itself, and that the
	// local 200 came too late.
	for _, want := range []string{"Answered 504 by the relay at ", "no outcome of the forward reached it within --forward-timeout and 5 s more",
		"Your local process answered 200", "late: the relay had already answered the sender itself"} {
		if !strings.Contains(d.Explanation, want) {
			t.Errorf("explanation\n%s\ndoes not say %q", d.Explanation, want)
		}
	}
}

// refusingStore refuses the first append that carries a
// forward.responded.v1, as a store that stayed away past the outcome's
// bound does.
type refusingStore struct {
	domain.EventStore
	refused atomic.Bool
}

func (s *refusingStore) Append(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (domain.AppendResult, error) {
	for _, e := range events {
		if e.Type == domain.TypeForwardResponded && s.refused.CompareAndSwap(false, true) {
			return domain.AppendResult{}, errors.New("JetStream system temporarily unavailable")
		}
	}
	return s.EventStore.Append(ctx, stream, expected, events...)
}

// TestRefusedOutcomeIsAnsweredStoreUnavailable: the local process answers
// 200, but the log refuses that outcome. The sender is told 503 "store
// unavailable" (retry later), neither the 200 the log does not hold nor a
// 504 saying no answer came; that answer is recorded, and explained.
func TestRefusedOutcomeIsAnsweredStoreUnavailable(t *testing.T) {
	refusing := &refusingStore{}
	srv, token, id := proxyWithAgent(t, func(s domain.EventStore) domain.EventStore { refusing.EventStore = s; return refusing })

	status, body := sendHook(t, srv, id)
	if !refusing.refused.Load() {
		t.Fatal("no append of the outcome was refused")
	}
	if status != http.StatusServiceUnavailable || body != "No agent for client\nstore unavailable\n" {
		t.Fatalf("the sender got %d %q, want 503 store unavailable", status, body)
	}
	testwait.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		n := history(t, srv, token, id)
		if len(n) != 1 || n[0].ResponseStatus == nil || *n[0].ResponseStatus != http.StatusServiceUnavailable {
			return fmt.Errorf("the relay's 503 is not in the history yet: %+v", n)
		}
		for _, want := range []string{"Answered 503 by the relay", "store unavailable", "did not take its outcome", "JetStream system temporarily unavailable"} {
			if !strings.Contains(n[0].Explanation, want) {
				return fmt.Errorf("explanation\n%s\ndoes not say %q", n[0].Explanation, want)
			}
		}
		return nil
	})
}

// proxyWithAgent starts a relay on a store wrap wraps, with a PROXY Endpoint
// whose agent (in process) forwards to a local process answering 200 "ok".
func proxyWithAgent(t *testing.T, wrap func(domain.EventStore) domain.EventStore) (srv *httptest.Server, token, id string) {
	t.Helper()
	a, err := app.New(t.Context(), app.Config{
		Data:           t.TempDir(),
		Ingress:        ingress.Config{ForwardTimeout: 200 * time.Millisecond},
		RetentionSweep: time.Hour, InspectorRetention: time.Hour,
		Commands:  commands.Config{SignupOpen: true},
		PublicURL: func(id string) string { return "http://" + id + ".localhost/" },
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		WrapStore: wrap,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	srv = httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(local.Close)

	var up struct{ SignUp struct{ Token string } }
	gql(t, srv.URL, "", `mutation{ signUp(name: "late"){ token } }`, nil, &up)
	token = up.SignUp.Token
	target := strings.TrimPrefix(local.URL, "http://")
	var ep struct{ CreateEndpoint struct{ ID string } }
	gql(t, srv.URL, token, `mutation($t: String!){ createEndpoint(input: {name: "late", mode: PROXY, target: $t}){ id } }`,
		map[string]any{"t": target}, &ep)
	id = ep.CreateEndpoint.ID

	ctx, cancel := context.WithCancel(t.Context())
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- agentcli.Serve(ctx, agentcli.Options{Server: srv.URL, Token: token,
			Endpoints: []agentcli.Route{{EndpointID: id, Target: target}}})
	}()
	t.Cleanup(func() { cancel(); <-agentDone })
	testwait.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var out struct{ Endpoint struct{ AgentConnected bool } }
		gql(t, srv.URL, token, `query($id: ID!){ endpoint(id: $id){ agentConnected } }`, map[string]any{"id": id}, &out)
		if !out.Endpoint.AgentConnected {
			return fmt.Errorf("agent not connected yet")
		}
		return nil
	})
	return srv, token, id
}

// sendHook posts "{}" to /hook on the Endpoint id, as its sender would,
// and returns what the sender got.
func sendHook(t *testing.T, srv *httptest.Server, id string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/hook", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = id + ".localhost"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// historyRow is what these tests read of a delivery in the history.
type historyRow struct {
	ResponseStatus *int
	Attempts       []struct {
		Status *int
		Late   bool
	}
	Explanation string
}

// history reads the Endpoint id's deliveries.
func history(t *testing.T, srv *httptest.Server, token, id string) []historyRow {
	t.Helper()
	var out struct {
		Endpoint struct{ Deliveries struct{ Nodes []historyRow } }
	}
	gql(t, srv.URL, token, `query($id: ID!){ endpoint(id: $id){ deliveries{ nodes{ responseStatus attempts{ status late } explanation } } } }`,
		map[string]any{"id": id}, &out)
	return out.Endpoint.Deliveries.Nodes
}

// gql posts one GraphQL operation to the relay at base (the bare domain).
func gql(t testing.TB, base, token, query string, vars map[string]any, out any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "localhost"
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatalf("%s: decode: %v", query, err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("%s: %+v", query, res.Errors)
	}
	if err := json.Unmarshal(res.Data, out); err != nil {
		t.Fatal(err)
	}
}
