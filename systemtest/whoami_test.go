package systemtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// jsonWhoami mirrors `relay whoami -o json`.
type jsonWhoami struct {
	Server     string             `json:"server"`
	ServerFrom string             `json:"serverFrom"`
	Admin      bool               `json:"admin"`
	Account    *jsonWhoamiAccount `json:"account"`
	Member     *jsonWhoamiMember  `json:"member"`
	Token      jsonWhoamiToken    `json:"token"`
}

type jsonWhoamiAccount struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type jsonWhoamiMember struct {
	Login string `json:"login"`
	Role  string `json:"role"`
}

type jsonWhoamiToken struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
	From string  `json:"from"`
}

// String is w with its pointers followed, to compare and to show.
func (w jsonWhoami) String() string {
	s := func(p *string) string {
		if p == nil {
			return "null"
		}
		return *p
	}
	return fmt.Sprintf("server %s from %s, admin %v, account %+v, member %+v, token %s (%s) from %s",
		w.Server, w.ServerFrom, w.Admin, w.Account, w.Member, s(w.Token.Name), s(w.Token.ID), w.Token.From)
}

// TestWhoami: relay whoami names the relay, the account (and member) and
// the token this machine uses, and where the CLI found each, in text and
// -o json. Two accounts, and two tokens of one of them, share the relay,
// so naming another account or another token fails; RELAY_TOKEN of one
// account wins over the stored login of another; the operator's admin
// token is said to act for no account, with exit 0.
func TestWhoami(t *testing.T) {
	t.Parallel()
	const admin = "whoami-admin-token"
	r := harness.Start(t, "", "--admin-token", admin)
	server := r.BareURL()

	laptop, desktop := newCLIHome(t), newCLIHome(t)
	var alice jsonLogin
	laptop.jsonOut(t, &alice, "login", "--server", server, "--signup", "alice")
	first := laptop.tokens(t)
	var created struct {
		Token  cliToken `json:"token"`
		Secret string   `json:"secret"`
	}
	laptop.jsonOut(t, &created, "tokens", "create", "desktop")
	if out, code := desktop.run(t, "", "login", "--server", server, "--token", created.Secret); code != 0 {
		t.Fatalf("login with the desktop token exited %d:\n%s", code, out)
	}
	if len(first) != 1 || first[0].Name != "first token" {
		t.Fatalf("alice's tokens after sign-up: %+v", first)
	}

	// bob signs up in the console: his tokens act for him, a member.
	bob := signUpMember(t, r, "bob's team", "bob@example.com", "correct horse battery")
	var made struct {
		CreateToken struct {
			Token  struct{ ID string }
			Secret string
		}
	}
	r.MustGraphQL(t, bob.Session, `mutation{ createToken(name: "bob-ci"){ token{ id } secret } }`, nil, &made)
	bobToken := made.CreateToken

	stored := func(h cliHome) string { return "stored by relay login in " + h.configPath() }
	token := func(id, name, from string) jsonWhoamiToken { return jsonWhoamiToken{ID: &id, Name: &name, From: from} }
	aliceAccount := &jsonWhoamiAccount{ID: alice.Account.ID, Name: "alice"}
	tests := []struct {
		name     string
		home     cliHome
		env      []string
		args     []string
		want     []string // every line of the text, in order
		wantJSON jsonWhoami
	}{
		{"the stored login", laptop, nil, nil,
			[]string{"relay:    " + server + ", " + stored(laptop),
				"account:  alice (" + alice.Account.ID + ")",
				"token:    first token (" + first[0].ID + "), " + stored(laptop)},
			jsonWhoami{Server: server, ServerFrom: laptop.configPath(), Account: aliceAccount,
				Token: token(first[0].ID, "first token", laptop.configPath())}},
		{"another token of the same account", desktop, nil, nil,
			[]string{"relay:    " + server + ", " + stored(desktop),
				"account:  alice (" + alice.Account.ID + ")",
				"token:    desktop (" + created.Token.ID + "), " + stored(desktop)},
			jsonWhoami{Server: server, ServerFrom: desktop.configPath(), Account: aliceAccount,
				Token: token(created.Token.ID, "desktop", desktop.configPath())}},
		{"RELAY_TOKEN of another account over a stored login", laptop, []string{"RELAY_TOKEN=" + bobToken.Secret, "RELAY_SERVER=" + server}, nil,
			[]string{"relay:    " + server + ", from RELAY_SERVER",
				"account:  bob's team (" + bob.AccountID + ")",
				"member:   bob@example.com (owner)",
				"token:    bob-ci (" + bobToken.Token.ID + "), from RELAY_TOKEN"},
			jsonWhoami{Server: server, ServerFrom: "RELAY_SERVER", Account: &jsonWhoamiAccount{ID: bob.AccountID, Name: "bob's team"},
				Member: &jsonWhoamiMember{Login: "bob@example.com", Role: "OWNER"}, Token: token(bobToken.Token.ID, "bob-ci", "RELAY_TOKEN")}},
		{"the admin token", newCLIHome(t), nil, []string{"--server", server, "--token", admin},
			[]string{"relay:    " + server + ", from --server",
				"account:  none: the admin token acts for no account; relay accounts and relay events verify --server take it as --admin-token",
				"token:    the relay's admin token (relay serve --admin-token), from --token"},
			jsonWhoami{Server: server, ServerFrom: "--server", Admin: true, Token: jsonWhoamiToken{From: "--token"}}},
	}
	for _, tt := range tests {
		c := tt.home.command("")
		c.Env = append(c.Env, tt.env...)
		out, code := harness.RunWith(t, c, append([]string{"whoami"}, tt.args...)...)
		if want := strings.Join(tt.want, "\n") + "\n"; code != 0 || out != want {
			t.Errorf("%s: relay whoami exited %d, want 0 and\n%s\ngot:\n%s", tt.name, code, want, out)
		}
		out, code = harness.RunWith(t, c, append([]string{"whoami", "-o", "json"}, tt.args...)...)
		if code != 0 {
			t.Errorf("%s: relay whoami -o json exited %d:\n%s", tt.name, code, out)
			continue
		}
		var got jsonWhoami
		decodeStrict(t, "whoami", out, &got)
		if got.String() != tt.wantJSON.String() {
			t.Errorf("%s: relay whoami -o json is\n%s\nwant\n%s", tt.name, got, tt.wantJSON)
		}
	}

	// A revoked token, on a relay with an admin token: refused as every
	// client command refuses it, not taken for the admin token.
	if out, code := laptop.run(t, "", "tokens", "revoke", created.Token.ID); code != 0 {
		t.Fatalf("tokens revoke exited %d:\n%s", code, out)
	}
	out, code := desktop.run(t, "", "whoami")
	if want := "relay: whoami: token refused by " + server + ": "; code != 2 || !strings.HasPrefix(out, want) ||
		!strings.Contains(out, "; run `relay login --server "+server+"` (UNAUTHENTICATED)") || strings.Contains(out, "admin") {
		t.Errorf("whoami with a revoked token exited %d, want 2 and %q... saying relay login signs in again:\n%s", code, want, out)
	}
}

