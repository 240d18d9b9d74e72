package systemtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// operatorAccount makes an account with the operator's token, which no
// API cost budget charges (signUp would be charged to the test's address).
func operatorAccount(t *testing.T, r *harness.Relay, name string) tenant {
	t.Helper()
	var out struct {
		CreateAccount struct {
			Token   string
			Account struct{ ID, Name string }
		}
	}
	r.MustGraphQL(t, quotaAdmin, `mutation($n: String!){ createAccount(name: $n){ token account{ id name } } }`, map[string]any{"n": name}, &out)
	return tenant{ID: out.CreateAccount.Account.ID, Name: out.CreateAccount.Account.Name, Token: out.CreateAccount.Token}
}

// spendAPI runs a 3-point query as token until it is refused, at most max
// times, and returns how many ran and the refusal (nil: none).
func spendAPI(t *testing.T, r *harness.Relay, token string, max int) (int, *harness.GQLError) {
	t.Helper()
	for i := range max {
		if res := r.GraphQL(t, token, `{ me { id name } }`, nil); len(res.Errors) > 0 {
			return i, &res.Errors[0]
		}
	}
	return max, nil
}

// TestAccountAPICostBudget: with --account-api-cost, an account whose
// queries spent its budget is refused RATE_LIMITED with retryAfterSeconds
// before they run, another account is not, the operator is never charged,
// and set-quota --api-cost off lifts it at once.
func TestAccountAPICostBudget(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--admin-token", quotaAdmin, "--account-api-cost", "30/h,burst=30")
	busy, calm := operatorAccount(t, r, "Busy"), operatorAccount(t, r, "Calm")

	ran, refused := spendAPI(t, r, busy.Token, 20)
	if ran != 10 || refused == nil {
		t.Fatalf("the busy account ran %d queries of 3 points within 30, then %+v; want 10 and a refusal", ran, refused)
	}
	retry, _ := refused.Extensions["retryAfterSeconds"].(float64)
	if refused.Code() != "RATE_LIMITED" || retry != 360 || !strings.Contains(refused.Message, "API budget") {
		t.Fatalf("past the budget: %+v, want RATE_LIMITED, retryAfterSeconds 360 (3 points at 30/h), the API budget named", refused)
	}
	if ran, refused := spendAPI(t, r, calm.Token, 10); ran != 10 {
		t.Fatalf("the calm account ran %d of 10: %+v", ran, refused)
	}
	// The operator's reads are never charged; they show the budget.
	if u := usageOf(t, r, busy.ID); u.APICost == nil || *u.APICost != "30/h,burst=30" || u.APICostOverride {
		t.Fatalf("usage of the busy account %+v, want the relay's API cost budget", u)
	}
	if out, code := harness.RunCLI(t, "accounts", "usage", busy.ID, "--server", r.BareURL(), "--admin-token", quotaAdmin); code != 0 || !strings.Contains(out, "API COST") || !strings.Contains(out, "30/h,burst=30") {
		t.Fatalf("relay accounts usage exited %d without the API cost budget:\n%s", code, out)
	}

	out, code := harness.RunCLI(t, "accounts", "set-quota", busy.ID, "--api-cost", "off", "--server", r.BareURL(), "--admin-token", quotaAdmin, "-o", "json")
	if code != 0 {
		t.Fatalf("set-quota --api-cost off exited %d:\n%s", code, out)
	}
	var set struct {
		APICost         *string
		APICostOverride bool
	}
	if err := json.Unmarshal([]byte(out), &set); err != nil || set.APICost != nil || !set.APICostOverride {
		t.Fatalf("set-quota --api-cost off answered %s (%v), want apiCost null, apiCostOverride", out, err)
	}
	if ran, refused := spendAPI(t, r, busy.Token, 20); ran != 20 {
		t.Fatalf("after --api-cost off the busy account ran %d of 20: %+v", ran, refused)
	}
	// The calm account keeps the relay's default.
	if ran, refused := spendAPI(t, r, calm.Token, 1); ran != 0 || refused == nil || refused.Code() != "RATE_LIMITED" {
		t.Fatalf("the calm account's 11th query: ran %d, %+v; want RATE_LIMITED", ran, refused)
	}
}

// TestAccountAPICostFlag: a malformed --account-api-cost stops relay serve
// with exit 2 and the reason.
func TestAccountAPICostFlag(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"-5/min", "lots", "10/min,burst=0"} {
		out, code := harness.RunCLI(t, "serve", "--data", t.TempDir(), "--account-api-cost", v)
		if code != 2 || !strings.Contains(out, "account-api-cost") {
			t.Fatalf("serve --account-api-cost %s exited %d, want 2 naming the flag:\n%s", v, code, out)
		}
	}
}
