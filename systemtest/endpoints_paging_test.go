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

// TestCLIPagesPastALoweredCap: a relay whose --account-endpoints was
// lowered below what an account holds answers pages shorter than first
// (at most the cap), with more to come: the CLI reads on until an empty
// page, and stops after 100 pages with an error that says so. An account
// of 101 Endpoints, its relay restarted with the cap at 10, lists all 101
// (a page of 10 at a time); with the cap at 1 it would take 101 pages, and
// the CLI stops and says why. Before, both were refused INVALID_INPUT.
func TestCLIPagesPastALoweredCap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := harness.Start(t, dir, "--account-endpoints", "0")
	acct := signUpTenant(t, r, "lowered")
	const endpoints = 101
	for i := range endpoints {
		logEndpoint(t, r, acct.Token, fmt.Sprintf("ep%03d", i))
	}
	r.Stop(t)

	for _, tt := range []struct {
		cap    string
		listed int    // Endpoints listed, when it exits 0
		says   string // the error, when it exits 1
	}{
		{"10", endpoints, ""},
		{"1", 0, "more Endpoints than 100 pages list (100 read)"},
	} {
		t.Run("cap "+tt.cap, func(t *testing.T) {
			r := harness.Start(t, dir, "--account-endpoints", tt.cap)
			defer r.Stop(t)
			out, code := harness.RunCLI(t, "endpoints", "list", "-o", "json", "--server", r.BareURL(), "--token", acct.Token)
			if tt.says != "" {
				if code != 1 || !strings.Contains(out, tt.says) {
					t.Fatalf("endpoints list exited %d, want 1 saying %q:\n%.500s", code, tt.says, out)
				}
				return
			}
			var eps []struct{ ID string }
			if code != 0 {
				t.Fatalf("endpoints list exited %d:\n%.500s", code, out)
			}
			if err := json.Unmarshal([]byte(out), &eps); err != nil || len(eps) != tt.listed {
				t.Errorf("endpoints list printed %d Endpoints (%v), want %d", len(eps), err, tt.listed)
			}
		})
	}
}
