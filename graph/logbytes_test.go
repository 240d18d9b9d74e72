package graph_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/internal/logtest"
	"github.com/relayhq/relay/projections"
)

// TestAccountStreamsCountTowardStorage: an account's settings and agent
// sessions are appended to its own streams (endpoint-, agent-, account-),
// kept for good and counted by no quota, so a tenant could grow the log
// without end by repeating them. Every byte appended to an account's
// streams now counts toward its storage quota, and past it the command
// that would append more is refused QUOTA_EXCEEDED, nothing recorded.
// Each attack is driven against a 128 KiB quota; the bytes it appended
// are counted from the log.
func TestAccountStreamsCountTowardStorage(t *testing.T) {
	const quota = 128 << 10
	const tries = 40
	big := strings.Repeat("a", 60<<10)
	var filters []map[string]any
	for i := range domain.MaxFilters {
		filters = append(filters, map[string]any{"kind": "PATH", "values": []string{fmt.Sprintf("/%02d", i) + strings.Repeat("p", 480)}})
	}
	var sock *agentSocket // the agent's one socket for its sessions
	for _, tc := range []struct {
		name string
		// try repeats the attack once (i is the try), and returns the
		// GraphQL error's text ("" when it went through).
		try func(t *testing.T, e *env, srv *httptest.Server, auth, endpointID string, i int) string
	}{
		{"updateEndpoint with a 60 KiB answer", func(t *testing.T, e *env, _ *httptest.Server, auth, ep string, i int) string {
			var out struct{ UpdateEndpoint struct{ ID string } }
			body := fmt.Sprint(i) + big
			return errText(e.c.Post(`mutation($id: ID!, $b: String) { updateEndpoint(id: $id, input: {answer: {status: 200, body: $b}}) { id } }`,
				&out, client.Var("id", ep), client.Var("b", body), client.AddHeader("Authorization", auth)))
		}},
		{"createEndpoint and deleteEndpoint with a 60 KiB answer", func(t *testing.T, e *env, _ *httptest.Server, auth, _ string, _ int) string {
			var out struct{ CreateEndpoint struct{ ID string } }
			if err := e.c.Post(`mutation($b: String) { createEndpoint(input: {name: "churn", mode: LOG, answer: {status: 200, body: $b}}) { id } }`,
				&out, client.Var("b", big), client.AddHeader("Authorization", auth)); err != nil {
				return err.Error()
			}
			var del struct{ DeleteEndpoint bool }
			return errText(e.c.Post(`mutation($id: ID!) { deleteEndpoint(id: $id) }`, &del, client.Var("id", out.CreateEndpoint.ID),
				client.AddHeader("Authorization", auth)))
		}},
		{"agent sessions with 16 filters", func(t *testing.T, e *env, srv *httptest.Server, auth, ep string, i int) string {
			if i == 0 {
				sock = dialAgent(t, srv.URL, auth, "127.0.0.1")
			}
			s := sock
			id := fmt.Sprint(i)
			if code, msg := startSessionWith(t, s, e.store, id, ep, filters); code != "" {
				return code + ": " + msg
			}
			endSession(t, s, e.store, id, ep)
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvConfig(t, nil, nil, func(c *commands.Config) { c.Quotas.Storage = quota })
			srv := httptest.NewServer(e.h)
			defer srv.Close()
			var su struct {
				SignUp struct {
					Token   string
					Account struct{ ID string }
				}
			}
			e.c.MustPost(`mutation { signUp(name: "tenant") { token account { id } } }`, &su)
			auth := "Bearer " + su.SignUp.Token
			var ep struct{ CreateEndpoint struct{ ID string } }
			e.c.MustPost(`mutation { createEndpoint(input: {name: "p", mode: PROXY, target: "127.0.0.1:9"}) { id } }`, &ep,
				client.AddHeader("Authorization", auth))
			from, err := e.store.LastPosition(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			refused := quotaRefusals(t, tries, func(i int) string { return tc.try(t, e, srv, auth, ep.CreateEndpoint.ID, i) })
			appended := logtest.BytesAfter(t, e.store, from)
			t.Logf("%d tries appended %d KiB to the log under a %d KiB quota, %d refused QUOTA_EXCEEDED", tries, appended>>10, quota>>10, refused)
			// What passes the quota is at most the try that reached it.
			if appended > quota+96<<10 || refused == 0 {
				t.Errorf("appended %d KiB with a quota of %d KiB, %d refused; want at most one try past the quota, the rest refused",
					appended>>10, quota>>10, refused)
			}
			u, err := e.views.Accounts.AccountQuota(context.Background(), su.SignUp.Account.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := u.StoredBytes; got < quota {
				t.Errorf("the account's storedBytes is %d, want at least its quota %d", got, quota)
			}
		})
	}
}

// errText is err's text, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestGuestAnswersCountTowardGuestStorage: a guest inspector's own answer
// (up to 64 KiB of body) is appended to its stream, which retention keeps
// for good (only its deliveries go), and setInspectorAnswer takes no
// account: an anonymous client could change it in a loop. Every event of
// an inspector's stream now counts in its stored bytes, and so in the
// relay's storage for guests and its network's share of it: past the
// share setInspectorAnswer is refused QUOTA_EXCEEDED, nothing recorded.
func TestGuestAnswersCountTowardGuestStorage(t *testing.T) {
	const share = 128 << 10
	const tries = 40
	e := newEnvConfig(t, nil, nil, func(c *commands.Config) {
		c.GuestStorage = domain.GuestStorage{Total: share * domain.GuestNetworkShares}
	})
	var in struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &in)
	from, err := e.store.LastPosition(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a", 60<<10)
	refused := quotaRefusals(t, tries, func(i int) string {
		var out struct{ SetInspectorAnswer struct{ ID string } }
		return errText(e.c.Post(`mutation($id: ID!, $b: String) { setInspectorAnswer(id: $id, answer: {status: 200, body: $b}) { id } }`,
			&out, client.Var("id", in.CreateInspector.ID), client.Var("b", fmt.Sprint(i)+big)))
	})
	appended := logtest.BytesAfter(t, e.store, from)
	t.Logf("%d answers appended %d KiB to the log with a network's share of %d KiB, %d refused QUOTA_EXCEEDED", tries, appended>>10, share>>10, refused)
	if appended > share+96<<10 || refused == 0 {
		t.Errorf("appended %d KiB with a share of %d KiB, %d refused; want at most one answer past the share, the rest refused",
			appended>>10, share>>10, refused)
	}
}

// quotaRefusals makes tries calls of try, each answering "" or its error's
// text, and counts those refused QUOTA_EXCEEDED; any other error fails the
// test.
func quotaRefusals(t *testing.T, tries int, try func(i int) string) int {
	t.Helper()
	refused := 0
	for i := range tries {
		switch msg := try(i); {
		case msg == "":
		case strings.Contains(msg, "QUOTA_EXCEEDED"):
			refused++
		default:
			t.Fatalf("try %d: %s", i, msg)
		}
	}
	return refused
}

// TestDeviceCodesHaveARelayWideBudget: requestDeviceCode takes no token,
// and each device.code_requested.v1 is kept in the log for good, bounded
// only by --anonymous-rate per client address and network: clients of
// many networks together appended without end. The codes waiting for a
// decision now have a relay-wide budget (a few here, each asked for from
// a network of its own): past it requestDeviceCode is QUOTA_EXCEEDED,
// nothing recorded, until codes expire or are decided.
func TestDeviceCodesHaveARelayWideBudget(t *testing.T) {
	const (
		most  = 8
		tries = 40
	)
	var clock atomic.Int64
	start := time.Now()
	now := func() time.Time { return start.Add(time.Duration(clock.Load())) }
	e := newEnvConfig(t, now, nil, func(c *commands.Config) { c.MaxPendingDeviceCodes = most })
	from, err := e.store.LastPosition(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	request := func(i int) string {
		var out struct{ RequestDeviceCode struct{ UserCode string } }
		// Each from a network of its own: no network's share is reached.
		err := e.c.Post(`mutation($n: String!) { requestDeviceCode(clientName: $n) { userCode } }`, &out, client.Var("n", fmt.Sprintf("host-%d", i)),
			fromIP(fmt.Sprintf("127.0.%d.1", i+1)))
		if err == nil {
			// The next request counts this one: the views hold it.
			last, err := e.store.LastPosition(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := e.views.WaitFor(context.Background(), last); err != nil {
				t.Fatal(err)
			}
		}
		return errText(err)
	}
	refused := quotaRefusals(t, tries, request)
	appended := logtest.BytesAfter(t, e.store, from)
	t.Logf("%d requestDeviceCode appended %d bytes with a budget of %d codes waiting, %d refused QUOTA_EXCEEDED", tries, appended, most, refused)
	if refused != tries-most {
		t.Errorf("%d of %d requests refused, want all but the budget's %d", refused, tries, most)
	}
	// Once the codes expire, there is room again.
	clock.Store(int64(domain.DeviceCodeLifetime + time.Second))
	if msg := request(tries); msg != "" {
		t.Errorf("a device code once the others expired: %s", msg)
	}
}

// TestDeviceCodesHaveANetworkShare: the relay-wide budget of device codes
// waiting for a decision was one pool for every client network, so the
// clients of a few networks, each within --anonymous-rate, could fill it
// and keep every other team's `relay login` refused QUOTA_EXCEEDED for the
// codes' 10 minutes. Each client network (IPv4 /24, IPv6 /48) now holds at
// most a sixteenth of the budget (2 of 32 here): past it that network is
// refused QUOTA_EXCEEDED naming its share, and another network still gets
// its code.
func TestDeviceCodesHaveANetworkShare(t *testing.T) {
	const (
		most  = 32
		share = most / domain.GuestNetworkShares
		tries = 40
	)
	for _, tc := range []struct {
		name    string
		flood   func(i int) string // the addresses of one network
		network string             // how its refusal names it
		other   string             // an address of another network
	}{
		{"IPv4 /24", func(i int) string { return fmt.Sprintf("127.0.1.%d", i+1) }, "127.0.1.0/24", "127.0.2.1"},
		{"IPv6 /48", func(i int) string { return fmt.Sprintf("2001:db8:1:%x::1", i) }, "2001:db8:1::/48", "2001:db8:2::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvConfig(t, nil, nil, func(c *commands.Config) { c.MaxPendingDeviceCodes = most })
			var refusal string
			refused := quotaRefusals(t, tries, func(i int) string {
				msg := e.requestDeviceFrom(tc.flood(i), fmt.Sprintf("host-%d", i))
				if msg != "" {
					refusal = msg
				}
				return msg
			})
			other := e.requestDeviceFrom(tc.other, "elsewhere")
			t.Logf("one network was issued %d of %d device codes (budget %d, share %d); another network: %q", tries-refused, tries, most, share, other)
			if issued := tries - refused; issued != share {
				t.Errorf("one network was issued %d device codes, want its share %d", issued, share)
			}
			if !strings.Contains(refusal, tc.network) || !strings.Contains(refusal, fmt.Sprintf("%d of the %d", share, most)) {
				t.Errorf("a refusal past the network's share does not name the network %s and its share: %q", tc.network, refusal)
			}
			if other != "" {
				t.Errorf("another network's device code once the first holds its share: %s", other)
			}
		})
	}
}

// requestDeviceFrom asks for a device code as the client at addr, and
// answers "" or its error's text.
func (e *env) requestDeviceFrom(addr, name string) string {
	var out struct{ RequestDeviceCode struct{ UserCode string } }
	return errText(e.c.Post(`mutation($n: String!) { requestDeviceCode(clientName: $n) { userCode } }`, &out,
		client.Var("n", name), fromIP(addr)))
}

// TestLoginsAndInvitesCountTowardTheirAccount: a password sign-up claims
// its login on a stream of its own (login-<key hash>), and a sign-up
// invite lives on invite-<id>; both are kept for good, and neither name
// says whose they are, so no account's storage counted them. The account
// that claims a login, makes an invite or is made by one now counts the
// events: every byte the sign-ups and the invite appended is in the
// accounts' stored bytes.
func TestLoginsAndInvitesCountTowardTheirAccount(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	from, err := e.store.LastPosition(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	owner := newBrowser(t, srv)
	acme := owner.signUp("Acme", "ann@acme.test")
	var inv struct{ CreateInvite struct{ Code string } }
	owner.must(`mutation { createInvite { code } }`, nil, &inv)
	var su struct {
		SignUp struct{ Account struct{ ID string } }
	}
	e.c.MustPost(`mutation($c: String) { signUp(name: "invited", invite: $c) { account { id } } }`, &su, client.Var("c", inv.CreateInvite.Code))
	last, err := e.store.LastPosition(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.views.WaitFor(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	appended := logtest.BytesAfter(t, e.store, from)
	var stored int64
	for _, id := range []string{acme.Account.ID, su.SignUp.Account.ID} {
		u, err := e.views.Accounts.AccountQuota(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		stored += u.StoredBytes
	}
	t.Logf("a password sign-up, an invite and the sign-up it made appended %d bytes; their accounts count %d", appended, stored)
	if stored != appended {
		t.Errorf("the accounts count %d bytes of the %d their sign-ups and invite appended, want all", stored, appended)
	}
}

// TestSignUpsCountTowardSignupStorage: open sign-up gives every new
// account the relay's storage quota, and anyone may sign up again and
// again, so the accounts one client network signed up were bounded
// together by the disk alone. Every account made by open sign-up now
// counts in the relay's storage for sign-ups and its network's share of
// it: past the share, signUp and signUpWithPassword from that network and
// such an account's settings are refused QUOTA_EXCEEDED, nothing
// recorded, while an account the operator made, or one it gave a storage
// quota of its own, goes on.
func TestSignUpsCountTowardSignupStorage(t *testing.T) {
	const share = 128 << 10
	const tries = 40
	big := strings.Repeat("a", 60<<10)
	e := newEnvConfig(t, nil, func(r *graph.Resolver) { r.Quotas = r.Views.(*projections.Runner).Accounts }, func(c *commands.Config) {
		c.SignupStorage = domain.SignupStorage{Total: share * domain.GuestNetworkShares}
	})
	from, err := e.store.LastPosition(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	createBig := func(auth, name string) error {
		var out struct{ CreateEndpoint struct{ ID string } }
		return e.c.Post(`mutation($n: String!, $b: String) { createEndpoint(input: {name: $n, mode: LOG, answer: {status: 200, body: $b}}) { id } }`,
			&out, client.Var("n", name), client.Var("b", big), client.AddHeader("Authorization", auth))
	}
	// Each try signs up an account from the same network (the test
	// client's) and gives it an Endpoint with a 60 KiB answer.
	var first struct{ ID, Auth string }
	refused := quotaRefusals(t, tries, func(i int) string {
		var out struct {
			SignUp struct {
				Token   string
				Account struct{ ID string }
			}
		}
		if err := e.c.Post(`mutation($n: String!) { signUp(name: $n) { token account { id } } }`, &out, client.Var("n", fmt.Sprint("walk-in ", i))); err != nil {
			return err.Error()
		}
		auth := "Bearer " + out.SignUp.Token
		if first.ID == "" {
			first.ID, first.Auth = out.SignUp.Account.ID, auth
		}
		return errText(createBig(auth, "big"))
	})
	appended := logtest.BytesAfter(t, e.store, from)
	t.Logf("%d sign-ups from one network appended %d KiB to the log with a network's share of %d KiB, %d refused QUOTA_EXCEEDED",
		tries, appended>>10, share>>10, refused)
	if appended > share+96<<10 || refused == 0 {
		t.Errorf("appended %d KiB with a share of %d KiB, %d refused; want at most one try past the share, the rest refused",
			appended>>10, share>>10, refused)
	}
	// Both ways of signing up are refused from that network, saying why.
	for _, tc := range []struct{ name, mutation string }{
		{"signUp", `mutation { signUp(name: "late") { token } }`},
		{"signUpWithPassword", `mutation { signUpWithPassword(name: "late", login: "late@example.test", password: "correct horse battery") { account { id } } }`},
	} {
		var out map[string]any
		msg := errText(e.c.Post(tc.mutation, &out))
		if !strings.Contains(msg, "QUOTA_EXCEEDED") || !strings.Contains(msg, "signed up from your network") {
			t.Errorf("%s past the network's share: %q, want QUOTA_EXCEEDED naming the network's share", tc.name, msg)
		}
	}
	// The operator's account, and a signed-up one it gives a storage
	// quota of its own, are outside the storage for sign-ups.
	var ops struct{ CreateAccount struct{ Token string } }
	e.c.MustPost(`mutation { createAccount(name: "ops") { token } }`, &ops, bearerOpt(adminToken))
	var set struct{ SetAccountQuota struct{ AccountID string } }
	e.c.MustPost(`mutation($a: ID!) { setAccountQuota(account: $a, storage: "off") { accountId } }`, &set,
		client.Var("a", first.ID), bearerOpt(adminToken))
	for _, tc := range []struct{ name, auth string }{
		{"the operator's account", "Bearer " + ops.CreateAccount.Token},
		{"a signed-up account given its own quota", first.Auth},
	} {
		if err := createBig(tc.auth, "after"); err != nil {
			t.Errorf("%s once sign-ups hold their share: %v", tc.name, err)
		}
	}
}
