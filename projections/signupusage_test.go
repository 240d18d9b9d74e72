package projections

import (
	"fmt"
	"testing"

	"github.com/relayhq/relay/domain"
)

// TestSignupStorageSums: the views keep in memory what the accounts in the
// storage for sign-ups store, in all and per network that signed them up:
// those made by open sign-up and older ones, without a storage quota of
// their own; an operator's storage quota takes an account out with its
// bytes, back to the default puts it in again. The sums equal the
// accounts' stored bytes, a load from the tables and a rebuild.
func TestSignupStorageSums(t *testing.T) {
	e := newEnv(t, Options{})
	const netA, netB = "198.51.100.0/24", "203.0.113.0/24"
	accounts := []struct {
		id   string
		from domain.AccountFrom
	}{
		{"open-a1", domain.AccountFrom{Origin: domain.AccountOriginOpen, Network: netA}},
		{"open-a2", domain.AccountFrom{Origin: domain.AccountOriginOpen, Network: netA}},
		{"open-b", domain.AccountFrom{Origin: domain.AccountOriginOpen, Network: netB}},
		{"open-none", domain.AccountFrom{Origin: domain.AccountOriginOpen}},
		{"older", domain.AccountFrom{}},
		{"operator", domain.AccountFrom{Origin: domain.AccountOriginOperator}},
		{"invited", domain.AccountFrom{Origin: domain.AccountOriginInvite}},
	}
	for i, a := range accounts {
		acc, err := domain.SignUp(a.id, a.id, "tok-"+a.id, hashToken(a.id), a.from)
		if err != nil {
			t.Fatal(err)
		}
		e.do(e.save(e.ctx, domain.AccountStream(a.id), acc.Expected(), t0, acc.Changes()...))
		ep := "ep-" + a.id
		e.do(e.newEndpoint(e.ctx, ep, a.id, domain.EndpointSettings{Name: "log", Mode: domain.ModeLog}, t0))
		for j := range i + 1 {
			e.do(e.receive(e.ctx, fmt.Sprintf("%s-%d", a.id, j), ep, domain.AddressEndpoint, a.id, request("/", fmt.Sprint(a.id, j)), t0))
		}
	}
	// want sums the accounts' stored bytes as domain.InSignupStorage
	// counts them.
	want := func() (total int64, byNetwork map[string]int64) {
		byNetwork = map[string]int64{}
		for _, a := range accounts {
			u, err := e.views.AccountQuota(e.ctx, a.id)
			if err != nil {
				t.Fatal(err)
			}
			if domain.InSignupStorage(u.Origin, u.StorageQuota) {
				total += u.StoredBytes
				byNetwork[u.Network] += u.StoredBytes
			}
		}
		return total, byNetwork
	}
	check := func(when string, g *networkUsage) {
		t.Helper()
		total, byNetwork := want()
		for _, network := range []string{netA, netB} {
			gotTotal, got := g.stored(network)
			if gotTotal != total || got != byNetwork[network] {
				t.Errorf("%s: %s holds %d of %d, want %d of %d", when, network, got, gotTotal, byNetwork[network], total)
			}
		}
		if total == 0 || byNetwork[netA] == 0 || byNetwork[""] == 0 {
			t.Errorf("%s: want bytes in all, in %s and without a network: %d, %v", when, netA, total, byNetwork)
		}
	}
	check("signed up", e.views.Accounts.signups)

	for _, step := range []struct {
		name    string
		account string
		storage int64
	}{
		{"a quota of its own takes an account out", "open-a2", 5 << 20},
		{"unlimited takes an older account out", "older", 0},
		{"the default puts it back", "open-a2", domain.QuotaDefault},
		{"an operator's account stays out at the default", "operator", domain.QuotaDefault},
	} {
		e.do(e.onAccount(e.ctx, step.account, t0, func(a *domain.Account) error { return a.SetQuota(step.storage, "", "") }))
		e.do(e.receive(e.ctx, "after-"+step.name, "ep-"+step.account, domain.AddressEndpoint, step.account, request("/after", step.name), t0))
		check(step.name, e.views.Accounts.signups)
	}

	var loaded networkUsage
	if err := loaded.load(e.ctx, e.views.w, qSignupUsage); err != nil {
		t.Fatal(err)
	}
	check("loaded from the tables", &loaded)
	if err := e.views.Rebuild(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.sync(e.views)
	check("rebuilt", e.views.Accounts.signups)
}
