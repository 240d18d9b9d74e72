package systemtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestSignupModes: --signup open lets anyone in, closed no one but the
// operator (relay accounts create), and invite whoever holds an unused
// invite from an account or the operator, once; the mode is readable.
func TestSignupModes(t *testing.T) {
	t.Parallel()
	const signUp = `mutation($n: String!, $i: String){ signUp(name: $n, invite: $i){ token account{ name } } }`
	mode := func(r *harness.Relay) string {
		var m struct{ SignupMode string }
		r.MustGraphQL(t, "", `{ signupMode }`, nil, &m)
		return m.SignupMode
	}
	open := harness.Start(t, "", "--signup", "open")
	closed := harness.Start(t, "", "--signup", "closed", "--admin-token", "ops-secret")
	byInvite := harness.Start(t, "", "--signup", "invite", "--admin-token", "ops-secret")
	for r, want := range map[*harness.Relay]string{open: "OPEN", closed: "CLOSED", byInvite: "INVITE"} {
		if got := mode(r); got != want {
			t.Errorf("signupMode = %q, want %q", got, want)
		}
	}
	signUpTenant(t, open, "walk-in")
	if got := refusal(t, closed, "", signUp, map[string]any{"n": "walk-in"}); got.Code() != "INVALID_INPUT" || !strings.Contains(got.Message, "closed") {
		t.Errorf("sign-up on a closed relay: %s %q", got.Code(), got.Message)
	}
	if out, code := harness.RunCLI(t, "accounts", "create", "--name", "ops", "--server", closed.BareURL(), "--admin-token", "ops-secret"); code != 0 {
		t.Errorf("relay accounts create on a closed relay exited %d:\n%s", code, out)
	}

	// Invite: none, a made-up one, then the operator's, used once.
	for _, inv := range []any{nil, "rin_madeup"} {
		got := refusal(t, byInvite, "", signUp, map[string]any{"n": "guest", "i": inv})
		if got.Code() != "INVALID_INPUT" || !strings.Contains(got.Message, "invite") {
			t.Errorf("sign-up with invite %v: %s %q", inv, got.Code(), got.Message)
		}
	}
	// The command line says where an invite goes.
	if out, code := newCLIHome(t).run(t, "", "login", "--server", byInvite.BareURL(), "--signup", "guest"); code != 2 ||
		!strings.Contains(out, "; with one, run relay login --server "+byInvite.BareURL()+" --signup guest --invite CODE, or open its link in the browser") {
		t.Errorf("login --signup without an invite exited %d, want 2 and the command with --invite:\n%s", code, out)
	}
	out, code := harness.RunCLI(t, "accounts", "invite", "--server", byInvite.BareURL(), "--admin-token", "ops-secret", "-o", "json")
	var inv struct {
		Code      string `json:"code"`
		URL       string `json:"url"`
		ExpiresAt string `json:"expiresAt"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if code != 0 || dec.Decode(&inv) != nil || !strings.HasPrefix(inv.Code, "rin_") || inv.URL != byInvite.BareURL()+"/?invite="+inv.Code {
		t.Fatalf("relay accounts invite exited %d:\n%s", code, out)
	}
	h := newCLIHome(t)
	out, code = h.run(t, "", "login", "--server", byInvite.BareURL(), "--signup", "guest", "--invite", inv.Code)
	if code != 0 || !strings.Contains(out, "guest") {
		t.Fatalf("login --signup --invite exited %d:\n%s", code, out)
	}
	if got := refusal(t, byInvite, "", signUp, map[string]any{"n": "second", "i": inv.Code}); got.Code() != "INVALID_INPUT" || !strings.Contains(got.Message, "already used") {
		t.Errorf("the invite used again: %s %q", got.Code(), got.Message)
	}
	// The guest invites in turn, from its stored login.
	out, code = h.run(t, "", "accounts", "invite")
	if code != 0 || !strings.Contains(out, "--invite rin_") {
		t.Fatalf("an account's relay accounts invite exited %d:\n%s", code, out)
	}
	if out, code := h.run(t, "", "login", "--server", byInvite.BareURL(), "--invite", "rin_x"); code != 2 || !strings.Contains(out, "--signup") {
		t.Errorf("--invite without --signup exited %d:\n%s", code, out)
	}
}
