package systemtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/systemtest/harness"
)

const endpointFields = `id name url mode target responseCapture agentConnected`

// proxiedFields are the delivery fields plus what a forward adds.
const proxiedFields = deliveryFields + ` responseHeaders{name value} responseBody attempts{ id status durationMs error retry startedAt }`

// tenant is a signed-up account and its token.
type tenant struct{ ID, Name, Token string }

type endpointInfo struct {
	ID              string
	Name            string
	URL             string
	Mode            string
	Target          *string
	ResponseCapture bool
	AgentConnected  bool
}

// proxied is a delivery of an Endpoint, with the answer that was passed
// back and its attempts in full (this Attempts shadows delivery's).
type proxied struct {
	delivery
	ResponseHeaders []header
	Attempts        []attempt
}

type attempt struct {
	ID         string
	Status     *int
	StartedAt  time.Time
	DurationMs *int
	Error      *string
	Retry      bool
}

type logEvent struct {
	ID            string
	Position      string
	Type          string
	Stream        string
	CorrelationID *string
	CausationID   *string
	Data          string
}

func signUpTenant(t *testing.T, r *harness.Relay, name string) tenant {
	t.Helper()
	var out struct {
		SignUp struct {
			Token   string
			Account struct{ ID, Name string }
		}
	}
	r.MustGraphQL(t, "", `mutation($n: String!){ signUp(name: $n){ token account{ id name } } }`, map[string]any{"n": name}, &out)
	if out.SignUp.Token == "" || out.SignUp.Account.ID == "" {
		t.Fatalf("signUp gave no token or account: %+v", out)
	}
	return tenant{ID: out.SignUp.Account.ID, Name: out.SignUp.Account.Name, Token: out.SignUp.Token}
}

func createEndpointFor(t *testing.T, r *harness.Relay, token string, input map[string]any) endpointInfo {
	t.Helper()
	var out struct{ CreateEndpoint endpointInfo }
	r.MustGraphQL(t, token, `mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ `+endpointFields+` } }`,
		map[string]any{"in": input}, &out)
	return out.CreateEndpoint
}

func proxyEndpoint(t *testing.T, r *harness.Relay, token, target string, capture bool) endpointInfo {
	t.Helper()
	return createEndpointFor(t, r, token, map[string]any{"name": "proxy " + target, "mode": "PROXY", "target": target, "responseCapture": capture})
}

