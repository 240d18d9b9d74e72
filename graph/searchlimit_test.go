package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/relayhq/relay/internal/testwait"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/secrets"
	"github.com/relayhq/relay/tunnel"
)

// stallingLog is the real store whose reads of delivery streams of the
// addresses in stall wait until release is closed, each announcing itself
// on entered first: a log read the test controls.
type stallingLog struct {
	domain.EventStore
	mu      sync.Mutex
	stall   map[string]bool // stream names
	entered chan string
	release chan struct{}
}

func (s *stallingLog) stallStream(stream string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall[stream] = true
}

func (s *stallingLog) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	s.mu.Lock()
	stall := s.stall[stream]
	s.mu.Unlock()
	if stall {
		select { // announced until released
		case s.entered <- stream:
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.EventStore.ReadStream(ctx, stream, from, max)
}

// searchEnv is the API over the real store and views, the views reading
// the log through a stallingLog.
type searchEnv struct {
	*env
	log *stallingLog
	res *graph.Resolver
}

func newSearchEnv(t *testing.T, limits graph.SearchLimits) *searchEnv {
	t.Helper()
	return newSearchEnvWith(t, limits, projections.Options{})
}

// newSearchEnvWith is newSearchEnv with the views opened with opts.
func newSearchEnvWith(t *testing.T, limits graph.SearchLimits, opts projections.Options) *searchEnv {
	t.Helper()
	return newSearchEnvViews(t, limits, opts, nil)
}

// newSearchEnvViews is newSearchEnvWith whose API reads the views through
// wrap's (when not nil).
func newSearchEnvViews(t *testing.T, limits graph.SearchLimits, opts projections.Options, wrap func(*projections.Runner) graph.Views) *searchEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stalling := &stallingLog{EventStore: store, stall: map[string]bool{}, entered: make(chan string), release: make(chan struct{})}
	codec := domain.NewCodec()
	opts.Codec = codec
	views, err := projections.Open(ctx, filepath.Join(dir, "views.db"), stalling, opts)
	if err != nil {
		t.Fatal(err)
	}
	viewsDone := make(chan struct{})
	go func() { _ = views.Run(ctx); close(viewsDone) }()
	rec := record.New(record.Config{Store: store, Codec: codec, Logger: log})
	hub := tunnel.NewHub(tunnel.HubConfig{Recorder: rec, Logger: log})
	keys, _, err := secrets.Generate()
	if err != nil {
		t.Fatal(err)
	}
	reads := &streamReads{EventStore: store}
	svc := commands.New(commands.Config{InspectorTTL: time.Hour, ForwardTimeout: time.Second, SignupOpen: true, Secrets: keys},
		reads, rec, views, hub, hub, log)
	counted := &countingLog{EventStore: store}
	var read graph.Views = views
	if wrap != nil {
		read = wrap(views)
	}
	res := &graph.Resolver{
		Service: svc, Views: read, Log: counted, Hub: hub, Logger: log, AdminToken: adminToken,
		PublicURL:    func(id string) string { return "http://" + id + ".localhost/" },
		SearchLimits: limits,
	}
	h := graph.NewHandler(res, graph.ServerOptions{})
	t.Cleanup(func() {
		cancel()
		hub.Close()
		<-viewsDone
		_ = views.Close()
		_ = store.Close()
	})
	return &searchEnv{env: &env{c: client.New(h), h: h, store: store, views: views, log: counted, reads: reads}, log: stalling, res: res}
}

// from sends a request as the client at addr.
func fromAddr(addr string) client.Option {
	return func(r *client.Request) { r.HTTP.RemoteAddr = addr + ":40000" }
}

// searchReply is a search's answer: its ids, or its refusal.
type searchReply struct {
	ids   []string
	cut   bool
	code  string
	retry float64
	err   error
}

func (r searchReply) String() string {
	return fmt.Sprintf("ids %v cut %v code %q retry %v err %v", r.ids, r.cut, r.code, r.retry, r.err)
}

const endpointSearch = `query($id: ID!, $f: DeliveryFilter) { endpoint(id: $id) { deliveries(first: 10, filter: $f) {
	nodes { id } searchCut } } }`
const inspectorSearch = `query($id: ID!, $f: DeliveryFilter) { inspector(id: $id) { deliveries(first: 10, filter: $f) {
	nodes { id } searchCut } } }`

