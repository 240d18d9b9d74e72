package graph_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"

	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/ratelimit"
)

// apiCostEnv is the API with an API cost budget of budget per account and
// a clock the test moves.
type apiCostEnv struct {
	*env
	mu  sync.Mutex
	now time.Time
}

func newAPICostEnv(t *testing.T, budget ratelimit.Rate) *apiCostEnv {
	t.Helper()
	a := &apiCostEnv{now: time.Now()}
	a.env = newEnvWith(t, nil, func(r *graph.Resolver) {
		r.APICost = budget
		r.Quotas = r.Views.(*projections.Runner).Accounts
		r.Now = a.clock
	})
	return a
}

func (a *apiCostEnv) clock() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.now
}

func (a *apiCostEnv) advance(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.now = a.now.Add(d)
}

// account makes an account with the operator's token (never charged) and
// returns its id and token.
func (a *apiCostEnv) account(t *testing.T, name string) (string, string) {
	t.Helper()
	var out struct {
		CreateAccount struct {
			Account struct{ ID string }
			Token   string
		}
	}
	a.c.MustPost(`mutation($n: String!){ createAccount(name: $n){ account{ id } token } }`, &out, client.Var("n", name), bearerOpt(adminToken))
	return out.CreateAccount.Account.ID, out.CreateAccount.Token
}

// apiReply is an operation's refusal: its code, retryAfterSeconds and
// message ("" code: it ran).
type apiReply struct {
	code    string
	retry   float64
	message string
}

func (a *apiCostEnv) post(t *testing.T, query string, opts ...client.Option) apiReply {
	t.Helper()
	resp, err := a.c.RawPost(query, opts...)
	if err != nil {
		t.Fatalf("post %q: %v", query, err)
	}
	var errs []struct {
		Message    string
		Extensions map[string]any
	}
	if len(resp.Errors) > 0 {
		if err := json.Unmarshal(resp.Errors, &errs); err != nil {
			t.Fatalf("errors of %q: %v: %s", query, err, resp.Errors)
		}
	}
	if len(errs) == 0 {
		return apiReply{}
	}
	code, _ := errs[0].Extensions["code"].(string)
	retry, _ := errs[0].Extensions["retryAfterSeconds"].(float64)
	return apiReply{code: code, retry: retry, message: errs[0].Message}
}

const meQuery = `{ me { id name } }`

// spend runs meQuery as tok until it is refused, at most max times, and
// returns how many ran and the refusal.
func (a *apiCostEnv) spend(t *testing.T, tok string, max int) (int, apiReply) {
	t.Helper()
	for i := range max {
		if r := a.post(t, meQuery, bearerOpt(tok)); r.code != "" {
			return i, r
		}
	}
	return max, apiReply{}
}

func wantBudgetSpent(t *testing.T, what string, r apiReply) {
	t.Helper()
	if r.code != "RATE_LIMITED" || r.retry < 1 || !strings.Contains(r.message, "API budget") {
		t.Fatalf("%s: %+v, want RATE_LIMITED with retryAfterSeconds naming the API budget", what, r)
	}
}

