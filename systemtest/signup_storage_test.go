package systemtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// signUp signs up an account from the client's address, returning it or
// the error's code and message.
func (g guestClient) signUp(t *testing.T, name string) (acct tenant, code, message string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": `mutation($n: String!){ signUp(name: $n){ token account{ id name } } }`,
		"variables": map[string]any{"n": name}})
	req, _ := http.NewRequest(http.MethodPost, g.r.BareURL()+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			SignUp struct {
				Token   string
				Account struct{ ID, Name string }
			}
		}
		Errors []harness.GQLError
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("signUp answered %s: %v", resp.Status, err)
	}
	if len(out.Errors) > 0 {
		return tenant{}, out.Errors[0].Code(), out.Errors[0].Message
	}
	return tenant{ID: out.Data.SignUp.Account.ID, Name: name, Token: out.Data.SignUp.Token}, "", ""
}

// storedBytes is what the account's streams take, as its owner reads it.
func storedBytes(t *testing.T, r *harness.Relay, token string) int64 {
	t.Helper()
	var me struct {
		Me struct{ Usage struct{ StoredBytes int64 } }
	}
	r.MustGraphQL(t, token, `{ me { usage { storedBytes } } }`, nil, &me)
	return me.Me.Usage.StoredBytes
}

// fillUntilRefused sends bodies to an Endpoint until it answers other than
// 204 (at most tries), each once the views show the one before; it
// returns the last status and body.
func fillUntilRefused(t *testing.T, r *harness.Relay, acct tenant, endpoint string, body []byte, tries int) (status int, text string) {
	t.Helper()
	for i := range tries {
		resp := send(t, r, endpoint, "POST", fmt.Sprintf("/fill/%d", i), nil, body)
		if resp.Status != http.StatusNoContent {
			return resp.Status, string(resp.Body)
		}
		harness.Eventually(t, 10*time.Second, "the delivery in the views", func() bool {
			return endpointDeliveryCount(t, r, acct.Token, endpoint) == i+1
		})
	}
	return http.StatusNoContent, ""
}

// TestSignupStorageIsBoundedRelayWide: open sign-up gives every new
// account --account-storage, and a client network may sign up ten times
// --anonymous-rate's accounts an hour, so the accounts of strangers
// together were bounded by the disk alone, and at the disk reserve every
// team's deliveries are refused. Now every account made by open sign-up
// takes at most --signup-storage with the others, and those one network
// signed up a sixteenth of it: past either, signUp from that network is
// QUOTA_EXCEEDED and a delivery to those accounts 507, nothing recorded,
// while an account the operator made, or one it raised out of the pool
// with a storage quota of its own, records as before.
func TestSignupStorageIsBoundedRelayWide(t *testing.T) {
	const (
		budget   = 512 << 10 // a network's share: 32 KiB, half an account's quota
		networks = 24
	)
	r := harness.Start(t, "", "--admin-token", quotaAdmin, "--account-storage", "64KiB", "--signup-storage", "512KiB",
		"--anonymous-rate", "1000/h,burst=1000", "--address-rate", "1000/s,burst=1000")
	body := bytes.Repeat([]byte("s"), 8<<10)
	var accounts []tenant
	var endpoints []string
	refusedSignUp, refused507 := 0, 0
	stuff := func(g guestClient, name string) {
		acct, code, msg := g.signUp(t, name)
		switch code {
		case "":
		case "QUOTA_EXCEEDED":
			if !strings.Contains(msg, "open sign-up") {
				t.Fatalf("signUp refused without naming the storage for sign-ups: %q", msg)
			}
			refusedSignUp++
			return
		default:
			t.Fatalf("signUp: %s %q", code, msg)
		}
		accounts = append(accounts, acct)
		// The account's own events count too: its Endpoint may be the
		// one that reaches the bound.
		res := r.GraphQL(t, acct.Token, `mutation{ createEndpoint(input: {name: "fill", mode: LOG}){ id } }`, nil)
		if len(res.Errors) > 0 {
			if res.Errors[0].Code() != "QUOTA_EXCEEDED" || !strings.Contains(res.Errors[0].Message, "open sign-up") {
				t.Fatalf("createEndpoint: %s %q", res.Errors[0].Code(), res.Errors[0].Message)
			}
			return
		}
		var created struct{ CreateEndpoint struct{ ID string } }
		if err := json.Unmarshal(res.Data, &created); err != nil {
			t.Fatal(err)
		}
		ep := created.CreateEndpoint.ID
		endpoints = append(endpoints, ep)
		switch status, text := fillUntilRefused(t, r, acct, ep, body, 20); {
		case status == http.StatusInsufficientStorage && strings.Contains(text, "open sign-up"):
			refused507++
		case status == http.StatusInsufficientStorage && strings.Contains(text, "this account's storage quota"):
		default:
			t.Fatalf("filling %s: %d %q", ep, status, text)
		}
	}
	stored := func() (n int64) {
		for _, a := range accounts {
			n += storedBytes(t, r, a.Token)
		}
		return n
	}
	// One network's clients sign up four accounts.
	for i := range 4 {
		stuff(newGuestClient(r, fmt.Sprintf("127.0.200.%d", i+1)), fmt.Sprintf("net-200-%d", i))
	}
	oneNetwork, oneNetworkAccounts := stored(), len(accounts)
	// Then a client on each of many networks, an account each.
	for n := range networks {
		stuff(newGuestClient(r, fmt.Sprintf("127.0.%d.1", n+1)), fmt.Sprintf("net-%d", n+1))
	}
	all := stored()
	t.Logf("one network signed up %d accounts; %d networks' sign-ups made %d accounts", oneNetworkAccounts, networks+1, len(accounts))
	// What passes a bound is the delivery that reached it (one body of
	// 8 KiB and its headers).
	assertSharedBudget(t, sharedBudget{
		flag: "--signup-storage", made: "accounts made by open sign-up", budget: budget, slop: 10 << 10,
		oneNetwork: oneNetwork, all: all, refusedCreate: refusedSignUp, refused507: refused507,
	})

	// An account the operator made is outside the pool: it records.
	out, code := harness.RunCLI(t, "accounts", "create", "--name", "ops", "--server", r.BareURL(), "--admin-token", quotaAdmin)
	if code != 0 {
		t.Fatalf("relay accounts create exited %d:\n%s", code, out)
	}
	_, token, ok := strings.Cut(out, "\ntoken ")
	if !ok {
		t.Fatalf("relay accounts create printed no token:\n%s", out)
	}
	ops := tenant{Name: "ops", Token: strings.TrimSpace(token)}
	opsEP := logEndpoint(t, r, ops.Token, "ops")
	if resp := send(t, r, opsEP, "POST", "/after-sign-ups", nil, body); resp.Status != http.StatusNoContent {
		t.Fatalf("the operator's account's delivery once sign-ups are full: %d %q", resp.Status, resp.Body)
	}
	// A sign-up the operator raises with a quota of its own leaves the
	// pool: its Endpoint records again.
	first := accounts[0]
	if out, code := harness.RunCLI(t, "accounts", "set-quota", first.ID, "--storage", "1MiB", "--server", r.BareURL(), "--admin-token", quotaAdmin); code != 0 {
		t.Fatalf("set-quota exited %d:\n%s", code, out)
	}
	harness.Eventually(t, 10*time.Second, "the raised account records again", func() bool {
		return send(t, r, endpoints[0], "POST", "/raised", nil, body).Status == http.StatusNoContent
	})
}

