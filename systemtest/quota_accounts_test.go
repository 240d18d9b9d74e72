package systemtest

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// Quotas per account against the real binary (docs/operations.md, Quotas
// and usage): each test fails when the guard it shows is taken out.

const quotaAdmin = "ops-secret"

// accountUsage is `relay accounts usage ACCOUNT -o json`.
type accountUsage struct {
	AccountID         string
	StoredBytes       int64
	StorageQuota      *int64
	Rate              *string
	StorageOverride   bool
	APICost           *string
	APICostOverride   bool
	Deliveries        int64
	DeliveriesLastDay int64
	Refusals          []struct {
		Reason string
		Count  int64
	}
}

func (u accountUsage) refused(reason string) int64 {
	for _, r := range u.Refusals {
		if r.Reason == reason {
			return r.Count
		}
	}
	return 0
}

func usageOf(t *testing.T, r *harness.Relay, account string) accountUsage {
	t.Helper()
	out, code := harness.RunCLI(t, "accounts", "usage", account, "--server", r.BareURL(), "--admin-token", quotaAdmin, "-o", "json")
	if code != 0 {
		t.Fatalf("relay accounts usage exited %d:\n%s", code, out)
	}
	var u accountUsage
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		t.Fatalf("usage JSON: %v\n%s", err, out)
	}
	return u
}

func logEndpoint(t *testing.T, r *harness.Relay, token, name string) string {
	t.Helper()
	return createEndpointFor(t, r, token, map[string]any{"name": name, "mode": "LOG"}).ID
}

