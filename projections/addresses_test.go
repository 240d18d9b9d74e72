package projections

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

func TestInspectorExpiresAtMovesWithEachDelivery(t *testing.T) {
	e := newEnv(t, Options{})
	e.do(e.newInspector(e.ctx, "insp-1", time.Hour, t0))
	tests := []struct {
		name         string
		receivedAt   time.Time
		lastActivity time.Time
	}{
		{"before any request", time.Time{}, t0},
		{"first request", t0.Add(10 * time.Minute), t0.Add(10 * time.Minute)},
		{"an older request does not move it back", t0.Add(5 * time.Minute), t0.Add(10 * time.Minute)},
		{"a later request", t0.Add(30 * time.Minute), t0.Add(30 * time.Minute)},
	}
	for i, tc := range tests {
		if !tc.receivedAt.IsZero() {
			e.do(e.receive(e.ctx, "d-"+string(rune('a'+i)), "insp-1", domain.AddressInspector, "", request("/", ""), tc.receivedAt))
		}
		in, err := e.views.Inspector(e.ctx, "insp-1")
		if err != nil {
			t.Fatal(err)
		}
		want := readmodel.Inspector{ID: "insp-1", CreatedAt: t0, LastActivityAt: tc.lastActivity, ExpiresAt: tc.lastActivity.Add(time.Hour), TTL: time.Hour}
		// Its own stream (its creation) counts from the start, its
		// deliveries with them.
		if own := logBytesOf(t, e, domain.InspectorStream("insp-1")); own == 0 || (in.StoredBytes > own) != (i > 0) {
			t.Errorf("%s: stored bytes %d, its own stream's %d", tc.name, in.StoredBytes, own)
		}
		want.StoredBytes = in.StoredBytes
		if in != want {
			t.Errorf("%s: inspector = %+v\nwant %+v", tc.name, in, want)
		}
		a, err := e.views.Address(e.ctx, "insp-1")
		if err != nil {
			t.Fatal(err)
		}
		if a.Kind != domain.AddressInspector || !a.ExpiresAt.Equal(want.ExpiresAt) || a.Expired || a.TTL != time.Hour {
			t.Errorf("%s: address = %+v", tc.name, a)
		}
	}

	e.do(e.expireInspector(e.ctx, "insp-1", t0.Add(30*time.Minute), t0.Add(3*time.Hour)))
	if in, err := e.views.Inspector(e.ctx, "insp-1"); err != nil || !in.Expired {
		t.Errorf("after expiry: %+v, %v", in, err)
	}
	if a, err := e.views.Address(e.ctx, "insp-1"); err != nil || !a.Expired {
		t.Errorf("address after expiry: %+v, %v", a, err)
	}
	if _, err := e.views.Inspector(e.ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown inspector: %v", err)
	}
	if _, err := e.views.Address(e.ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown address: %v", err)
	}
}

