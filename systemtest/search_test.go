package systemtest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestDeliveriesSearch: the relay filters an address's history, through
// the API's filter and relay deliveries list's flags, and bad filters get
// a clear error.
func TestDeliveriesSearch(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	for _, d := range []struct {
		method, target, body string
		headers              [][2]string
	}{
		{"POST", "/webhooks/stripe?v=1", `{"type":"charge.succeeded"}`, [][2]string{{"Stripe-Signature", "t=1"}}},
		{"POST", "/webhooks/github", `{"action":"opened"}`, [][2]string{{"X-GitHub-Event", "pull_request"}}},
		{"GET", "/health", "", nil},
		{"POST", "/webhooks/stripe", `{"type":"charge.refunded"}`, [][2]string{{"Stripe-Signature", "t=2"}}},
		{"POST", "/other", `{"type":"charge.failed"}`, [][2]string{{"X-GitHub-Event", "push"}}},
	} {
		r.SendRaw(t, harness.RawRequest{Method: d.method, Target: d.target, Host: r.AddressHost(id), Headers: d.headers, Body: []byte(d.body)})
	}
	harness.Eventually(t, 10*time.Second, "five rows", func() bool { return len(history(t, r, id, 10)) == 5 })

	list := func(t *testing.T, args ...string) []string {
		t.Helper()
		out, code := harness.RunCLI(t, append([]string{"deliveries", "list", id, "--server", r.BareURL(), "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("deliveries list %v: exit %d\n%s", args, code, out)
		}
		var rows []struct{ Method, Path string }
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("deliveries list %v: %v\n%s", args, err, out)
		}
		var got []string
		for _, row := range rows {
			got = append(got, row.Method+" "+row.Path)
		}
		return got
	}
	for _, tt := range []struct {
		args []string
		want []string // newest first
	}{
		{nil, []string{"POST /other", "POST /webhooks/stripe", "GET /health", "POST /webhooks/github", "POST /webhooks/stripe?v=1"}},
		{[]string{"--path", "/webhooks/stripe"}, []string{"POST /webhooks/stripe", "POST /webhooks/stripe?v=1"}},
		{[]string{"--method", "get"}, []string{"GET /health"}},
		{[]string{"--grep", "charge", "--path", "/webhooks"}, []string{"POST /webhooks/stripe", "POST /webhooks/stripe?v=1"}},
		{[]string{"--header", "x-github-event"}, []string{"POST /other", "POST /webhooks/github"}},
		{[]string{"--header", "X-GitHub-Event=push"}, []string{"POST /other"}},
		{[]string{"--status", "2xx", "--since", "1h"}, []string{"POST /other", "POST /webhooks/stripe", "GET /health", "POST /webhooks/github", "POST /webhooks/stripe?v=1"}},
		{[]string{"--status", "5xx"}, nil},
		{[]string{"--until", "1h"}, nil},
		{[]string{"--grep", "charge", "--limit", "2"}, []string{"POST /other", "POST /webhooks/stripe"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if got := list(t, tt.args...); !slices.Equal(got, tt.want) {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
		})
	}

	// Through the API: the same filter, and a bad one named.
	var res struct {
		Inspector struct {
			Deliveries struct{ Nodes []struct{ Method string } }
		}
	}
	r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ deliveries(filter: {method: "GET"}){ nodes{ method } } } }`, map[string]any{"id": id}, &res)
	if n := res.Inspector.Deliveries.Nodes; len(n) != 1 || n[0].Method != "GET" {
		t.Fatalf("filter {method: GET}: %+v", n)
	}
	bad := r.GraphQL(t, "", `query($id: ID!){ inspector(id: $id){ deliveries(filter: {statusClass: 9}){ nodes{ id } } } }`, map[string]any{"id": id})
	if len(bad.Errors) != 1 || bad.Errors[0].Code() != "INVALID_INPUT" || !strings.Contains(bad.Errors[0].Message, "statusClass") {
		t.Fatalf("statusClass 9 answered %+v", bad.Errors)
	}
	for _, bad := range [][]string{
		{"--status", "9xx"}, {"--since", "-1h"}, {"--since", "yesterday"}, {"--header", "bad name"}, {"--path", "webhooks"}, {"--attempt-status", "42"},
	} {
		out, code := harness.RunCLI(t, append([]string{"deliveries", "list", id, "--server", r.BareURL()}, bad...)...)
		if code != 2 || !strings.Contains(out, bad[0]) {
			t.Errorf("deliveries list %v: exit %d, want 2 naming %s:\n%s", bad, code, bad[0], out)
		}
	}
}

// TestProviderRedeliveries: the relay recognises a provider's event type
// and delivery id, counts a redelivery of the same id as a duplicate, and
// lists a delivery with its redeliveries.
func TestProviderRedeliveries(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	github := [][2]string{{"X-GitHub-Event", "push"}, {"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"}, {"Content-Type", "application/json"}}
	for range 2 { // GitHub's "Redeliver"
		r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/github", Host: r.AddressHost(id), Headers: github, Body: []byte(`{"ref":"main"}`)})
	}
	r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/stripe", Host: r.AddressHost(id),
		Headers: [][2]string{{"Stripe-Signature", "t=1,v1=abc"}}, Body: []byte(`{"id":"evt_1","object":"event","type":"charge.succeeded"}`)})
	r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/plain", Host: r.AddressHost(id), Body: []byte(`{}`)})
	harness.Eventually(t, 10*time.Second, "four rows", func() bool { return len(history(t, r, id, 10)) == 4 })

	type row struct {
		ID       string
		Path     string
		Provider *struct {
			Name                  string
			EventType, DeliveryID *string
		}
		Duplicates int
	}
	list := func(args ...string) []row {
		t.Helper()
		out, code := harness.RunCLI(t, append([]string{"deliveries", "list", id, "--server", r.BareURL(), "-o", "json"}, args...)...)
		var rows []row
		if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
			t.Fatalf("deliveries list %v: exit %d, %v\n%s", args, code, err, out)
		}
		return rows
	}
	all := list()
	if len(all) != 4 {
		t.Fatalf("%d rows", len(all))
	}
	byPath := map[string][]row{}
	for _, r := range all {
		byPath[r.Path] = append(byPath[r.Path], r)
	}
	for _, g := range byPath["/github"] {
		if g.Provider == nil || g.Provider.Name != "github" || strp(g.Provider.EventType) != `"push"` || g.Duplicates != 1 {
			t.Errorf("github row %+v, want github push with 1 duplicate", g)
		}
	}
	if s := byPath["/stripe"]; len(s) != 1 || s[0].Provider == nil || strp(s[0].Provider.EventType) != `"charge.succeeded"` || strp(s[0].Provider.DeliveryID) != `"evt_1"` || s[0].Duplicates != 0 {
		t.Errorf("stripe row %+v", s)
	}
	if p := byPath["/plain"]; len(p) != 1 || p[0].Provider != nil {
		t.Errorf("plain row %+v, want no provider", p)
	}
	if got := list("--event", "push"); len(got) != 2 {
		t.Errorf("--event push: %d rows, want 2", len(got))
	}
	if got := list("--provider-id", "72d3162e-cc78-11e3-81ab-4c9367dc0958"); len(got) != 2 {
		t.Errorf("--provider-id: %d rows, want 2", len(got))
	}
	out, code := harness.RunCLI(t, "deliveries", "show", byPath["/github"][0].ID, "--server", r.BareURL())
	if code != 0 || !strings.Contains(out, "provider: github push (sent 2 times), its delivery id 72d3162e-cc78-11e3-81ab-4c9367dc0958") {
		t.Errorf("deliveries show: exit %d\n%s", code, out)
	}
	out, code = harness.RunCLI(t, "deliveries", "list", id, "--server", r.BareURL())
	if code != 0 || strings.Count(out, "github push (sent 2 times)") != 2 || !strings.Contains(out, "stripe charge.succeeded") {
		t.Errorf("deliveries list: exit %d\n%s", code, out)
	}
}