// endpointByID reads endpoint(id); nil when the API answers null.
func endpointByID(t *testing.T, r *harness.Relay, token, id string) *endpointInfo {
	t.Helper()
	var out struct{ Endpoint *endpointInfo }
	r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ `+endpointFields+` } }`, map[string]any{"id": id}, &out)
	return out.Endpoint
}

// waitAgent polls endpoint(id){agentConnected} until it is want.
func waitAgent(t *testing.T, r *harness.Relay, token, id string, want bool) {
	t.Helper()
	harness.Eventually(t, 15*time.Second, "agentConnected to be "+map[bool]string{true: "true", false: "false"}[want], func() bool {
		ep := endpointByID(t, r, token, id)
		return ep != nil && ep.AgentConnected == want
	})
}

// waitSessionsEnded polls the account's events until the log holds an
// agent session of Endpoint id, and an end for every one that started.
// agentConnected turns false once the session's end is appended, but a 503
// the relay answered on its own before that (an attempt in flight when the
// agent died) is recorded before the end; the events are read through the
// views, in the transaction that applies the end to the sessions an
// explanation reads.
func waitSessionsEnded(t *testing.T, r *harness.Relay, token, id string) {
	t.Helper()
	harness.Eventually(t, 15*time.Second, "the log to hold the end of every agent session of "+id, func() bool {
		started, ended := 0, 0
		for _, typ := range streamTypes(logEvents(t, r, token), "agent-"+id) {
			switch typ {
			case "agent.connected.v1":
				started++
			case "agent.disconnected.v1":
				ended++
			}
		}
		return started > 0 && ended == started
	})
}

// startAgentFor runs a real agent for an Endpoint and waits until the relay
// counts it as connected.
func startAgentFor(t *testing.T, r *harness.Relay, token, endpointID, target string) *harness.Agent {
	t.Helper()
	a := r.StartAgent(t, token, endpointID, target)
	waitAgent(t, r, token, endpointID, true)
	return a
}

// endpointHistory reads an Endpoint's whole history, newest first.
func endpointHistory(t *testing.T, r *harness.Relay, token, id string) []proxied {
	t.Helper()
	var all []proxied
	var after any
	for {
		var out struct {
			Endpoint *struct {
				Deliveries struct {
					Nodes    []proxied
					PageInfo struct {
						HasNextPage bool
						EndCursor   *string
					}
				}
			}
		}
		// A row of proxiedFields costs 1127 points: pages of 8 fit the default budget.
		r.MustGraphQL(t, token, `query($id: ID!, $after: String){ endpoint(id: $id){ deliveries(first: 8, after: $after){
			nodes{ `+proxiedFields+` } pageInfo{ hasNextPage endCursor } } } }`, map[string]any{"id": id, "after": after}, &out)
		if out.Endpoint == nil {
			t.Fatalf("endpoint %s is null", id)
		}
		all = append(all, out.Endpoint.Deliveries.Nodes...)
		p := out.Endpoint.Deliveries.PageInfo
		if !p.HasNextPage || p.EndCursor == nil {
			return all
		}
		after = *p.EndCursor
	}
}

// deliveryAt returns the newest delivery of an Endpoint sent to path, once
// its answer is recorded: the sender is answered after the append, but the
// history view catches up on its own schedule.
func deliveryAt(t *testing.T, r *harness.Relay, token, endpointID, path string) proxied {
	t.Helper()
	var found proxied
	harness.Eventually(t, 10*time.Second, "an answered delivery to "+path+" in the history of "+endpointID, func() bool {
		for _, d := range endpointHistory(t, r, token, endpointID) {
			if d.Path == path {
				found = d
				return d.ResponseStatus != nil
			}
		}
		return false
	})
	return found
}

// deliveryByID reads delivery(id); nil when the API answers null.
func deliveryByID(t *testing.T, r *harness.Relay, token, id string) *proxied {
	t.Helper()
	var out struct{ Delivery *proxied }
	r.MustGraphQL(t, token, `query($id: ID!){ delivery(id: $id){ `+proxiedFields+` } }`, map[string]any{"id": id}, &out)
	return out.Delivery
}

// logEvents pages through the whole event log.
func logEvents(t *testing.T, r *harness.Relay, token string) []logEvent {
	t.Helper()
	var all []logEvent
	var after any
	for {
		var out struct {
			Events struct {
				Nodes    []logEvent
				PageInfo struct {
					HasNextPage bool
					EndCursor   *string
				}
			}
		}
		// An event with data costs 349 points: pages of 25 fit the default budget.
		r.MustGraphQL(t, token, `query($after: String){ events(after: $after, first: 25){
			nodes{ id position type stream correlationId causationId data } pageInfo{ hasNextPage endCursor } } }`,
			map[string]any{"after": after}, &out)
		all = append(all, out.Events.Nodes...)
		p := out.Events.PageInfo
		if !p.HasNextPage || p.EndCursor == nil {
			return all
		}
		after = *p.EndCursor
	}
}

// streamTypes lists the event types of one stream, in log order.
func streamTypes(events []logEvent, stream string) []string {
	var out []string
	for _, e := range events {
		if e.Stream == stream {
			out = append(out, e.Type)
		}
	}
	return out
}

// refusal runs an operation expected to be refused and returns its first error.
func refusal(t *testing.T, r *harness.Relay, token, query string, vars map[string]any) harness.GQLError {
	t.Helper()
	res := r.GraphQL(t, token, query, vars)
	if len(res.Errors) == 0 {
		t.Fatalf("expected a refusal, got data %s\nquery: %s", res.Data, query)
	}
	return res.Errors[0]
}

// localTarget starts a real HTTP server on 127.0.0.1 and returns its
// host:port, the form an Endpoint's target and an agent's --target take.
func localTarget(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// send writes one request byte for byte to an address of the relay.
func send(t *testing.T, r *harness.Relay, address, method, target string, headers [][2]string, body []byte) harness.Response {
	t.Helper()
	return r.SendRaw(t, harness.RawRequest{Method: method, Target: target, Host: r.AddressHost(address), Headers: headers, Body: body})
}

// unknownAddress is a well-formed address id that names nothing.
func unknownAddress() string { return "zzzzzzzzzzzzzzzz" }

// unknownDelivery is a well-formed delivery id that names nothing.
func unknownDelivery() string { return uuid.NewString() }

// seenRequest is what a local handler got.
type seenRequest struct {
	Method     string
	RequestURI string
	Header     http.Header
	Body       []byte
}

// requestLog collects what a local handler got, safely across goroutines.
type requestLog struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (l *requestLog) add(r *http.Request, body []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, seenRequest{Method: r.Method, RequestURI: r.RequestURI, Header: r.Header.Clone(), Body: body})
}

func (l *requestLog) all() []seenRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seenRequest(nil), l.seen...)
}

func (l *requestLog) last(t *testing.T) seenRequest {
	t.Helper()
	all := l.all()
	if len(all) == 0 {
		t.Fatalf("the local handler got no request")
	}
	return all[len(all)-1]
}

func intp(p *int) string {
	if p == nil {
		return "null"
	}
	b, _ := json.Marshal(*p)
	return string(b)
}

// attemptStatuses lists the attempts' statuses in order (0 for none).
func attemptStatuses(d proxied) []int {
	out := make([]int, 0, len(d.Attempts))
	for _, a := range d.Attempts {
		s := 0
		if a.Status != nil {
			s = *a.Status
		}
		out = append(out, s)
	}
	return out
}

// proxyRig is a relay with one account, one PROXY Endpoint, a local server
// and a connected agent forwarding to it.
type proxyRig struct {
	r      *harness.Relay
	acct   tenant
	ep     endpointInfo
	target string
	agent  *harness.Agent
}

func startProxyRig(t *testing.T, h http.Handler, capture bool, flags ...string) *proxyRig {
	t.Helper()
	r := harness.Start(t, "", flags...)
	acct := signUpTenant(t, r, "owner")
	target := localTarget(t, h)
	ep := proxyEndpoint(t, r, acct.Token, target, capture)
	a := startAgentFor(t, r, acct.Token, ep.ID, target)
	return &proxyRig{r: r, acct: acct, ep: ep, target: target, agent: a}
}

func (p *proxyRig) send(t *testing.T, method, target string, headers [][2]string, body []byte) harness.Response {
	t.Helper()
	return send(t, p.r, p.ep.ID, method, target, headers, body)
}

func strp(p *string) string {
	if p == nil {
		return "null"
	}
	return strconv.Quote(*p)
}

// answerEvent is the data of the recorded local answer among a delivery
// stream's events: inside the receipt (`forward.responded`, when the agent
// answered within the receipt's hold) or a forward.responded.v1 of its own.
// inReceipt tells which; ok is false when there is none.
func answerEvent(t *testing.T, events []logEvent) (data json.RawMessage, inReceipt, ok bool) {
	t.Helper()
	for _, e := range events {
		switch e.Type {
		case "forward.responded.v1":
			return json.RawMessage(e.Data), false, true
		case "delivery.received.v1":
			var r struct {
				Forward *struct {
					Responded json.RawMessage `json:"responded"`
				} `json:"forward"`
			}
			if err := json.Unmarshal([]byte(e.Data), &r); err != nil {
				t.Fatalf("receipt %s: %v", e.Data, err)
			}
			if r.Forward != nil && len(r.Forward.Responded) > 0 {
				return r.Forward.Responded, true, true
			}
		}
	}
	return nil, false, false
}