// search runs query for address id with filter f and sorts out the answer.
func (e *searchEnv) search(query, id string, f map[string]any, opts ...client.Option) searchReply {
	resp, err := e.c.RawPost(query, append(opts, client.Var("id", id), client.Var("f", f))...)
	if err != nil {
		return searchReply{err: err}
	}
	return readSearch(id, resp.Data, resp.Errors)
}

// searchOver is search sent by a client of the server at url with the
// bearer token tok.
func searchOver(url, query, id string, f map[string]any, tok string) searchReply {
	body, err := json.Marshal(map[string]any{"query": query, "variables": map[string]any{"id": id, "f": f}})
	if err != nil {
		return searchReply{err: err}
	}
	req, err := http.NewRequest(http.MethodPost, url+"/graphql", bytes.NewReader(body))
	if err != nil {
		return searchReply{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return searchReply{err: err}
	}
	defer resp.Body.Close()
	var out struct {
		Data   json.RawMessage
		Errors json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return searchReply{err: fmt.Errorf("status %d: %w", resp.StatusCode, err)}
	}
	return readSearch(id, out.Data, out.Errors)
}

// readSearch sorts out the answer (data and errors) to a search of
// address id.
func readSearch(id string, data any, errors json.RawMessage) searchReply {
	resp := struct {
		Data   any
		Errors json.RawMessage
	}{data, errors}
	if len(resp.Errors) > 0 && string(resp.Errors) != "null" {
		var errs []struct {
			Extensions struct {
				Code              string  `json:"code"`
				RetryAfterSeconds float64 `json:"retryAfterSeconds"`
			} `json:"extensions"`
		}
		if jerr := json.Unmarshal(resp.Errors, &errs); jerr != nil || len(errs) == 0 {
			return searchReply{err: fmt.Errorf("errors %s", resp.Errors)}
		}
		return searchReply{code: errs[0].Extensions.Code, retry: errs[0].Extensions.RetryAfterSeconds, err: fmt.Errorf("errors %s", resp.Errors)}
	}
	raw, err := json.Marshal(resp.Data)
	if err != nil {
		return searchReply{err: err}
	}
	var out map[string]*struct {
		Deliveries struct {
			Nodes     []struct{ ID string }
			SearchCut bool
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return searchReply{err: err}
	}
	var r searchReply
	for _, v := range out {
		if v == nil {
			return searchReply{err: fmt.Errorf("address %s not found", id)}
		}
		for _, n := range v.Deliveries.Nodes {
			r.ids = append(r.ids, n.ID)
		}
		r.cut = v.Deliveries.SearchCut
	}
	return r
}

// endpointOf signs an account up and gives it an Endpoint with one
// delivery; it returns the token, the Endpoint and the delivery.
func (e *searchEnv) endpointOf(t *testing.T, name string) (tok, endpoint, delivery string) {
	t.Helper()
	tok = e.signUp(t, name)
	var me struct{ Me struct{ ID string } }
	e.c.MustPost(`{ me { id } }`, &me, bearerOpt(tok))
	var ep struct{ CreateEndpoint struct{ ID string } }
	e.c.MustPost(`mutation { createEndpoint(input: {name: "hooks", mode: LOG}) { id } }`, &ep, bearerOpt(tok))
	delivery = name + "-d1"
	e.receive(t, delivery, ep.CreateEndpoint.ID, domain.AddressEndpoint, me.Me.ID, true)
	return tok, ep.CreateEndpoint.ID, delivery
}

// inspector makes a guest inspector with one delivery.
func (e *searchEnv) inspector(t *testing.T, delivery string) string {
	t.Helper()
	var in struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &in)
	e.receive(t, delivery, in.CreateInspector.ID, domain.AddressInspector, "", true)
	return in.CreateInspector.ID
}

// stalled starts n searches whose log reads stall, and waits until each
// is inside one; their replies come on the channel once released.
func (e *searchEnv) stalled(t *testing.T, n int, run func() searchReply) <-chan searchReply {
	t.Helper()
	out := make(chan searchReply, n)
	for range n {
		go func() { out <- run() }()
	}
	for i := range n {
		select {
		case <-e.log.entered:
		case <-time.After(20 * time.Second): // a hang fails instead
			t.Fatalf("%d of %d stalled searches reached the log", i, n)
		}
	}
	return out
}

func wantLimited(t *testing.T, what string, r searchReply) {
	t.Helper()
	if r.code != "RATE_LIMITED" || r.retry < 1 {
		t.Fatalf("%s: %+v, want RATE_LIMITED with retryAfterSeconds", what, r)
	}
}

var bodySearch = map[string]any{"bodyContains": "{"}

// TestSearchesOfBodiesAreLimitedPerAccount: an account with
// DefaultSearchesPerKey body searches inside the log is refused one more,
// RATE_LIMITED with retryAfterSeconds, while another account searches and
// reads its history; once they end, it may search again.
func TestSearchesOfBodiesAreLimitedPerAccount(t *testing.T) {
	e := newSearchEnv(t, graph.SearchLimits{Global: 8})
	tokA, epA, dA := e.endpointOf(t, "ann")
	tokB, epB, dB := e.endpointOf(t, "bob")
	e.log.stallStream(domain.DeliveryStream(dA))

	held := e.stalled(t, graph.DefaultSearchesPerKey, func() searchReply { return e.search(endpointSearch, epA, bodySearch, bearerOpt(tokA)) })
	wantLimited(t, "one search past the account's limit", e.search(endpointSearch, epA, bodySearch, bearerOpt(tokA)))
	// Another account is not limited by it: its search, and its page.
	if r := e.search(endpointSearch, epB, bodySearch, bearerOpt(tokB)); r.err != nil || len(r.ids) != 1 || r.ids[0] != dB {
		t.Fatalf("the other account's search: %+v", r)
	}
	if r := e.search(endpointSearch, epB, nil, bearerOpt(tokB)); r.err != nil || len(r.ids) != 1 {
		t.Fatalf("the other account's page: %+v", r)
	}
	// A page the views answer alone has places of its own: the busy
	// searches of bodies do not refuse it.
	if r := e.search(endpointSearch, epA, map[string]any{"method": "POST"}, bearerOpt(tokA)); r.err != nil || len(r.ids) != 1 {
		t.Fatalf("a search of the views by the busy account: %+v", r)
	}
	close(e.log.release)
	for range graph.DefaultSearchesPerKey {
		if r := <-held; r.err != nil || len(r.ids) != 1 {
			t.Fatalf("a held search: %+v", r)
		}
	}
	if r := e.search(endpointSearch, epA, bodySearch, bearerOpt(tokA)); r.err != nil || len(r.ids) != 1 {
		t.Fatalf("a search after the others ended: %+v", r)
	}
}

// doorViews are the real views, except that the filtered pages of the
// addresses in hold wait at the views' door (before they take a views
// connection) until release is closed, each announcing itself on entered.
// inside counts each address's filtered pages between the door and their
// answer: those running or waiting for the views' search pool.
type doorViews struct {
	*projections.Runner
	mu      sync.Mutex
	hold    map[string]bool
	inside  map[string]int
	met     map[string]int // per address: the others' pages inside when its last came in
	entered chan string
	release chan struct{}
}

func newDoorViews() *doorViews {
	return &doorViews{hold: map[string]bool{}, inside: map[string]int{}, met: map[string]int{},
		entered: make(chan string, 64), release: make(chan struct{})}
}

func (d *doorViews) SearchDeliveries(ctx context.Context, address string, first int, after string, f readmodel.DeliveryFilter, payload bool) (readmodel.Page, error) {
	d.mu.Lock()
	held := d.hold[address]
	others := 0
	for a, n := range d.inside {
		if a != address {
			others += n
		}
	}
	d.met[address] = others
	d.inside[address]++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.inside[address]--
		d.mu.Unlock()
	}()
	if held {
		d.entered <- address
		select {
		case <-d.release:
		case <-ctx.Done():
			return readmodel.Page{}, ctx.Err()
		}
	}
	return d.Runner.SearchDeliveries(ctx, address, first, after, f, payload)
}