// TestAdminCommandsSpendNoRefusedTokens: the operator's admin token is a
// valid credential, never counted as a refused one (graph.FailedAuthRate, 30
// a minute per client address). relay whoami with it (me and tokens are
// refused it, FORBIDDEN), the operator's own commands, and the client
// commands and the agent it cannot serve (exit 2, saying it acts for no
// account), all run from one address more times than that budget, leave a
// wrong token from the same address its whole budget before RATE_LIMITED,
// and a member's token works.
func TestAdminCommandsSpendNoRefusedTokens(t *testing.T) {
	t.Parallel()
	const admin = "spend-admin-token"
	const burst = 30 // graph.FailedAuthRate
	r := harness.Start(t, "", "--admin-token", admin)
	server := r.BareURL()
	laptop := newCLIHome(t)
	var alice jsonLogin
	laptop.jsonOut(t, &alice, "login", "--server", server, "--signup", "alice")
	var ep jsonEndpoint
	laptop.jsonOut(t, &ep, "endpoints", "create", "orders", "--mode", "LOG")

	as := func(args ...string) []string { return append(args, "--server", server, "--token", admin) }
	operator := func(args ...string) []string { return append(args, "--server", server, "--admin-token", admin) }
	const noAccount = "the admin token acts for no account"
	tests := []struct {
		name string
		args []string
		runs int
		code int
		want string // in the output
	}{
		{"whoami", as("whoami"), burst/2 + 1, 0, "account:  none: " + noAccount},
		{"whoami -o json", as("whoami", "-o", "json"), burst/2 + 1, 0, `"admin": true`},
		{"accounts usage", operator("accounts", "usage"), 8, 0, alice.Account.ID},
		{"accounts set-quota", operator("accounts", "set-quota", alice.Account.ID, "--storage", "5GiB"), 8, 0, alice.Account.ID},
		{"accounts invite", operator("accounts", "invite"), 8, 0, "invite rin_"},
		{"accounts create", operator("accounts", "create", "--name", "ops"), 8, 0, "(ops)"},
		{"events verify", operator("events", "verify"), 8, 0, "ok: "},
		{"endpoints list", as("endpoints", "list"), 8, 2, noAccount + ": "},
		{"tokens list", as("tokens", "list"), 8, 2, noAccount + ": "},
		{"agent", as("agent", "--endpoint", ep.ID, "--target", "127.0.0.1:9"), 8, 2, noAccount + ": "},
		{"login", as("login"), 8, 2, "this is the relay's admin token: it acts for no account, so relay login does not keep it"},
	}
	home := newCLIHome(t)
	for _, tt := range tests {
		failed := 0
		for i := range tt.runs {
			out, code := home.run(t, "", tt.args...)
			if code != tt.code || !strings.Contains(out, tt.want) {
				if failed++; failed == 1 {
					t.Errorf("%s, run %d of %d with the admin token: exit %d, want %d and %q:\n%s", tt.name, i+1, tt.runs, code, tt.code, tt.want, out)
				}
			}
		}
		if failed > 0 {
			t.Errorf("%s: %d of %d runs with the admin token failed", tt.name, failed, tt.runs)
		}
	}

	if out, code := laptop.run(t, "", "whoami"); code != 0 || !strings.Contains(out, "account:  alice ("+alice.Account.ID+")") {
		t.Errorf("a member's whoami after the admin's commands exited %d:\n%s", code, out)
	}
	// The bound is kept: a wrong token is let through its burst, then
	// RATE_LIMITED.
	let := 0
	for ; let <= burst+10; let++ {
		res := r.GraphQL(t, "rly_revokedorunknown", `{ tokens { id } }`, nil)
		if len(res.Errors) == 0 {
			t.Fatalf("a wrong token was answered: %s", res)
		}
		if res.Errors[0].Code() == "RATE_LIMITED" {
			break
		}
		if res.Errors[0].Code() != "UNAUTHENTICATED" {
			t.Fatalf("wrong token %d: %s", let+1, res)
		}
	}
	if let < burst || let > burst+10 {
		t.Fatalf("after the admin's commands a wrong token was let through %d times before RATE_LIMITED, want %d: the admin token spent %d", let, burst, burst-let)
	}
}