func TestEndpointCreateReconfigureDelete(t *testing.T) {
	e := newEnv(t, Options{})
	logMode := domain.EndpointSettings{Name: "Stripe", Mode: domain.ModeLog}
	proxy := domain.EndpointSettings{Name: "GitHub", Mode: domain.ModeProxy, Target: "127.0.0.1:3000", ResponseCapture: true}
	e.must(e.signUp(e.ctx, "acct-1", "Ada", "tok-1", "secret-1", t0))
	e.must(e.signUp(e.ctx, "acct-2", "Bob", "tok-2", "secret-2", t0))
	e.must(e.newEndpoint(e.ctx, "ep-1", "acct-1", logMode, t0.Add(1*time.Second)))
	e.must(e.newEndpoint(e.ctx, "ep-3", "acct-2", logMode, t0.Add(2*time.Second)))
	e.do(e.newEndpoint(e.ctx, "ep-2", "acct-1", proxy, t0.Add(3*time.Second)))

	ids := func(account string) []string {
		t.Helper()
		eps, err := e.views.Endpoints(e.ctx, account, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, ep := range eps {
			out = append(out, ep.ID)
		}
		return out
	}
	if got := ids("acct-1"); !slices.Equal(got, []string{"ep-1", "ep-2"}) {
		t.Errorf("acct-1 endpoints = %v, want oldest first [ep-1 ep-2]", got)
	}
	if got := ids("acct-2"); !slices.Equal(got, []string{"ep-3"}) {
		t.Errorf("acct-2 endpoints = %v", got)
	}
	if eps, err := e.views.Endpoints(e.ctx, "nobody", "", 0); err != nil || eps == nil || len(eps) != 0 {
		t.Errorf("unknown account: %v, %v; want an empty non-nil list", eps, err)
	}
	ep2, err := e.views.Endpoint(e.ctx, "ep-2")
	if err != nil {
		t.Fatal(err)
	}
	want := readmodel.Endpoint{ID: "ep-2", AccountID: "acct-1", Name: "GitHub", Mode: domain.ModeProxy, Target: "127.0.0.1:3000", ResponseCapture: true, CreatedAt: t0.Add(3 * time.Second)}
	if !reflect.DeepEqual(ep2, want) {
		t.Errorf("ep-2 = %+v\nwant %+v", ep2, want)
	}

	renamed := domain.EndpointSettings{Name: "Renamed", Mode: domain.ModeProxy, Target: "localhost:8081"}
	e.do(e.onEndpoint(e.ctx, "ep-1", t0.Add(time.Minute), func(ep *domain.Endpoint) error { return ep.Reconfigure("", renamed) }))
	ep1, err := e.views.Endpoint(e.ctx, "ep-1")
	if err != nil {
		t.Fatal(err)
	}
	want = readmodel.Endpoint{ID: "ep-1", AccountID: "acct-1", Name: "Renamed", Mode: domain.ModeProxy, Target: "localhost:8081", CreatedAt: t0.Add(time.Second)}
	if !reflect.DeepEqual(ep1, want) {
		t.Errorf("reconfigured ep-1 = %+v\nwant %+v", ep1, want)
	}
	e.do(e.receive(e.ctx, "d-1", "ep-1", domain.AddressEndpoint, "acct-1", request("/", ""), t0.Add(time.Hour)))
	a, err := e.views.Address(e.ctx, "ep-1")
	if err != nil {
		t.Fatal(err)
	}
	wantAddr := readmodel.Address{ID: "ep-1", Kind: domain.AddressEndpoint, AccountID: "acct-1", Mode: domain.ModeProxy, Target: "localhost:8081", LastActivityAt: t0.Add(time.Hour)}
	if !reflect.DeepEqual(a, wantAddr) {
		t.Errorf("address ep-1 = %+v\nwant %+v", a, wantAddr)
	}

	e.do(e.onEndpoint(e.ctx, "ep-1", t0.Add(2*time.Hour), func(ep *domain.Endpoint) error { return ep.Delete("") }))
	if _, err := e.views.Endpoint(e.ctx, "ep-1"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("deleted endpoint: %v, want ErrNotFound", err)
	}
	if got := ids("acct-1"); !slices.Equal(got, []string{"ep-2"}) {
		t.Errorf("after delete, acct-1 endpoints = %v", got)
	}
	if a, err := e.views.Address(e.ctx, "ep-1"); err != nil || !a.Deleted {
		t.Errorf("address of a deleted endpoint = %+v, %v; want Deleted", a, err)
	}
}

func TestTokenLookup(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.signUp(e.ctx, "acct-1", "Ada", "tok-1", "secret-1", t0))
	e.do(e.onAccount(e.ctx, "acct-1", t0.Add(time.Minute), func(a *domain.Account) error {
		return a.IssueToken("tok-2", hashToken("secret-2"), "laptop", time.Time{})
	}))
	want := readmodel.Account{ID: "acct-1", Name: "Ada", CreatedAt: t0}
	for _, token := range []string{"secret-1", "secret-2"} {
		if a, err := e.views.AccountByTokenHash(e.ctx, hashToken(token)); err != nil || a != want {
			t.Errorf("token %s: %+v, %v", token, a, err)
		}
	}
	e.do(e.onAccount(e.ctx, "acct-1", t0.Add(time.Hour), func(a *domain.Account) error { return a.RevokeToken("tok-1") }))
	tests := []struct {
		token string
		found bool
	}{{"secret-1", false}, {"secret-2", true}, {"never-issued", false}}
	for _, tc := range tests {
		a, err := e.views.AccountByTokenHash(e.ctx, hashToken(tc.token))
		switch {
		case tc.found && (err != nil || a != want):
			t.Errorf("token %s: %+v, %v; want %+v", tc.token, a, err, want)
		case !tc.found && !errors.Is(err, domain.ErrNotFound):
			t.Errorf("token %s: %+v, %v; want ErrNotFound", tc.token, a, err)
		}
	}
	if a, err := e.views.Account(e.ctx, "acct-1"); err != nil || a != want {
		t.Errorf("Account = %+v, %v", a, err)
	}
	if _, err := e.views.Account(e.ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown account: %v", err)
	}
}