// othersMet is how many filtered pages of other addresses were inside the
// views when address's last one came in.
func (d *doorViews) othersMet(address string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.met[address]
}

// TestPagesFilteredByTheViewsAreLimitedPerAccount: a page filtered by what
// the views hold (method, status, path…) reads no log, but walks up to
// 100 000 deliveries on the views' search pool, which every account's
// filtered pages share. An account asking for 16 such pages at once over
// a real server gets DefaultSearchesPerKey of them into the views (held
// there by the test, as a long walk would hold them) and RATE_LIMITED for
// the rest, while another account's filtered page goes in behind no more
// than those and answers; once they end, the first may ask again.
func TestPagesFilteredByTheViewsAreLimitedPerAccount(t *testing.T) {
	door := newDoorViews()
	e := newSearchEnvViews(t, graph.SearchLimits{Global: 8}, projections.Options{}, func(v *projections.Runner) graph.Views {
		door.Runner = v
		return door
	})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	tokA, epA, _ := e.endpointOf(t, "ann")
	tokB, epB, dB := e.endpointOf(t, "bob")
	door.hold[epA] = true

	const asked = 16
	walk := map[string]any{"method": "DELETE"} // matches nothing: walks the whole window
	replies := make(chan searchReply, asked)
	for range asked {
		go func() { replies <- searchOver(srv.URL, endpointSearch, epA, walk, tokA) }()
	}
	// Each of ann's pages is either inside the views or answered (refused).
	in := 0
	var refused []searchReply
	for in+len(refused) < asked {
		select {
		case <-door.entered:
			in++
		case r := <-replies:
			refused = append(refused, r)
		case <-time.After(20 * time.Second): // a hang fails instead
			t.Fatalf("after 20 s, %d of ann's pages inside the views and %d answered, of %d", in, len(refused), asked)
		}
	}
	if r := searchOver(srv.URL, endpointSearch, epB, map[string]any{"method": "POST"}, tokB); r.err != nil || len(r.ids) != 1 || r.ids[0] != dB {
		t.Fatalf("bob's filtered page: %+v", r)
	}
	if met := door.othersMet(epB); in > graph.DefaultSearchesPerKey || met > graph.DefaultSearchesPerKey || len(refused) != asked-in {
		t.Errorf("%d of ann's %d filtered pages went into the views at once (%d refused); bob's page came in behind %d of them, want at most %d",
			in, asked, len(refused), met, graph.DefaultSearchesPerKey)
	}
	for _, r := range refused {
		wantLimited(t, "a filtered page past the account's limit", r)
	}
	close(door.release)
	for range in {
		if r := <-replies; r.err != nil || len(r.ids) != 0 {
			t.Fatalf("one of ann's pages let in: %+v", r)
		}
	}
	if r := searchOver(srv.URL, endpointSearch, epA, map[string]any{"method": "POST"}, tokA); r.err != nil || len(r.ids) != 1 {
		t.Fatalf("ann's page after the others ended: %+v", r)
	}
}

