package systemtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestCLIPagesTheEndpointsList: on a relay without a cap on an account's
// Endpoints (--account-endpoints 0) the endpoints list is priced at 1 000
// rows and refuses a list without first to an account holding more. The
// commands page with first and after, so an account of 1 001 Endpoints
// logs in, lists all 1 001 and finds the last by name. Before, each of
// these was refused INVALID_INPUT (exit 2).
func TestCLIPagesTheEndpointsList(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--account-endpoints", "0")
	acct := signUpTenant(t, r, "many")
	const endpoints = 1001
	var last string
	for i := range endpoints {
		last = logEndpoint(t, r, acct.Token, fmt.Sprintf("ep%04d", i))
	}
	lastName := fmt.Sprintf("ep%04d", endpoints-1)
	h := newCLIHome(t)
	server := r.BareURL()

	for _, tt := range []struct {
		name  string
		args  []string
		check func(t *testing.T, out string)
	}{
		{"login counts them all", []string{"login", "--server", server, "--token", acct.Token, "-o", "json"}, func(t *testing.T, out string) {
			t.Helper()
			var login jsonLogin
			decodeStrict(t, "login", out, &login)
			if login.Endpoints != endpoints {
				t.Errorf("login counted %d Endpoints, want %d", login.Endpoints, endpoints)
			}
		}},
		{"list -o json prints them all", []string{"endpoints", "list", "-o", "json"}, func(t *testing.T, out string) {
			t.Helper()
			var eps []struct{ ID, Name string }
			if err := json.Unmarshal([]byte(out), &eps); err != nil {
				t.Fatalf("endpoints list -o json: %v\n%.500s", err, out)
			}
			if len(eps) != endpoints || eps[len(eps)-1].ID != last {
				t.Errorf("endpoints list printed %d Endpoints, want %d ending with %s", len(eps), endpoints, last)
			}
		}},
		{"list prints a line for each", []string{"endpoints", "list"}, func(t *testing.T, out string) {
			t.Helper()
			if got := strings.Count(out, "\n") - 1; got != endpoints || !strings.Contains(out, last+"  "+lastName) {
				t.Errorf("endpoints list printed %d lines under its header, want %d with %s", got, endpoints, lastName)
			}
		}},
		{"show finds the last by name", []string{"endpoints", "show", lastName, "-o", "json"}, func(t *testing.T, out string) {
			t.Helper()
			var ep struct{ ID string }
			if err := json.Unmarshal([]byte(out), &ep); err != nil || ep.ID != last {
				t.Errorf("endpoints show %s: id %q (%v), want %s\n%.500s", lastName, ep.ID, err, last, out)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if args[0] != "login" {
				args = append(args, "--server", server, "--token", acct.Token)
			}
			out, code := h.run(t, "", args...)
			if code != 0 {
				t.Fatalf("relay %v exited %d:\n%.500s", tt.args, code, out)
			}
			tt.check(t, out)
		})
	}
}
