package projections

import (
	"errors"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// ownStreamBytes sums the payload bytes of an account's streams other than
// its deliveries': its account, token uses, and its Endpoints' own, agent
// and refusals streams. They count in its stored bytes.
func ownStreamBytes(t *testing.T, e *env, accountID string, endpointIDs ...string) int64 {
	t.Helper()
	streams := []string{domain.AccountStream(accountID), domain.TokenUseStream(accountID)}
	for _, id := range endpointIDs {
		streams = append(streams, domain.EndpointStream(id), domain.AgentStream(id), domain.RefusalsStream(id))
	}
	return logBytesOf(t, e, streams...)
}

// logBytesOf sums the payload bytes of the events of streams.
func logBytesOf(t *testing.T, e *env, streams ...string) int64 {
	t.Helper()
	var n int64
	for _, s := range streams {
		evs, err := e.store.ReadStream(e.ctx, s, 0, 100_000)
		if errors.Is(err, domain.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			n += int64(len(ev.Data))
		}
	}
	return n
}

// TestAccountUsage: an account's stored bytes and deliveries follow its
// Endpoints' deliveries (not an inspector's, not another account's) and
// the events of its other streams, go down when a delivery is deleted
// from the log, carry the operator's quota, and equal a rebuild and a
// second application.
func TestAccountUsage(t *testing.T) {
	e := newEnv(t, Options{})
	e.do(e.signUp(e.ctx, "acc-a", "A", "tok-a", "secret-a", t0))
	e.do(e.signUp(e.ctx, "acc-b", "B", "tok-b", "secret-b", t0))
	e.do(e.newEndpoint(e.ctx, "ep-a1", "acc-a", domain.EndpointSettings{Name: "one", Mode: domain.ModeLog}, t0))
	e.do(e.newEndpoint(e.ctx, "ep-a2", "acc-a", domain.EndpointSettings{Name: "two", Mode: domain.ModeLog}, t0))
	e.do(e.newEndpoint(e.ctx, "ep-b", "acc-b", domain.EndpointSettings{Name: "b", Mode: domain.ModeLog}, t0))
	e.do(e.newInspector(e.ctx, "insp", time.Hour, t0))
	e.do(e.receive(e.ctx, "a-1", "ep-a1", domain.AddressEndpoint, "acc-a", request("/1", "first"), t0))
	e.do(e.receive(e.ctx, "a-2", "ep-a2", domain.AddressEndpoint, "acc-a", request("/2", "second"), t0.Add(time.Hour)))
	e.do(e.receive(e.ctx, "a-3", "ep-a1", domain.AddressEndpoint, "acc-a", request("/3", "third"), t0.Add(30*time.Hour)))
	e.do(e.receive(e.ctx, "b-1", "ep-b", domain.AddressEndpoint, "acc-b", request("/b", "bee"), t0))
	e.do(e.receive(e.ctx, "i-1", "insp", domain.AddressInspector, "", request("/i", "inspector"), t0))
	e.do(e.onAccount(e.ctx, "acc-a", t0, func(a *domain.Account) error { return a.SetQuota(5<<20, "10/s,burst=10", "600/min,burst=600") }))

	sizes := map[string]int64{}
	for _, id := range []string{"a-1", "a-2", "a-3", "b-1"} {
		evs, err := e.store.ReadStream(e.ctx, domain.DeliveryStream(id), 0, 1)
		if err != nil || len(evs) != 1 {
			t.Fatalf("read %s: %v", id, err)
		}
		sizes[id] = int64(len(evs[0].Data))
	}

	u, err := e.views.AccountUsage(e.ctx, "acc-a", t0.Add(29*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if want := sizes["a-1"] + sizes["a-2"] + sizes["a-3"] + ownStreamBytes(t, e, "acc-a", "ep-a1", "ep-a2"); u.StoredBytes != want || u.Deliveries != 3 || u.DeliveriesWindow != 1 ||
		u.StorageQuota != 5<<20 || u.RateQuota != "10/s,burst=10" || u.APICostQuota != "600/min,burst=600" {
		t.Fatalf("usage of acc-a %+v, want %d bytes, 3 deliveries, 1 in the window, the quota set", u, want)
	}
	if b, err := e.views.AccountQuota(e.ctx, "acc-b"); err != nil || b.StoredBytes != sizes["b-1"]+ownStreamBytes(t, e, "acc-b", "ep-b") || b.Deliveries != 1 || b.StorageQuota != domain.QuotaDefault || b.RateQuota != "" {
		t.Fatalf("usage of acc-b %+v, %v", b, err)
	}
	if _, err := e.views.AccountQuota(e.ctx, "acc-none"); err == nil {
		t.Fatal("an unknown account has a quota")
	}

	// Cached now: what follows moves the cached copy, not only the table.
	if c, err := e.views.AccountQuota(e.ctx, "acc-a"); err != nil || c.StoredBytes != u.StoredBytes {
		t.Fatalf("AccountQuota of acc-a %+v, %v", c, err)
	}
	res, err := e.store.DeleteStream(e.ctx, domain.DeliveryStream("a-2"), domain.Any())
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor(e.views, res.Position)
	u, err = e.views.AccountQuota(e.ctx, "acc-a")
	if err != nil || u.StoredBytes != sizes["a-1"]+sizes["a-3"]+ownStreamBytes(t, e, "acc-a", "ep-a1", "ep-a2") || u.Deliveries != 2 {
		t.Fatalf("usage of acc-a after a deletion %+v, %v", u, err)
	}
	e.do(e.onAccount(e.ctx, "acc-a", t0, func(a *domain.Account) error { return a.SetQuota(domain.QuotaDefault, "off", "off") }))
	if u, err = e.views.AccountQuota(e.ctx, "acc-a"); err != nil || u.StorageQuota != domain.QuotaDefault || u.RateQuota != "off" || u.APICostQuota != "off" {
		t.Fatalf("AccountQuota of acc-a after a quota change %+v, %v", u, err)
	}
	e.do(e.receive(e.ctx, "a-4", "ep-a2", domain.AddressEndpoint, "acc-a", request("/4", "fourth"), t0))
	e.do(e.receive(e.ctx, "b-2", "ep-b", domain.AddressEndpoint, "acc-b", request("/4", "fourth"), t0))
	if u, err = e.views.AccountQuota(e.ctx, "acc-a"); err != nil || u.Deliveries != 3 {
		t.Fatalf("AccountQuota of acc-a after a new delivery %+v, %v", u, err)
	}
	fromTable, err := e.views.readQuota(e.ctx, "acc-a")
	if err != nil || fromTable != u {
		t.Fatalf("the cached quota %+v differs from the table's %+v (%v)", u, fromTable, err)
	}
	bNow, err := e.views.readQuota(e.ctx, "acc-b")
	if err != nil || bNow.Deliveries != 2 {
		t.Fatalf("acc-b %+v, %v", bNow, err)
	}
	top, total, err := e.views.TopUsage(e.ctx, 1)
	if err != nil || len(top) != 1 || top[0].AccountID != "acc-a" || total.StoredBytes != u.StoredBytes+bNow.StoredBytes || total.Deliveries != 5 {
		t.Fatalf("TopUsage = %+v, %+v, %v", top, total, err)
	}

	// Only the usage's tables are compared: what deleting an Endpoint's
	// delivery does to its last activity and to account_events is
	// retention's to settle, not the quota's.
	usage := func(v *Runner) map[string][]string {
		d := dump(t, v)
		return map[string][]string{"accounts": d["accounts"], "account_hours": d["account_hours"], "deliveries": d["deliveries"]}
	}
	live := usage(e.views)
	if err := e.views.Rebuild(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.sync(e.views)
	compareDumps(t, "rebuilt views", live, usage(e.views))
	events := e.allEvents()
	twice := e.open("twice.db", Options{})
	applyTB(t, twice, events)
	if _, err := twice.w.ExecContext(e.ctx, "UPDATE checkpoint SET position = 0"); err != nil {
		t.Fatal(err)
	}
	twice.setPosition(0)
	applyTB(t, twice, events)
	compareDumps(t, "applied twice", live, usage(twice))
}