// TestInspectorSearchesAreLimitedPerAddress: anonymous searches of an
// inspector count against the client's address: one past the limit from
// that address is refused, another address searches.
func TestInspectorSearchesAreLimitedPerAddress(t *testing.T) {
	e := newSearchEnv(t, graph.SearchLimits{Global: 8})
	in := e.inspector(t, "guest-d1")
	e.log.stallStream(domain.DeliveryStream("guest-d1"))
	held := e.stalled(t, graph.DefaultSearchesPerKey, func() searchReply { return e.search(inspectorSearch, in, bodySearch, fromAddr("198.51.100.7")) })
	wantLimited(t, "one search past the address's limit", e.search(inspectorSearch, in, bodySearch, fromAddr("198.51.100.7")))
	// Another address gets its own share: it reaches the log (and stalls).
	other := e.stalled(t, 1, func() searchReply { return e.search(inspectorSearch, in, bodySearch, fromAddr("203.0.113.9")) })
	close(e.log.release)
	for range graph.DefaultSearchesPerKey + 1 {
		var r searchReply
		select {
		case r = <-held:
		case r = <-other:
		}
		if r.err != nil || len(r.ids) != 1 {
			t.Fatalf("a held search: %+v", r)
		}
	}
}

// TestSearchesOfBodiesShareAGlobalCap: with the global cap taken by one
// account's searches, another account's search of bodies waits for a turn
// (it does not reach the log) while its history page answers, and runs
// once one ends.
func TestSearchesOfBodiesShareAGlobalCap(t *testing.T) {
	e := newSearchEnv(t, graph.SearchLimits{Global: 2})
	tokA, epA, dA := e.endpointOf(t, "ann")
	tokB, epB, dB := e.endpointOf(t, "bob")
	e.log.stallStream(domain.DeliveryStream(dA))
	e.log.stallStream(domain.DeliveryStream(dB))
	held := e.stalled(t, 2, func() searchReply { return e.search(endpointSearch, epA, bodySearch, bearerOpt(tokA)) })
	waiting := make(chan searchReply, 1)
	go func() { waiting <- e.search(endpointSearch, epB, bodySearch, bearerOpt(tokB)) }()
	// The third is admitted and waits for a turn: with the cap broken it
	// would run, reach the stalled log, and never be counted as waiting.
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if n := e.res.SearchesWaiting(); n != 1 {
			return fmt.Errorf("%d searches wait for a global turn, want 1", n)
		}
		return nil
	})
	if r := e.search(endpointSearch, epB, nil, bearerOpt(tokB)); r.err != nil || len(r.ids) != 1 {
		t.Fatalf("the other account's page: %+v", r)
	}
	select {
	case s := <-e.log.entered:
		t.Fatalf("a third search read the log (%s) past a global cap of 2", s)
	case r := <-waiting:
		t.Fatalf("the waiting search answered without its turn: %+v", r)
	default:
	}
	close(e.log.release)
	for range 2 {
		if r := <-held; r.err != nil || len(r.ids) != 1 {
			t.Fatalf("a held search: %+v", r)
		}
	}
	if r := <-waiting; r.err != nil || len(r.ids) != 1 || r.ids[0] != dB {
		t.Fatalf("the waiting search: %+v", r)
	}
}