// TestAccountStorageQuota: an account past the storage quota the operator
// set is answered 507 with a clear body and records nothing more, while
// another account on the same relay keeps recording; the usage numbers
// equal what was sent.
func TestAccountStorageQuota(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--admin-token", quotaAdmin)
	full, other := signUpTenant(t, r, "Full"), signUpTenant(t, r, "Other")
	fullEP, otherEP := logEndpoint(t, r, full.Token, "full"), logEndpoint(t, r, other.Token, "other")

	out, code := harness.RunCLI(t, "accounts", "set-quota", full.ID, "--storage", "8KiB", "--server", r.BareURL(), "--admin-token", quotaAdmin)
	if code != 0 || !strings.Contains(out, "8.0 KiB (set)") {
		t.Fatalf("set-quota exited %d:\n%s", code, out)
	}

	body := []byte(strings.Repeat("x", 1024))
	accepted, refused := 0, 0
	for i := range 30 {
		resp := send(t, r, fullEP, "POST", "/hook/"+strconv.Itoa(i), nil, body)
		switch resp.Status {
		case 204:
			if refused > 0 {
				t.Fatalf("request %d recorded (204) after the quota refused one", i)
			}
			accepted++
		case 507:
			if !strings.Contains(string(resp.Body), "storage quota (8.0 KiB) is used up") {
				t.Fatalf("507 body does not say why: %q", resp.Body)
			}
			refused++
		default:
			t.Fatalf("request %d to the full account: %d %q", i, resp.Status, resp.Body)
		}
		// The other account is not touched by the first one's quota.
		if o := send(t, r, otherEP, "POST", "/other", nil, body); o.Status != 204 {
			t.Fatalf("the other account's request %d: %d %q", i, o.Status, o.Body)
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("accepted %d, refused %d: the quota never applied", accepted, refused)
	}

	u := usageOf(t, r, full.ID)
	if u.Deliveries != int64(accepted) || u.DeliveriesLastDay != int64(accepted) || u.refused("storage") != int64(refused) {
		t.Fatalf("usage of the full account %+v, want %d deliveries and %d storage refusals", u, accepted, refused)
	}
	if u.StoredBytes < 8<<10 || u.StorageQuota == nil || *u.StorageQuota != 8<<10 || !u.StorageOverride {
		t.Fatalf("usage of the full account %+v: stored bytes below the quota that refused it, or the quota is wrong", u)
	}
	history := endpointDeliveryCount(t, r, full.Token, fullEP)
	if history != accepted {
		t.Fatalf("the full account's history holds %d deliveries, %d were answered 204", history, accepted)
	}
	// The other account has the open relay's defaults (no flag given).
	o := usageOf(t, r, other.ID)
	if o.Deliveries != 30 || o.refused("storage") != 0 || o.StorageOverride || o.StorageQuota == nil || *o.StorageQuota != 1<<30 ||
		o.Rate == nil || *o.Rate != "100/s,burst=1000" {
		t.Fatalf("usage of the other account %+v, want 30 deliveries, no refusal, the defaults of open sign-up (1 GiB, 100/s,burst=1000)", o)
	}

	// The owner reads the same through me { usage }.
	var me struct {
		Me struct {
			Usage struct{ StoredBytes, Deliveries int64 }
		}
	}
	r.MustGraphQL(t, full.Token, `{ me { usage { storedBytes deliveries } } }`, nil, &me)
	if me.Me.Usage.StoredBytes != u.StoredBytes || me.Me.Usage.Deliveries != u.Deliveries {
		t.Fatalf("me { usage } %+v, the operator reads %+v", me.Me.Usage, u)
	}

	// Raising the quota lets the account record again, on the same node at once.
	if out, code := harness.RunCLI(t, "accounts", "set-quota", full.ID, "--storage", "off", "--server", r.BareURL(), "--admin-token", quotaAdmin); code != 0 {
		t.Fatalf("set-quota off exited %d:\n%s", code, out)
	}
	if resp := send(t, r, fullEP, "POST", "/again", nil, body); resp.Status != 204 {
		t.Fatalf("after the quota was lifted: %d %q", resp.Status, resp.Body)
	}
}

func endpointDeliveryCount(t *testing.T, r *harness.Relay, token, id string) int {
	t.Helper()
	var out struct {
		Endpoint struct {
			Deliveries struct{ Nodes []struct{ ID string } }
		}
	}
	r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ deliveries(first: 100){ nodes{ id } } } }`, map[string]any{"id": id}, &out)
	return len(out.Endpoint.Deliveries.Nodes)
}

// TestAccountRateQuota: the relay-wide --account-rate counts deliveries
// across all an account's Endpoints; beyond it 429 with Retry-After and
// nothing recorded, while another account keeps its own bucket.
func TestAccountRateQuota(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--admin-token", quotaAdmin, "--account-rate", "1/min,burst=4")
	busy, calm := signUpTenant(t, r, "Busy"), signUpTenant(t, r, "Calm")
	eps := []string{logEndpoint(t, r, busy.Token, "one"), logEndpoint(t, r, busy.Token, "two")}
	calmEP := logEndpoint(t, r, calm.Token, "calm")
	for i := range 8 {
		resp := send(t, r, eps[i%2], "POST", "/r", nil, []byte(`{}`))
		switch {
		case i < 4 && resp.Status != 204:
			t.Fatalf("request %d within the account's burst: %d %q", i, resp.Status, resp.Body)
		case i >= 4:
			retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if resp.Status != 429 || err != nil || retry < 1 || retry > 60 || !strings.Contains(string(resp.Body), "account's rate") {
				t.Fatalf("request %d past the account's burst: %d Retry-After %q %q", i, resp.Status, resp.Header.Get("Retry-After"), resp.Body)
			}
		}
	}
	for i := range 4 {
		if resp := send(t, r, calmEP, "POST", "/c", nil, []byte(`{}`)); resp.Status != 204 {
			t.Fatalf("the calm account's request %d: %d %q", i, resp.Status, resp.Body)
		}
	}
	u := usageOf(t, r, busy.ID)
	if u.Deliveries != 4 || u.refused("rate") != 4 || u.Rate == nil || *u.Rate != "1/min,burst=4" {
		t.Fatalf("usage of the busy account %+v, want 4 deliveries, 4 rate refusals, rate 1/min,burst=4", u)
	}
	// A per-account override replaces the default at once.
	if out, code := harness.RunCLI(t, "accounts", "set-quota", busy.ID, "--rate", "off", "--server", r.BareURL(), "--admin-token", quotaAdmin); code != 0 {
		t.Fatalf("set-quota --rate off exited %d:\n%s", code, out)
	}
	if resp := send(t, r, eps[0], "POST", "/r", nil, []byte(`{}`)); resp.Status != 204 {
		t.Fatalf("after --rate off: %d %q", resp.Status, resp.Body)
	}
}

// TestAccountQuotaBadInput: malformed or negative quotas, unknown
// accounts and callers without the admin token get a clear error (the
// CLI exits 2) and change nothing.
func TestAccountQuotaBadInput(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--admin-token", quotaAdmin)
	acc := signUpTenant(t, r, "Ada")
	server := r.BareURL()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"negative storage", []string{acc.ID, "--storage", "-5GiB"}, "is not a size"},
		{"malformed storage", []string{acc.ID, "--storage", "5Gxx"}, "is not a size"},
		{"storage beyond 1PiB", []string{acc.ID, "--storage", "2PiB"}, "at most 1PiB"},
		{"malformed rate", []string{acc.ID, "--rate", "fast"}, "want N/UNIT"},
		{"zero rate", []string{acc.ID, "--rate", "0/s"}, "not a positive count"},
		{"nothing to set", []string{acc.ID}, "give --storage, --rate, --api-cost or several"},
		{"negative API cost", []string{acc.ID, "--api-cost", "-5/min"}, "--api-cost"},
		{"malformed API cost", []string{acc.ID, "--api-cost", "fast"}, "want N/UNIT"},
		{"API cost without a count", []string{acc.ID, "--api-cost", "600000/min,burst="}, "not a positive count"},
		{"unknown account", []string{"no-such-account", "--storage", "5GiB"}, "NOT_FOUND"},
		{"wrong admin token", []string{acc.ID, "--storage", "5GiB", "--admin-token", "wrong"}, "UNAUTHENTICATED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"accounts", "set-quota"}, tc.args...)
			args = append(args, "--server", server)
			if !strings.Contains(strings.Join(tc.args, " "), "--admin-token") {
				args = append(args, "--admin-token", quotaAdmin)
			}
			out, code := harness.RunCLI(t, args...)
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want 2 and %q in:\n%s", code, tc.want, out)
			}
		})
	}
	// The API itself checks too, and an account's own token is not the operator's.
	if e := refusal(t, r, "", `mutation($a: ID!){ setAccountQuota(account: $a, storage: "-1"){ accountId } }`, map[string]any{"a": acc.ID}); e.Code() != "UNAUTHENTICATED" {
		t.Fatalf("setAccountQuota without a token: %+v", e)
	}
	if e := refusal(t, r, acc.Token, `mutation($a: ID!){ setAccountQuota(account: $a, storage: "off"){ accountId } }`, map[string]any{"a": acc.ID}); e.Code() != "UNAUTHENTICATED" {
		t.Fatalf("setAccountQuota with the account's own token: %+v", e)
	}
	if e := refusal(t, r, quotaAdmin, `mutation($a: ID!){ setAccountQuota(account: $a, storage: "-1"){ accountId } }`, map[string]any{"a": acc.ID}); e.Code() != "INVALID_INPUT" {
		t.Fatalf("setAccountQuota with a negative storage: %+v", e)
	}
	if u := usageOf(t, r, acc.ID); u.StorageOverride || u.StorageQuota == nil || *u.StorageQuota != 1<<30 {
		t.Fatalf("refused changes changed the quota (want the default 1 GiB): %+v", u)
	}
}

// TestAccountEndpointCap: past --account-endpoints an account's
// createEndpoint is refused with a clear INVALID_INPUT (the CLI exits 2);
// deleting one makes room; another account is not counted with it.
func TestAccountEndpointCap(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--account-endpoints", "2")
	full, other := signUpTenant(t, r, "Full"), signUpTenant(t, r, "Other")
	first := logEndpoint(t, r, full.Token, "one")
	logEndpoint(t, r, full.Token, "two")
	const create = `mutation{ createEndpoint(input: {name: "three", mode: LOG}){ id } }`
	e := refusal(t, r, full.Token, create, nil)
	if e.Code() != "INVALID_INPUT" || !strings.Contains(e.Message, "the most this relay allows") {
		t.Fatalf("a third Endpoint: %+v", e)
	}
	logEndpoint(t, r, other.Token, "others")
	out, code := harness.RunCLI(t, "endpoints", "create", "cli", "--mode", "log", "--server", r.BareURL(), "--token", full.Token)
	if code != 2 || !strings.Contains(out, "--account-endpoints") {
		t.Fatalf("relay endpoints create past the cap exited %d:\n%s", code, out)
	}
	r.MustGraphQL(t, full.Token, `mutation($id: ID!){ deleteEndpoint(id: $id) }`, map[string]any{"id": first}, nil)
	logEndpoint(t, r, full.Token, "three")
}

// TestAccountQuotaOnTwoNodes: the quota set through one node and the bytes
// stored through it are what the other node's views hold too, so both
// refuse the full account and both still record for another.
func TestAccountQuotaOnTwoNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS cluster and two relays")
	}
	seeds, _ := startNATSCluster(t)
	flags := func(node string) []string {
		return []string{"--eventstore", seeds + "?replicas=3", "--bus", seeds, "--node-id", node, "--admin-token", quotaAdmin}
	}
	a := harness.Start(t, "", flags("a")...)
	b := harness.Start(t, "", flags("b")...)
	full, other := signUpTenant(t, a, "Full"), signUpTenant(t, a, "Other")
	fullEP, otherEP := logEndpoint(t, a, full.Token, "full"), logEndpoint(t, a, other.Token, "other")
	if out, code := harness.RunCLI(t, "accounts", "set-quota", full.ID, "--storage", "4KiB", "--server", a.BareURL(), "--admin-token", quotaAdmin); code != 0 {
		t.Fatalf("set-quota on A exited %d:\n%s", code, out)
	}
	body := []byte(strings.Repeat("x", 1024))
	for i := 0; ; i++ {
		resp := send(t, a, fullEP, "POST", "/a", nil, body)
		if resp.Status == 507 {
			break
		}
		if resp.Status != 204 || i == 20 {
			t.Fatalf("request %d on A: %d %q", i, resp.Status, resp.Body)
		}
	}
	onA := usageOf(t, a, full.ID)
	harness.Eventually(t, 10*time.Second, "B's views to hold A's deliveries and quota", func() bool {
		u := usageOf(t, b, full.ID)
		return u.StoredBytes == onA.StoredBytes && u.StorageQuota != nil && *u.StorageQuota == 4<<10
	})
	if resp := send(t, b, fullEP, "POST", "/b", nil, body); resp.Status != 507 {
		t.Fatalf("the full account on B: %d %q, want 507", resp.Status, resp.Body)
	}
	if resp := send(t, b, otherEP, "POST", "/b", nil, body); resp.Status != 204 {
		t.Fatalf("the other account on B: %d %q, want 204", resp.Status, resp.Body)
	}
	if u := usageOf(t, b, full.ID); u.Deliveries != onA.Deliveries || u.refused("storage") != 1 {
		t.Fatalf("usage on B %+v: want A's %d deliveries and B's own one refusal", u, onA.Deliveries)
	}
}

// TestUsageCountsWhatWasJustRecorded: an account's usage, read right after
// a delivery was answered, counts it. The storage quota counts a receipt
// from the log's commit; a usage figure read from the views a moment
// before they apply it would disagree with the quota that just decided.
func TestUsageCountsWhatWasJustRecorded(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--admin-token", quotaAdmin)
	acc := signUpTenant(t, r, "Counted")
	ep := logEndpoint(t, r, acc.Token, "counted")
	body := []byte(strings.Repeat("y", 512))
	var me struct {
		Me struct {
			Usage struct{ StoredBytes, Deliveries int64 }
		}
	}
	var stored int64
	for i := 1; i <= 20; i++ {
		if resp := send(t, r, ep, "POST", "/n", nil, body); resp.Status != 204 {
			t.Fatalf("delivery %d: %d %q", i, resp.Status, resp.Body)
		}
		r.MustGraphQL(t, acc.Token, `{ me { usage { storedBytes deliveries } } }`, nil, &me)
		if me.Me.Usage.Deliveries != int64(i) || me.Me.Usage.StoredBytes <= stored {
			t.Fatalf("usage right after delivery %d: %+v (before it: %d bytes)", i, me.Me.Usage, stored)
		}
		stored = me.Me.Usage.StoredBytes
	}
	// The operator's list reads the same.
	out, code := harness.RunCLI(t, "accounts", "usage", "--server", r.BareURL(), "--admin-token", quotaAdmin, "-o", "json")
	if code != 0 || !strings.Contains(out, acc.ID) || !strings.Contains(out, strconv.FormatInt(stored, 10)) {
		t.Fatalf("relay accounts usage exited %d, want %s with %d bytes:\n%s", code, acc.ID, stored, out)
	}
}
