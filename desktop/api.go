package desktop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/relayhq/relay/apiclient"
)

// The GraphQL documents the window needs; field names follow
// schema.graphqls and the console's api.js, whose detail pane renders the
// delivery. Like the console, the window asks for no attempt's stored
// answer: the pane shows the latest one (the delivery's response fields)
// and the relay compares attempts, so the answer stays one body however
// many attempts a delivery has.
const (
	qMe            = `{ me{ id name } }`
	endpointFields = `id name url mode target agentConnected agentCount filters{ text } answer{ status } handshakes{ enabled } queue{ queued inFlight dead }`
	qCreate        = `mutation($input: CreateEndpointInput!){ createEndpoint(input: $input){ ` + endpointFields + ` } }`

	deliveryFields = `id cursor address method path bodySize complete bodyUnread receivedAt responseStatus
  attempts { id status startedAt durationMs error retry late queued possibleDuplicate signature fidelity { status differences }
    edit { method path unsetHeaders setHeaders { name value } bodyBase64 } }
  provider { name eventType deliveryId } duplicates
  headers { name value } body bodyBase64 responseHeaders { name value } responseBody responseNotCaptured
  why { status summary facts { at text } }`
	qDelivery = `query($id: ID!){ delivery(id: $id){ ` + deliveryFields + ` } }`
	qRetry    = `mutation($id: ID!, $edit: RequestEditInput){ retryDelivery(id: $id, edit: $edit){ ` + deliveryFields + ` } }`
	// qCompare is the relay's comparison of two attempts, which the
	// console's detail pane renders.
	qCompare = `query($id: ID!, $a: String!, $b: String!){ delivery(id: $id){ id compare(a: $a, b: $b){
  request { where before after } response { where before after } responseCompared note } } }`
)

// Account is the signed-in account.
type Account struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Endpoint as the window lists it: the relay's view plus this agent's
// route for it.
type Endpoint struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	URL            string `json:"url"`
	Mode           string `json:"mode"`
	Target         string `json:"target"` // the relay's stored target, a default for the local one
	AgentConnected bool   `json:"agentConnected"`
	AgentCount     int    `json:"agentCount"`
	// Filters, Answer and Handshakes are the Endpoint's routing as the
	// relay applies it, shown on its card.
	Filters []struct {
		Text string `json:"text"`
	} `json:"filters"`
	Answer *struct {
		Status int `json:"status"`
	} `json:"answer"`
	Handshakes *struct {
		Enabled []string `json:"enabled"`
	} `json:"handshakes"`
	// Queue is a QUEUE Endpoint's depth (null in the other modes).
	Queue *struct {
		Queued   int `json:"queued"`
		InFlight int `json:"inFlight"`
		Dead     int `json:"dead"`
	} `json:"queue"`

	LocalTarget string `json:"localTarget"` // what this agent forwards to
	Serving     bool   `json:"serving"`     // this agent's switch is on
}

// errNoAccount is a token the relay does not know.
var errNoAccount = errors.New("the relay does not know this token")

// API is the relay's GraphQL API for one signed-in account.
type API struct{ c *apiclient.Client }

func newAPI(server, token string) API {
	return API{c: &apiclient.Client{Server: server, Token: token, HTTP: httpClient}}
}

// httpClient bounds every call, so a relay that accepts and never answers
// cannot hang the window.
var httpClient = &http.Client{Timeout: 30 * time.Second}

func (a API) me(ctx context.Context) (Account, error) {
	var out struct{ Me *Account }
	if err := a.c.Do(ctx, qMe, nil, &out); err != nil {
		return Account{}, err
	}
	if out.Me == nil {
		return Account{}, errNoAccount
	}
	return *out.Me, nil
}

// endpoints is all of the account's Endpoints, page by page
// (apiclient.Endpoints).
func (a API) endpoints(ctx context.Context) ([]Endpoint, error) {
	return apiclient.Endpoints(ctx, a.c, endpointFields, func(e Endpoint) string { return e.ID })
}

func (a API) createEndpoint(ctx context.Context, name, target string) (Endpoint, error) {
	input := map[string]any{"name": name, "mode": "PROXY"}
	if target != "" {
		input["target"] = target
	}
	var out struct{ CreateEndpoint Endpoint }
	if err := a.c.Do(ctx, qCreate, map[string]any{"input": input}, &out); err != nil {
		return Endpoint{}, err
	}
	return out.CreateEndpoint, nil
}

// delivery returns the delivery as the console's detail pane reads it.
func (a API) delivery(ctx context.Context, id string) (json.RawMessage, error) {
	var out struct{ Delivery json.RawMessage }
	if err := a.c.Do(ctx, qDelivery, map[string]any{"id": id}, &out); err != nil {
		return nil, err
	}
	if len(out.Delivery) == 0 || string(out.Delivery) == "null" {
		return nil, fmt.Errorf("delivery %s: not found", id)
	}
	return out.Delivery, nil
}

// compare is the relay's comparison (Delivery.compare) of two sides of a
// delivery, as the API answers it.
func (a API) compare(ctx context.Context, id, sideA, sideB string) (json.RawMessage, error) {
	var out struct {
		Delivery *struct{ Compare json.RawMessage }
	}
	if err := a.c.Do(ctx, qCompare, map[string]any{"id": id, "a": sideA, "b": sideB}, &out); err != nil {
		return nil, err
	}
	if out.Delivery == nil {
		return nil, fmt.Errorf("delivery %s: not found", id)
	}
	return out.Delivery.Compare, nil
}

// statsFields is what a card's chart draws of each Endpoint: its last
// hour as the relay computes it (Endpoint.stats).
// graph.TestDesktopStatsPagesFitTheBudget prices a page of statsPage rows.
const statsFields = `id stats(range: HOUR){ bucketSeconds
	totals{ deliveries status2xx status4xx status5xx pending p50Ms p95Ms }
	buckets{ start deliveries status4xx status5xx } }`

// statsPage is how many Endpoints' stats one request reads. A row's stats
// weigh 850 points whatever they select, 1 101 with what a card's chart
// selects (60 buckets of four fields and seven totals): nine rows cost
// 9 910, the most under the relay's default --max-query-cost of 10 000. A
// relay with a lower budget is asked for smaller pages
// (apiclient.EndpointsIn).
const statsPage = 9

// stats reads the last hour of the Endpoints ids names (a run of the
// endpoints list, in its order, listed right after the Endpoint after;
// empty: the run begins the list) for the charts on their cards,
// statsPage Endpoints a request, one request at a time. It returns each
// one's stats by id, those read before a page failed with its error.
func (a API) stats(ctx context.Context, after string, ids []string) (map[string]json.RawMessage, error) {
	type row struct {
		ID    string          `json:"id"`
		Stats json.RawMessage `json:"stats"`
	}
	rows, err := apiclient.EndpointsIn(ctx, a.c, statsFields, after, ids, statsPage, func(r row) string { return r.ID })
	out := make(map[string]json.RawMessage, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Stats
	}
	return out, err
}

// retry asks the relay to send the delivery again (a new attempt through a
// connected agent), changed by edit (a RequestEditInput; null or empty: as
// recorded), and returns the delivery with it.
func (a API) retry(ctx context.Context, id string, edit json.RawMessage) (json.RawMessage, error) {
	vars := map[string]any{"id": id}
	if len(edit) > 0 && string(edit) != "null" {
		vars["edit"] = edit
	}
	var out struct{ RetryDelivery json.RawMessage }
	if err := a.c.Do(ctx, qRetry, vars, &out); err != nil {
		return nil, err
	}
	return out.RetryDelivery, nil
}