// TestSearchesOfBodiesAreLimitedPerMinute: past its burst an account is
// refused until its bucket refills, retryAfterSeconds saying when; another
// account is not.
func TestSearchesOfBodiesAreLimitedPerMinute(t *testing.T) {
	rate := ratelimit.Rate{N: 2, Per: time.Minute, Burst: 3}
	e := newSearchEnv(t, graph.SearchLimits{Rate: rate})
	tokA, epA, _ := e.endpointOf(t, "ann")
	tokB, epB, _ := e.endpointOf(t, "bob")
	for i := range rate.Burst {
		if r := e.search(endpointSearch, epA, bodySearch, bearerOpt(tokA)); r.err != nil || len(r.ids) != 1 {
			t.Fatalf("search %d within the burst: %+v", i, r)
		}
	}
	r := e.search(endpointSearch, epA, bodySearch, bearerOpt(tokA))
	wantLimited(t, "a search past the burst", r)
	if r.retry < 20 || r.retry > 30 { // one search every 30 s
		t.Fatalf("retryAfterSeconds %v, want about 30", r.retry)
	}
	if r := e.search(endpointSearch, epB, bodySearch, bearerOpt(tokB)); r.err != nil || len(r.ids) != 1 {
		t.Fatalf("the other account: %+v", r)
	}
}

// TestBodySearchCutByItsBudget: a page whose byte budget runs out says so
// (searchCut), continues (hasNextPage, endCursor), and its pages together
// list every match once, newest first.
func TestBodySearchCutByItsBudget(t *testing.T) {
	e := newSearchEnvWith(t, graph.SearchLimits{}, projections.Options{SearchLogBytes: 1}) // one candidate a page
	tok, ep, first := e.endpointOf(t, "ann")
	var me struct{ Me struct{ ID string } }
	e.c.MustPost(`{ me { id } }`, &me, bearerOpt(tok))
	want := []string{"ann-d3", "ann-d2", first}
	e.receive(t, want[1], ep, domain.AddressEndpoint, me.Me.ID, true)
	e.receive(t, want[0], ep, domain.AddressEndpoint, me.Me.ID, true)
	var got []string
	var after *string
	for page := 0; ; page++ {
		if page > len(want) {
			t.Fatalf("still paging after %d pages: %v", page, got)
		}
		var out struct {
			Endpoint struct {
				Deliveries struct {
					Nodes     []struct{ ID string }
					SearchCut bool
					PageInfo  struct {
						HasNextPage bool
						EndCursor   *string
					}
				}
			}
		}
		e.c.MustPost(`query($id: ID!, $after: String) { endpoint(id: $id) { deliveries(first: 10, after: $after, filter: {bodyContains: "{"}) {
			nodes { id } searchCut pageInfo { hasNextPage endCursor } } } }`, &out, bearerOpt(tok), client.Var("id", ep), client.Var("after", after))
		d := out.Endpoint.Deliveries
		for _, n := range d.Nodes {
			got = append(got, n.ID)
		}
		if page < len(want)-1 && (!d.SearchCut || !d.PageInfo.HasNextPage || len(d.Nodes) != 1) {
			t.Fatalf("page %d: %+v, want one match, searchCut and a next page", page, d)
		}
		if !d.PageInfo.HasNextPage {
			if d.SearchCut {
				t.Fatalf("the last page says it was cut: %+v", d)
			}
			break
		}
		after = d.PageInfo.EndCursor
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("found %v, want %v", got, want)
	}
}
