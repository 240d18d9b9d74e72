package systemtest

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/systemtest/harness"
)

// endpointRetention is what the API says of an Endpoint's window and
// history.
type endpointRetention struct {
	ID        string
	Retention struct {
		Window        string
		Seconds       int
		IsDefault     bool
		Max           string
		DeletedBefore *time.Time
	}
	Deliveries struct{ Nodes []struct{ ID, Path string } }
}

func endpointRetentionNow(t *testing.T, r *harness.Relay, token, id string) endpointRetention {
	t.Helper()
	var out struct{ Endpoint endpointRetention }
	r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ id retention{ window seconds isDefault max deletedBefore }
		deliveries(first: 100){ nodes{ id path } } } }`, map[string]any{"id": id}, &out)
	return out.Endpoint
}

// accountLog is the account's own events as the events query pages them.
func accountLog(t *testing.T, r *harness.Relay, token string) []string {
	t.Helper()
	var all []string
	after := ""
	for {
		var out struct {
			Events struct {
				Nodes    []struct{ ID, Type, Stream string }
				PageInfo struct {
					HasNextPage bool
					EndCursor   string
				}
			}
		}
		r.MustGraphQL(t, token, `query($after: String){ events(first: 100, after: $after){ nodes{ id type stream } pageInfo{ hasNextPage endCursor } } }`,
			map[string]any{"after": after}, &out)
		for _, e := range out.Events.Nodes {
			all = append(all, e.Type+" "+e.Stream+" "+e.ID)
		}
		if !out.Events.PageInfo.HasNextPage {
			return all
		}
		after = out.Events.PageInfo.EndCursor
	}
}

// TestEndpointRetention: an Endpoint with a 2-second window loses exactly
// the deliveries received longer ago than that, by a decision on its
// stream and a tombstone per delivery stream; newer deliveries and another
// Endpoint on the relay's default window keep theirs. The log verifies and
// names the decision, and a rebuild gives the same views. Windows the relay
// does not allow are refused, by the API and the CLI.
func TestEndpointRetention(t *testing.T) {
	r := harness.Start(t, "", "--retention", "1h", "--max-retention", "2h", "--min-retention", "1s")
	acct := signUpTenant(t, r, "retainer")
	short := createEndpointFor(t, r, acct.Token, map[string]any{"name": "short", "mode": "LOG", "retention": "2s"})
	keeper := createEndpointFor(t, r, acct.Token, map[string]any{"name": "keeper", "mode": "LOG"})

	// Bad windows: the API says which bound, the CLI exits 2 saying it too.
	for in, want := range map[string]string{
		"3h": "at most the relay's maximum of 2h", "500ms": "at least the relay's minimum of 1s",
		"-1d": "must be positive", "0": "must be positive", "a week": "must be a duration",
	} {
		res := r.GraphQL(t, acct.Token, `mutation($id: ID!, $r: String!){ updateEndpoint(id: $id, input: {retention: $r}){ id } }`,
			map[string]any{"id": short.ID, "r": in})
		if len(res.Errors) != 1 || res.Errors[0].Code() != "INVALID_INPUT" || !strings.Contains(res.Errors[0].Message, want) {
			t.Errorf("retention %q: %s, want INVALID_INPUT saying %q", in, res, want)
		}
	}
	if res := r.GraphQL(t, acct.Token, `mutation{ createEndpoint(input: {name: "long", mode: LOG, retention: "30d"}){ id } }`, nil); len(res.Errors) != 1 ||
		res.Errors[0].Code() != "INVALID_INPUT" || !strings.Contains(res.Errors[0].Message, "maximum of 2h") {
		t.Errorf("createEndpoint beyond the maximum: %s", res)
	}
	cli := harness.Command{Env: []string{"RELAY_TOKEN=" + acct.Token}}
	for _, bad := range []string{"400d", "-5m", "0s", "soon"} {
		if out, code := harness.RunWith(t, cli, "endpoints", "update", short.ID, "--retention", bad, "--server", r.BareURL()); code != 2 || !strings.Contains(out, "retention") {
			t.Errorf("relay endpoints update --retention %s: exit %d\n%s", bad, code, out)
		}
	}
	if out, code := harness.RunWith(t, cli, "endpoints", "list", "--server", r.BareURL()); code != 0 ||
		!strings.Contains(out, "KEEPS") || !strings.Contains(out, "2s") || !strings.Contains(out, "1h (default)") {
		t.Fatalf("relay endpoints list: exit %d\n%s", code, out)
	}

	// Three old deliveries, then two 1.5s later: the first decision past
	// the window leaves the newer two (received after its cutoff).
	old := map[string]bool{}
	for _, p := range []string{"/old1", "/old2", "/old3"} {
		if resp := send(t, r, short.ID, "POST", p, nil, []byte(p)); resp.Status != 204 {
			t.Fatalf("POST %s: %d", p, resp.Status)
		}
	}
	var before endpointRetention
	harness.Eventually(t, 10*time.Second, "the old deliveries in the history", func() bool {
		before = endpointRetentionNow(t, r, acct.Token, short.ID)
		return len(before.Deliveries.Nodes) == 3
	})
	for _, d := range before.Deliveries.Nodes {
		old[d.ID] = true
	}
	sentOld := time.Now()
	send(t, r, keeper.ID, "POST", "/kept", nil, []byte("kept"))
	harness.Eventually(t, 10*time.Second, "1.5s after the old deliveries", func() bool { return time.Since(sentOld) > 1500*time.Millisecond })
	for _, p := range []string{"/new1", "/new2"} {
		send(t, r, short.ID, "POST", p, nil, []byte(p))
	}
	var after endpointRetention
	harness.Eventually(t, 20*time.Second, "the old deliveries deleted", func() bool {
		after = endpointRetentionNow(t, r, acct.Token, short.ID)
		return after.Retention.DeletedBefore != nil && len(after.Deliveries.Nodes) <= 2
	})
	// Freeze: a longer window keeps the newer two from here on.
	if out, code := harness.RunWith(t, cli, "endpoints", "update", short.ID, "--retention", "1h", "--server", r.BareURL()); code != 0 ||
		!strings.Contains(out, "keeps deliveries 1h") || !strings.Contains(out, "deleted those received before") {
		t.Fatalf("relay endpoints update --retention 1h: exit %d\n%s", code, out)
	}
	var paths []string
	for _, d := range after.Deliveries.Nodes {
		paths = append(paths, d.Path)
	}
	sort.Strings(paths)
	if !reflect.DeepEqual(paths, []string{"/new1", "/new2"}) || after.Retention.Window != "2s" || after.Retention.IsDefault {
		t.Fatalf("after retention the short Endpoint holds %v (%+v), want /new1 and /new2", paths, after.Retention)
	}
	if k := endpointRetentionNow(t, r, acct.Token, keeper.ID); len(k.Deliveries.Nodes) != 1 || k.Retention.Window != "1h" ||
		!k.Retention.IsDefault || k.Retention.Max != "2h" || k.Retention.DeletedBefore != nil {
		t.Fatalf("the Endpoint on the default window: %+v", k)
	}
	if out, code := harness.RunWith(t, cli, "endpoints", "show", keeper.ID, "--server", r.BareURL()); code != 0 || !strings.Contains(out, "keeps deliveries 1h (default)") {
		t.Fatalf("relay endpoints show: exit %d\n%s", code, out)
	}
	views := struct {
		Short, Keeper endpointRetention
		Log           []string
	}{endpointRetentionNow(t, r, acct.Token, short.ID), endpointRetentionNow(t, r, acct.Token, keeper.ID), accountLog(t, r, acct.Token)}
	r.Stop(t)

	// The log: the decisions on the Endpoint's stream count the three, and
	// exactly their streams are tombstoned.
	var decided int64
	tombstoned := map[string]bool{}
	for _, e := range exportLog(t, r.Data) {
		switch e.Type {
		case "endpoint.retained.v1":
			var d struct {
				EndpointID  string `json:"endpoint_id"`
				RetentionMs int64  `json:"retention_ms"`
				Cutoff      string `json:"cutoff"`
				Deliveries  int64
			}
			if err := json.Unmarshal(e.Data, &d); err != nil || e.Stream != "endpoint-"+short.ID || d.RetentionMs != 2000 || d.Cutoff == "" {
				t.Errorf("decision on %s: %s", e.Stream, e.Data)
			}
			decided += d.Deliveries
		case "$stream.deleted.v1":
			tombstoned[strings.TrimPrefix(e.Stream, "delivery-")] = true
		case "delivery.received.v1":
			for id := range old {
				if strings.Contains(string(e.Data), id) {
					t.Errorf("an old delivery is still in the log: %s", e.Data)
				}
			}
		}
	}
	if decided != 3 || !reflect.DeepEqual(tombstoned, old) {
		t.Fatalf("decisions count %d deliveries and %d streams are tombstoned (%v), want the 3 old ones (%v)", decided, len(tombstoned), tombstoned, old)
	}
	out, code := harness.RunCLI(t, "events", "verify", "--data", r.Data)
	if code != 0 || !strings.Contains(out, "(endpoint.retained.v1): endpoint "+short.ID+", window 2s") || !strings.Contains(out, "3 removed by 3 stream deletions") {
		t.Fatalf("verify after retention: exit %d\n%s", code, out)
	}
	if out, code := harness.RunCLI(t, "events", "rebuild", "--data", r.Data); code != 0 {
		t.Fatalf("rebuild after retention: exit %d\n%s", code, out)
	}
	r.Restart(t)
	rebuilt := struct {
		Short, Keeper endpointRetention
		Log           []string
	}{endpointRetentionNow(t, r, acct.Token, short.ID), endpointRetentionNow(t, r, acct.Token, keeper.ID), accountLog(t, r, acct.Token)}
	if !reflect.DeepEqual(rebuilt, views) {
		t.Fatalf("rebuilt views differ:\n got %+v\nwant %+v", rebuilt, views)
	}
}

// TestEndpointRetentionAcrossNodes: two relay nodes on one JetStream log
// and bus, an Endpoint with a 1-second window receiving on both. Its
// deliveries are removed once: the decisions together count each delivery
// once, each stream has one tombstone, and the log verifies.
func TestEndpointRetentionAcrossNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS server and two relays")
	}
	nats := natstest.Start(t)
	flags := func(node string) []string {
		return []string{"--eventstore", nats.URL(), "--bus", nats.URL(), "--node-id", node, "--node-lease", clusterLease,
			"--min-retention", "1s", "--retention", "1h"}
	}
	a := harness.Start(t, "", flags("a")...)
	b := harness.Start(t, "", flags("b")...)
	acct := signUpTenant(t, a, "nodes")
	ep := createEndpointFor(t, a, acct.Token, map[string]any{"name": "short", "mode": "LOG", "retention": "1s"})
	// Node b learns the account's token and its Endpoint from the shared
	// log: until then it answers UNAUTHENTICATED, then null.
	harness.Eventually(t, 10*time.Second, "node b to know the token and the Endpoint", func() bool {
		res := b.GraphQL(t, acct.Token, `query($id: ID!){ endpoint(id: $id){ id } }`, map[string]any{"id": ep.ID})
		return len(res.Errors) == 0 && strings.Contains(string(res.Data), ep.ID)
	})
	for i, r := range []*harness.Relay{a, b, a, b, a, b} {
		if resp := send(t, r, ep.ID, "POST", "/d"+strconv.Itoa(i), nil, []byte("x")); resp.Status != 204 {
			t.Fatalf("POST to node %d: %d", i%2, resp.Status)
		}
	}
	for _, r := range []*harness.Relay{a, b} {
		harness.Eventually(t, 20*time.Second, "the deliveries gone on both nodes", func() bool {
			got := endpointRetentionNow(t, r, acct.Token, ep.ID)
			return got.Retention.DeletedBefore != nil && len(got.Deliveries.Nodes) == 0
		})
	}
	a.Stop(t)
	b.Stop(t)

	var decided int64
	tombstones := map[string]int{}
	for _, e := range exportLogFrom(t, "--eventstore", nats.URL()) {
		switch e.Type {
		case "endpoint.retained.v1":
			var d struct{ Deliveries int64 }
			if err := json.Unmarshal(e.Data, &d); err != nil || d.Deliveries <= 0 {
				t.Errorf("decision %s", e.Data)
			}
			decided += d.Deliveries
		case "$stream.deleted.v1":
			tombstones[e.Stream]++
		}
	}
	if decided != 6 || len(tombstones) != 6 {
		t.Fatalf("decisions count %d deliveries, %d streams tombstoned; want 6 and 6", decided, len(tombstones))
	}
	for stream, n := range tombstones {
		if n != 1 {
			t.Errorf("%s has %d tombstones", stream, n)
		}
	}
	if out, code := harness.RunCLI(t, "events", "verify", "--eventstore", nats.URL()); code != 0 || !strings.Contains(out, "(endpoint.retained.v1): endpoint "+ep.ID) {
		t.Fatalf("verify after retention on two nodes: exit %d\n%s", code, out)
	}
}
