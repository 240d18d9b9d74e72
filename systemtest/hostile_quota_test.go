package systemtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// Rates, quotas and retention against the real binary: each test fails
// when the guard it shows is taken out (see docs/security.md).

// inspectorState is what the API says of an inspector's storage.
type inspectorState struct {
	ID              string
	Expired         bool
	Purged          bool
	StoredBytes     int
	RefusedRequests int
	ExpiresAt       time.Time
	Deliveries      struct{ Nodes []struct{ ID, Path string } }
}

func inspectorNow(t *testing.T, r *harness.Relay, id string) inspectorState {
	t.Helper()
	var out struct{ Inspector inspectorState }
	r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ id expired purged storedBytes refusedRequests expiresAt
		deliveries(first: 100){ nodes{ id path } } } }`, map[string]any{"id": id}, &out)
	return out.Inspector
}

// TestAnonymousMutationsAreRateLimited: createInspector and signUp share a
// bucket per client address; past its burst both are refused with
// RATE_LIMITED and a hint of when to retry.
func TestAnonymousMutationsAreRateLimited(t *testing.T) {
	r := harness.Start(t, "", "--anonymous-rate", "2/h,burst=3")
	for i := range 3 {
		if res := r.GraphQL(t, "", `mutation{ createInspector{ id } }`, nil); len(res.Errors) > 0 {
			t.Fatalf("createInspector %d within the burst: %s", i, res)
		}
	}
	for _, q := range []string{`mutation{ createInspector{ id } }`, `mutation{ signUp(name: "flood"){ token } }`} {
		e := refusal(t, r, "", q, nil)
		retry, _ := e.Extensions["retryAfterSeconds"].(float64)
		if e.Code() != "RATE_LIMITED" || retry < 1 || retry > 30*60 {
			t.Fatalf("%s past the burst: code %q retryAfterSeconds %v (%+v)", q, e.Code(), e.Extensions["retryAfterSeconds"], e)
		}
	}
}

// TestAddressRateLimit: past an address's rate the sender gets 429 with
// Retry-After, nothing is recorded, and the refusals are counted in the
// address's history.
func TestAddressRateLimit(t *testing.T) {
	r := harness.Start(t, "", "--address-rate", "1/min,burst=4", "--refusal-interval", "200ms")
	id, _ := createInspector(t, r)
	const allowed, refused = 4, 6
	for i := range allowed + refused {
		resp := send(t, r, id, "POST", fmt.Sprintf("/hook/%d", i), nil, []byte(`{}`))
		switch {
		case i < allowed && resp.Status != 204:
			t.Fatalf("request %d within the burst: %d %q", i, resp.Status, resp.Body)
		case i >= allowed:
			retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if resp.Status != 429 || err != nil || retry < 1 || retry > 60 {
				t.Fatalf("request %d past the burst: %d Retry-After %q %q", i, resp.Status, resp.Header.Get("Retry-After"), resp.Body)
			}
		}
	}
	var got inspectorState
	harness.Eventually(t, 10*time.Second, "the refusals counted in the API", func() bool {
		got = inspectorNow(t, r, id)
		return got.RefusedRequests == refused
	})
	if n := len(got.Deliveries.Nodes); n != allowed {
		t.Fatalf("history holds %d deliveries, want the %d answered 204", n, allowed)
	}

	// An Endpoint's address has the same limit and count.
	acct := signUpTenant(t, r, "limited")
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "log", "mode": "LOG"})
	for i := range allowed + 2 {
		send(t, r, ep.ID, "POST", fmt.Sprintf("/ep/%d", i), nil, nil)
	}
	harness.Eventually(t, 10*time.Second, "the Endpoint's refusals counted in the API", func() bool {
		var out struct{ Endpoint struct{ RefusedRequests int } }
		r.MustGraphQL(t, acct.Token, `query($id: ID!){ endpoint(id: $id){ refusedRequests } }`, map[string]any{"id": ep.ID}, &out)
		return out.Endpoint.RefusedRequests == 2
	})
	if n := len(endpointHistory(t, r, acct.Token, ep.ID)); n != allowed {
		t.Fatalf("Endpoint history holds %d deliveries, want %d", n, allowed)
	}
}

// TestInspectorQuota: once an inspector's deliveries take its quota of the
// log, it answers 429 saying so and records nothing more.
func TestInspectorQuota(t *testing.T) {
	r := harness.Start(t, "", "--inspector-quota", "8KiB")
	id, _ := createInspector(t, r)
	body := []byte(strings.Repeat("q", 1500))
	recorded := 0
	for i := 0; ; i++ {
		if i == 20 {
			t.Fatalf("no 429 after %d requests of %d bytes to a quota of 8 KiB", i, len(body))
		}
		resp := send(t, r, id, "POST", fmt.Sprintf("/fill/%d", i), nil, body)
		if resp.Status == 429 {
			if !strings.Contains(string(resp.Body), "storage quota") {
				t.Fatalf("429 without naming the quota: %q", resp.Body)
			}
			break
		}
		if resp.Status != 204 {
			t.Fatalf("request %d: %d %q", i, resp.Status, resp.Body)
		}
		recorded++
		// The quota counts what the views hold: wait for this delivery.
		harness.Eventually(t, 10*time.Second, "delivery in the history", func() bool {
			return len(inspectorNow(t, r, id).Deliveries.Nodes) == recorded
		})
	}
	before := inspectorNow(t, r, id)
	if before.StoredBytes < 8<<10 {
		t.Fatalf("refused at %d stored bytes, below the quota", before.StoredBytes)
	}
	for i := range 5 {
		if resp := send(t, r, id, "POST", fmt.Sprintf("/more/%d", i), nil, body); resp.Status != 429 {
			t.Fatalf("request past the quota: %d %q", resp.Status, resp.Body)
		}
	}
	// A delivery to another inspector, appended after the refused ones
	// would have been, shows the views have caught up with them.
	other, _ := createInspector(t, r)
	send(t, r, other, "GET", "/sync", nil, nil)
	harness.Eventually(t, 10*time.Second, "the other inspector's delivery", func() bool {
		return len(inspectorNow(t, r, other).Deliveries.Nodes) == 1
	})
	if after := inspectorNow(t, r, id); len(after.Deliveries.Nodes) != recorded || after.StoredBytes != before.StoredBytes {
		t.Fatalf("past the quota the inspector went from %d deliveries (%d bytes) to %d (%d bytes)",
			recorded, before.StoredBytes, len(after.Deliveries.Nodes), after.StoredBytes)
	}
}

// TestExpiredInspectorRecordsNothing: an expired inspector answers 503 (No
// agent for client, then why) without a delivery.
func TestExpiredInspectorRecordsNothing(t *testing.T) {
	r := harness.Start(t, "", "--inspector-ttl", "1s", "--inspector-retention", "1h")
	id, _ := createInspector(t, r)
	if resp := send(t, r, id, "POST", "/early", nil, []byte("x")); resp.Status != 204 {
		t.Fatalf("fresh inspector: %d", resp.Status)
	}
	exp := inspectorNow(t, r, id).ExpiresAt
	harness.Eventually(t, 10*time.Second, "the inspector's TTL to pass", func() bool { return time.Now().After(exp.Add(50 * time.Millisecond)) })
	for i := range 3 {
		resp := send(t, r, id, "POST", fmt.Sprintf("/late/%d", i), nil, []byte("x"))
		lines := strings.Split(string(resp.Body), "\n")
		if resp.Status != 503 || lines[0] != "No agent for client" || len(lines) < 2 || !strings.Contains(lines[1], "expired") {
			t.Fatalf("expired inspector: %d %q", resp.Status, resp.Body)
		}
	}
	other, _ := createInspector(t, r)
	send(t, r, other, "GET", "/sync", nil, nil)
	harness.Eventually(t, 10*time.Second, "the other inspector's delivery", func() bool {
		return len(inspectorNow(t, r, other).Deliveries.Nodes) == 1
	})
	if got := inspectorNow(t, r, id); !got.Expired || len(got.Deliveries.Nodes) != 1 || got.Deliveries.Nodes[0].Path != "/early" {
		t.Fatalf("expired inspector after late requests: %+v", got)
	}
}

// exported is one line of `relay events export`.
type exported struct {
	Position uint64
	Stream   string
	Type     string
	Data     json.RawMessage
}

func exportLog(t *testing.T, data string) []exported {
	t.Helper()
	return exportLogFrom(t, "--data", data)
}

// exportLogFrom exports the log the flags name (--data or --eventstore).
func exportLogFrom(t *testing.T, store ...string) []exported {
	t.Helper()
	out, code := harness.RunCLI(t, append([]string{"events", "export"}, store...)...)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, out)
	}
	var evs []exported
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e exported
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return evs
}

// TestRetentionPurgesDeliveries: retention after expiry an inspector's
// deliveries leave the API and the log; the log keeps the decision and a
// tombstone per deleted stream, verifies, and rebuilds to the same views.
func TestRetentionPurgesDeliveries(t *testing.T) {
	r := harness.Start(t, "", "--inspector-ttl", "1s", "--inspector-retention", "1s")
	id, _ := createInspector(t, r)
	for _, p := range []string{"/a", "/b", "/c"} {
		if resp := send(t, r, id, "POST", p, nil, []byte(`{"secret":"`+p+`"}`)); resp.Status != 204 {
			t.Fatalf("POST %s: %d", p, resp.Status)
		}
	}
	// An Endpoint never expires: its history must stay.
	acct := signUpTenant(t, r, "keeper")
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "log", "mode": "LOG"})
	send(t, r, ep.ID, "POST", "/kept", nil, []byte("kept"))

	var purged inspectorState
	harness.Eventually(t, 20*time.Second, "the inspector purged and its deliveries gone", func() bool {
		purged = inspectorNow(t, r, id)
		return purged.Purged && len(purged.Deliveries.Nodes) == 0
	})
	if !purged.Expired {
		t.Fatalf("purged inspector: %+v", purged)
	}
	if n := len(endpointHistory(t, r, acct.Token, ep.ID)); n != 1 {
		t.Fatalf("endpoint history holds %d deliveries after the purge, want 1", n)
	}
	r.Stop(t)

	var tombstones, purges, own int
	for _, e := range exportLog(t, r.Data) {
		if e.Stream == "inspector-"+id {
			own += len(e.Data)
		}
		switch {
		case e.Type == "delivery.received.v1" && strings.Contains(string(e.Data), `"address":"`+id+`"`):
			t.Errorf("the purged inspector's delivery is still in the log: %s", e.Data)
		case e.Type == "$stream.deleted.v1":
			var tomb struct{ Stream string }
			if err := json.Unmarshal(e.Data, &tomb); err != nil || tomb.Stream != e.Stream || !strings.HasPrefix(tomb.Stream, "delivery-") {
				t.Errorf("tombstone %s of %s", e.Data, e.Stream)
			}
			tombstones++
		case e.Type == "inspector.purged.v1" && e.Stream == "inspector-"+id:
			purges++
		}
	}
	if tombstones != 3 || purges != 1 {
		t.Fatalf("log holds %d tombstones and %d purge decisions, want 3 and 1", tombstones, purges)
	}
	// Its deliveries' bytes are gone; its own stream, which the log
	// keeps, stays counted.
	if purged.StoredBytes != own {
		t.Fatalf("purged inspector stores %d bytes, its own stream %d: %+v", purged.StoredBytes, own, purged)
	}
	// The chain still verifies; verify counts what retention removed and
	// names the decision that removed it.
	if out, code := harness.RunCLI(t, "events", "verify", "--data", r.Data); code != 0 || !strings.Contains(out, "(3 deleted)") ||
		!strings.Contains(out, "3 removed by 3 stream deletions") || !strings.Contains(out, "(inspector.purged.v1): inspector "+id+", 3 deliveries deleted") {
		t.Fatalf("verify after a purge: exit %d\n%s", code, out)
	}
	if out, code := harness.RunCLI(t, "events", "rebuild", "--data", r.Data); code != 0 {
		t.Fatalf("rebuild after a purge: exit %d\n%s", code, out)
	}
	r.Restart(t)
	if got := inspectorNow(t, r, id); !reflect.DeepEqual(got, purged) {
		t.Fatalf("rebuilt views differ:\n got %+v\nwant %+v", got, purged)
	}
	if n := len(endpointHistory(t, r, acct.Token, ep.ID)); n != 1 {
		t.Fatalf("endpoint history holds %d deliveries after the rebuild, want 1", n)
	}
}