// TestAPICostBudgetPerAccount: an account past its API cost budget is
// refused RATE_LIMITED with retryAfterSeconds before its operation runs,
// while another account's same query runs; the operator's token is never
// charged; an override lowers or lifts one account's budget at once.
func TestAPICostBudgetPerAccount(t *testing.T) {
	budget := ratelimit.Rate{N: 12, Per: time.Minute, Burst: 12} // meQuery costs 3: four of them
	e := newAPICostEnv(t, budget)
	busyID, busy := e.account(t, "busy")
	calmID, calm := e.account(t, "calm")

	ran, refused := e.spend(t, busy, 10)
	if ran != 4 {
		t.Fatalf("the busy account ran %d queries within a budget of 12 points, want 4 (3 points each); then %+v", ran, refused)
	}
	wantBudgetSpent(t, "past the budget", refused)
	if refused.retry != 15 { // 3 points at 12 a minute
		t.Fatalf("retryAfterSeconds %v, want 15", refused.retry)
	}
	if ran, r := e.spend(t, calm, 4); ran != 4 {
		t.Fatalf("the calm account ran %d of 4 queries: %+v", ran, r)
	}
	// The operator's queries are never charged, past any budget.
	for i := range 10 {
		if r := e.post(t, `{ accountsUsage(first: 5){ accountId apiCost } }`, bearerOpt(adminToken)); r.code != "" {
			t.Fatalf("the operator's query %d: %+v", i, r)
		}
	}
	// The budget refills at its rate: after the wait it names, one more runs.
	e.advance(15 * time.Second)
	if ran, r := e.spend(t, busy, 2); ran != 1 {
		t.Fatalf("after retryAfterSeconds the busy account ran %d queries, want 1: %+v", ran, r)
	}

	// Overrides: off lifts the busy account's budget, a small one lowers
	// the calm account's; the relay's default stays for the others.
	var set struct {
		SetAccountQuota struct {
			APICost         *string
			APICostOverride bool
		}
	}
	setQuota := `mutation($a: ID!, $c: String){ setAccountQuota(account: $a, apiCost: $c){ apiCost apiCostOverride } }`
	e.c.MustPost(setQuota, &set, client.Var("a", busyID), client.Var("c", "off"), bearerOpt(adminToken))
	if set.SetAccountQuota.APICost != nil || !set.SetAccountQuota.APICostOverride {
		t.Fatalf("usage after apiCost off: %+v", set.SetAccountQuota)
	}
	if ran, r := e.spend(t, busy, 20); ran != 20 {
		t.Fatalf("with its budget off the busy account ran %d of 20: %+v", ran, r)
	}
	e.c.MustPost(setQuota, &set, client.Var("a", calmID), client.Var("c", "3/h"), bearerOpt(adminToken))
	if set.SetAccountQuota.APICost == nil || *set.SetAccountQuota.APICost != "3/h,burst=3" {
		t.Fatalf("usage after apiCost 3/h: %+v", set.SetAccountQuota)
	}
	e.advance(time.Hour) // every bucket full again
	ran, refused = e.spend(t, calm, 3)
	if ran != 1 {
		t.Fatalf("with 3/h the calm account ran %d queries, want 1", ran)
	}
	wantBudgetSpent(t, "past a lowered budget", refused)
	if refused.retry != 3600 {
		t.Fatalf("retryAfterSeconds under 3/h: %v, want 3600", refused.retry)
	}
	// A raised budget lets through what the default would refuse. The
	// bucket keeps the points it had and refills at the new rate from the
	// account's next operation: a second, not an hour.
	e.c.MustPost(setQuota, &set, client.Var("a", calmID), client.Var("c", "600/min"), bearerOpt(adminToken))
	if r := e.post(t, meQuery, bearerOpt(calm)); r.code != "" && r.retry != 1 {
		t.Fatalf("right after the raise: %+v, want it run or retryAfterSeconds 1", r)
	}
	e.advance(time.Minute)
	if ran, r := e.spend(t, calm, 50); ran != 50 {
		t.Fatalf("with 600/min the calm account ran %d of 50: %+v", ran, r)
	}
	// Its own usage shows it.
	var me struct {
		Me struct {
			Usage struct {
				APICost         *string
				APICostOverride bool
			}
		}
	}
	e.c.MustPost(`{ me { usage { apiCost apiCostOverride } } }`, &me, bearerOpt(calm))
	if u := me.Me.Usage; u.APICost == nil || *u.APICost != "600/min,burst=600" || !u.APICostOverride {
		t.Fatalf("me.usage: %+v", u)
	}
	// A malformed budget is refused and changes nothing.
	if r := e.post(t, `mutation($a: ID!){ setAccountQuota(account: $a, apiCost: "-5/min"){ apiCost } }`, client.Var("a", calmID), bearerOpt(adminToken)); r.code != "INVALID_INPUT" {
		t.Fatalf("apiCost -5/min: %+v", r)
	}
}

// TestAPICostBudgetAnonymous: operations without a token are charged to
// their client address at the relay's default; an operation costlier than
// the whole burst takes a full bucket rather than never running.
func TestAPICostBudgetAnonymous(t *testing.T) {
	e := newAPICostEnv(t, ratelimit.Rate{N: 100, Per: time.Minute, Burst: 100})
	const create = `mutation{ createInspector{ id } }` // costs over 1000
	if r := e.post(t, create, fromAddr("192.0.2.7")); r.code != "" {
		t.Fatalf("the first inspector from a full bucket: %+v", r)
	}
	r := e.post(t, create, fromAddr("192.0.2.7"))
	wantBudgetSpent(t, "a second costly operation", r)
	if r.retry != 60 {
		t.Fatalf("retryAfterSeconds %v, want 60 (the bucket's refill)", r.retry)
	}
	if r := e.post(t, create, fromAddr("192.0.2.8")); r.code != "" {
		t.Fatalf("another address: %+v", r)
	}
}