// TestQueuedAnswersPastSignupStorageStoreNoBodies: an account made by
// open sign-up queues four deliveries to its QUEUE Endpoint (response
// capture on) while its local process holds its answers, then a 96 KiB
// one takes the accounts its network signed up past their share of
// --signup-storage (64 KiB of 1 MiB; its own --account-storage has room):
// its deliveries are refused 507. When the local process answers, the
// queue still delivers the four, and their answers (200 KiB each) are
// recorded without their bodies, saying why; before, they were stored
// whole.
func TestQueuedAnswersPastSignupStorageStoreNoBodies(t *testing.T) {
	t.Parallel()
	const queued = 4
	answer := incompressible(200 << 10)
	r := harness.Start(t, "", "--admin-token", quotaAdmin, "--signup-storage", "1MiB")
	acct := signUpTenant(t, r, "owner")
	release := make(chan struct{})
	releaseAnswers := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseAnswers)
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			_, _ = w.Write(answer)
		case <-r.Context().Done(): // the agent went: the test failed before the release
		}
	}))
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "queue", "mode": "QUEUE", "target": target, "responseCapture": true})
	// Past the storage for sign-ups an agent session is refused: the
	// listener connects before.
	startAgentFor(t, r, acct.Token, ep.ID, target)
	ids := sendQueued(t, r, ep.ID, queued, "/queued")
	if res := send(t, r, ep.ID, "POST", "/fill", nil, bytes.Repeat([]byte("f"), 96<<10)); res.Status != http.StatusAccepted {
		t.Fatalf("the delivery that fills the network's share: %d %q", res.Status, res.Body)
	}
	harness.Eventually(t, 15*time.Second, "deliveries refused by the storage for sign-ups", func() bool {
		res := send(t, r, ep.ID, "POST", "/refused", nil, []byte("x"))
		return res.Status == http.StatusInsufficientStorage && strings.Contains(string(res.Body), "open sign-up")
	})
	before := usageOf(t, r, acct.ID)
	if before.StorageQuota != nil && before.StoredBytes >= *before.StorageQuota {
		t.Fatalf("usage %+v: the account is at its own quota, not only the storage for sign-ups", before)
	}

	releaseAnswers()
	harness.Eventually(t, 60*time.Second, "every queued delivery delivered", func() bool {
		for _, id := range ids {
			if q := deliveryQueue(t, r, acct.Token, id); q == nil || q.State != "delivered" {
				return false
			}
		}
		return true
	})
	after := usageOf(t, r, acct.ID)
	captured := 0
	for _, id := range ids {
		var out struct {
			Delivery struct {
				Attempts []struct {
					Status   *int
					Response *struct {
						Captured    bool
						NotCaptured *string
					}
				}
			}
		}
		r.MustGraphQL(t, acct.Token, `query($id: ID!){ delivery(id: $id){ attempts{ status response{ captured notCaptured } } } }`, map[string]any{"id": id}, &out)
		for _, a := range out.Delivery.Attempts {
			switch {
			case a.Response == nil:
				t.Errorf("delivery %s: an attempt (status %s) without a response", id, intp(a.Status))
			case a.Response.Captured:
				captured++
			case strp(a.Response.NotCaptured) != `"storage for sign-ups full"`:
				t.Errorf("delivery %s: notCaptured %s, want \"storage for sign-ups full\"", id, strp(a.Response.NotCaptured))
			}
		}
	}
	t.Logf("%d queued deliveries answered 200 KiB past the network's share of --signup-storage: %d answers captured; storedBytes %d -> %d",
		queued, captured, before.StoredBytes, after.StoredBytes)
	if grew := after.StoredBytes - before.StoredBytes; captured > 0 || grew > (queued+1)*4<<10 {
		t.Errorf("past the storage for sign-ups the queue stored %d answers with their bodies, storedBytes grew by %d", captured, grew)
	}
}