func TestAgentPresence(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.signUp(e.ctx, "acct-1", "Ada", "tok-1", "secret-1", t0))
	e.do(e.newEndpoint(e.ctx, "ep-1", "acct-1", domain.EndpointSettings{Name: "n", Mode: domain.ModeLog}, t0))
	connect := func(agent string) domain.Event {
		return domain.AgentConnected{EndpointID: "ep-1", AgentID: agent, Target: "127.0.0.1:3000"}
	}
	disconnect := func(agent string) domain.Event {
		return domain.AgentDisconnected{EndpointID: "ep-1", AgentID: agent, Reason: "closed"}
	}
	tests := []struct {
		event domain.Event
		open  []string // open sessions in connection order
	}{
		{connect("ag-1"), []string{"ag-1"}},
		{connect("ag-2"), []string{"ag-1", "ag-2"}},
		{disconnect("ag-1"), []string{"ag-2"}},
		{disconnect("ag-1"), []string{"ag-2"}}, // twice: still one session less
		{connect("ag-1"), []string{"ag-2", "ag-1"}},
		{disconnect("ag-2"), []string{"ag-1"}},
		{disconnect("ag-1"), []string{}},
	}
	for i, tc := range tests {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		e.do(e.agent(e.ctx, "ep-1", tc.event, at))
		ep, err := e.views.Endpoint(e.ctx, "ep-1")
		if err != nil || ep.AgentCount != len(tc.open) {
			t.Errorf("step %d: Endpoint.AgentCount = %d, %v", i, ep.AgentCount, err)
		}
		sessions, err := e.views.OpenAgentSessions(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, s := range sessions {
			if s.EndpointID != "ep-1" || s.Target != "127.0.0.1:3000" || s.ConnectedAt.Before(t0) {
				t.Errorf("step %d: session %+v", i, s)
			}
			got = append(got, s.AgentID)
		}
		if !slices.Equal(got, tc.open) {
			t.Errorf("step %d: open sessions %v, want %v", i, got, tc.open)
		}
	}
}

// TestAddressCacheFollowsTheViews reads an address before each change, so
// the next read could come from the cache, and checks that it never serves
// a row older than the table: reconfiguration, activity and deletion show at
// once after the batch that made them.
func TestAddressCacheFollowsTheViews(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.signUp(e.ctx, "acct-1", "Ada", "tok-1", "secret-1", t0))
	e.do(e.newEndpoint(e.ctx, "ep-1", "acct-1", domain.EndpointSettings{Name: "a", Mode: domain.ModeLog}, t0))
	read := func() readmodel.Address {
		t.Helper()
		a, err := e.views.Address(e.ctx, "ep-1")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := read(); a.Mode != domain.ModeLog {
		t.Fatalf("mode %s, want LOG", a.Mode)
	}
	e.do(e.onEndpoint(e.ctx, "ep-1", t0.Add(time.Second), func(ep *domain.Endpoint) error {
		return ep.Reconfigure("", domain.EndpointSettings{Name: "a", Mode: domain.ModeProxy, Target: "127.0.0.1:9"})
	}))
	if a := read(); a.Mode != domain.ModeProxy || a.Target != "127.0.0.1:9" {
		t.Errorf("after reconfigure: %+v", a)
	}
	e.do(e.receive(e.ctx, "d-1", "ep-1", domain.AddressEndpoint, "acct-1", request("/", ""), t0.Add(time.Hour)))
	if a := read(); !a.LastActivityAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("after a delivery: last activity %v", a.LastActivityAt)
	}
	e.do(e.onEndpoint(e.ctx, "ep-1", t0.Add(2*time.Hour), func(ep *domain.Endpoint) error { return ep.Delete("") }))
	if a := read(); !a.Deleted {
		t.Errorf("after delete: %+v", a)
	}
}

func TestAddressCacheDropsRowsReadBeforeABatch(t *testing.T) {
	var c addressCache
	_, gen, _ := c.get("x")
	c.committed([]string{"x"}, nil, nil) // a batch commits while "x" is being read
	c.put("x", readmodel.Address{ID: "x", Mode: domain.ModeLog}, gen)
	if _, _, ok := c.get("x"); ok {
		t.Fatal("a row read before a batch was cached after it")
	}
	_, gen, _ = c.get("x")
	c.put("x", readmodel.Address{ID: "x", TTL: time.Hour, ExpiresAt: t0.Add(time.Hour), LastActivityAt: t0}, gen)
	c.committed(nil, map[string]int64{"x": t0.Add(time.Minute).UnixNano()}, nil)
	if a, _, ok := c.get("x"); !ok || !a.ExpiresAt.Equal(t0.Add(time.Hour+time.Minute)) {
		t.Fatalf("activity did not move the cached row: %+v, %v", a, ok)
	}
}

// TestOpenListeners: every node reads an Endpoint's open sessions with
// what the primary rule and the filters need, in the order of their starts.
func TestOpenListeners(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.signUp(e.ctx, "acct-1", "Ada", "tok-1", "secret-1", t0))
	e.do(e.newEndpoint(e.ctx, "ep-1", "acct-1", domain.EndpointSettings{Name: "n", Mode: domain.ModeProxy, Target: "127.0.0.1:1"}, t0))
	steps := []domain.Event{
		domain.AgentConnected{EndpointID: "ep-1", AgentID: "a", Target: "127.0.0.1:1", Node: "n1"},
		domain.AgentConnected{EndpointID: "ep-1", AgentID: "b", Target: "127.0.0.1:2", Node: "n2", Primary: true,
			Filters: []string{"method=POST", "header:X-Kind=a,b"}},
		domain.AgentConnected{EndpointID: "ep-1", AgentID: "c", Target: "127.0.0.1:3", Node: "n1"},
		domain.AgentDisconnected{EndpointID: "ep-1", AgentID: "a", Reason: "closed"},
	}
	for i, ev := range steps {
		e.do(e.agent(e.ctx, "ep-1", ev, t0.Add(time.Duration(i+1)*time.Minute)))
	}
	got, err := e.views.OpenListeners(e.ctx, "ep-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("open listeners %+v, want b and c", got)
	}
	b, c := got[0], got[1]
	if b.AgentID != "b" || b.Node != "n2" || !b.Asked || !slices.Equal(b.Filters, []string{"method=POST", "header:X-Kind=a,b"}) ||
		c.AgentID != "c" || c.Node != "n1" || c.Asked || c.Filters != nil || !(b.Position < c.Position) || !c.ConnectedAt.After(b.ConnectedAt) {
		t.Errorf("open listeners %+v", got)
	}
	// The rows are kept between reads, and dropped when a session of the
	// Endpoint starts or ends.
	e.do(e.agent(e.ctx, "ep-1", domain.AgentDisconnected{EndpointID: "ep-1", AgentID: "b", Reason: "closed"}, t0.Add(time.Hour)))
	if got, err = e.views.OpenListeners(e.ctx, "ep-1"); err != nil || len(got) != 1 || got[0].AgentID != "c" {
		t.Fatalf("open listeners after b ended: %+v, %v; want c alone", got, err)
	}
	e.do(e.agent(e.ctx, "ep-1", domain.AgentConnected{EndpointID: "ep-1", AgentID: "d", Target: "127.0.0.1:4", Node: "n2"}, t0.Add(2*time.Hour)))
	if got, err = e.views.OpenListeners(e.ctx, "ep-1"); err != nil || len(got) != 2 || got[1].AgentID != "d" {
		t.Fatalf("open listeners after d started: %+v, %v; want c and d", got, err)
	}
}
