package systemtest

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/systemtest/harness"
)

// cliToken mirrors `relay tokens list -o json`.
type cliToken struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	CreatedAt  string  `json:"createdAt"`
	LastUsedAt *string `json:"lastUsedAt"`
	ExpiresAt  *string `json:"expiresAt"`
	Current    bool    `json:"current"`
}

func (h cliHome) tokens(t *testing.T) []cliToken {
	t.Helper()
	out, code := h.run(t, "", "tokens", "list", "-o", "json")
	if code != 0 {
		t.Fatalf("tokens list exited %d:\n%s", code, out)
	}
	var list []cliToken
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		t.Fatalf("tokens list -o json: %v\n%s", err, out)
	}
	return list
}

// TestTokensPerDevice: a token made for a second machine works there, is
// listed by name, and once revoked is refused at once with a clear
// message, closing the `relay listen` that used it (which says why and
// exits 2 instead of reconnecting); another account's token ids read like
// unknown ones; `relay logout` revokes the stored token; and no token's
// plaintext is in the data folder, the event export or the relay's logs.
func TestTokensPerDevice(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	server := r.BareURL()
	laptop, desktop := newCLIHome(t), newCLIHome(t)
	if out, code := laptop.run(t, "", "login", "--server", server, "--signup", "alice"); code != 0 {
		t.Fatalf("login --signup exited %d:\n%s", code, out)
	}
	aliceFirst, _ := laptop.stored(t)

	list := laptop.tokens(t)
	if len(list) != 1 || list[0].Name != "first token" || !list[0].Current {
		t.Fatalf("after sign-up the tokens are %+v, want the current \"first token\"", list)
	}
	out, code := laptop.run(t, "", "tokens", "create", "desktop", "--expires-in", "30d", "-o", "json")
	var created struct {
		Token  cliToken `json:"token"`
		Secret string   `json:"secret"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil || created.Secret == "" || created.Token.ExpiresAt == nil {
		t.Fatalf("tokens create exited %d:\n%s", code, out)
	}
	for _, bad := range [][]string{
		{"tokens", "create", "x", "--expires-in", "soon"},
		{"tokens", "create", " "},
		{"tokens", "revoke"},
	} {
		if out, code := laptop.run(t, "", bad...); code != 2 {
			t.Errorf("relay %v exited %d, want 2:\n%s", bad, code, out)
		}
	}
	if out, code := desktop.run(t, "", "login", "--server", server, "--token", created.Secret); code != 0 {
		t.Fatalf("login with the new token exited %d:\n%s", code, out)
	}
	list = desktop.tokens(t)
	if len(list) != 2 || list[0].Current || !list[1].Current || list[1].ID != created.Token.ID || list[1].Name != "desktop" {
		t.Fatalf("listed from the desktop: %+v", list)
	}

	_, port := recordingTarget(t)
	listen := desktop.startIn(t, t.TempDir(), "listen", port)
	id := waitOutput(t, listen, publicURLLine)[1]
	waitAgent(t, r, aliceFirst.Token, id, true)

	// Another account cannot tell alice's token id from an unknown one.
	bob := newCLIHome(t)
	if out, code := bob.run(t, "", "login", "--server", server, "--signup", "bob"); code != 0 {
		t.Fatalf("bob's sign-up exited %d:\n%s", code, out)
	}
	const unknown = "0190aaaa-0000-7000-8000-000000000000"
	outOther, codeOther := bob.run(t, "", "tokens", "revoke", created.Token.ID)
	outUnknown, codeUnknown := bob.run(t, "", "tokens", "revoke", unknown)
	if codeOther != 2 || codeUnknown != 2 || !strings.Contains(outOther, "NOT_FOUND") ||
		strings.ReplaceAll(outOther, created.Token.ID, "ID") != strings.ReplaceAll(outUnknown, unknown, "ID") {
		t.Fatalf("bob revoking alice's token: %d %q; an unknown one: %d %q", codeOther, outOther, codeUnknown, outUnknown)
	}

	if out, code := laptop.run(t, "", "tokens", "revoke", created.Token.ID); code != 0 {
		t.Fatalf("tokens revoke exited %d:\n%s", code, out)
	}
	harness.Eventually(t, 15*time.Second, "relay listen to stop", listen.Exited)
	if exited, code := listen.ExitCode(); !exited || code != 2 || !strings.Contains(listen.Output(), "token revoked") {
		t.Fatalf("relay listen exited %v with %d, want 2 saying the token was revoked:\n%s", exited, code, listen.Output())
	}
	if n := strings.Count(strings.ToLower(listen.Output()), "reconnecting"); n != 0 {
		t.Errorf("relay listen tried to reconnect %d times with a revoked token:\n%s", n, listen.Output())
	}
	out, code = desktop.run(t, "", "endpoints", "list")
	if code != 2 || !strings.Contains(out, "UNAUTHENTICATED") || !strings.Contains(out, "relay login") {
		t.Fatalf("the desktop after the revocation exited %d, want 2 naming UNAUTHENTICATED and relay login:\n%s", code, out)
	}
	if list := laptop.tokens(t); len(list) != 1 || list[0].Name != "first token" {
		t.Fatalf("after the revocation: %+v", list)
	}

	// logout revokes the stored token on the relay.
	if out, code := laptop.run(t, "", "logout"); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("logout exited %d:\n%s", code, out)
	}
	if code := r.ErrorCode(t, aliceFirst.Token, `{ me{ id } endpoints{ id } }`, nil); code != "UNAUTHENTICATED" {
		t.Fatalf("the logged-out token answered %q, want UNAUTHENTICATED", code)
	}

	// No token is stored or logged in plaintext.
	r.Stop(t)
	export, code := harness.RunCLI(t, "events", "export", "--data", r.Data)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, export)
	}
	bobStored, _ := bob.stored(t)
	secrets := map[string]string{"alice's first token": aliceFirst.Token, "the desktop token": created.Secret, "bob's token": bobStored.Token}
	if !strings.Contains(export, "token.revoked.v1") || !strings.Contains(export, "token.issued.v1") {
		t.Fatalf("the export holds no token events:\n%.2000s", export)
	}
	for what, secret := range secrets {
		if secret == "" {
			t.Fatalf("%s is empty", what)
		}
		if strings.Contains(export, secret) {
			t.Errorf("the event export holds %s", what)
		}
		if strings.Contains(r.Output(), secret) || strings.Contains(listen.Output(), secret) {
			t.Errorf("the relay's or the agent's output holds %s", what)
		}
		err := filepath.WalkDir(r.Data, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds %s", path, what)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRevocationReachesEveryNode: two relays share one log (JetStream); a
// token revoked on A is refused by B, and the agent connected to B with it
// is closed, says why and exits 2.
func TestRevocationReachesEveryNode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts NATS and two relays")
	}
	url := natstest.Start(t).URL()
	flags := func(node string) []string {
		return []string{"--eventstore", url, "--bus", url, "--node-id", node, "--node-lease", clusterLease}
	}
	a := harness.Start(t, "", flags("a")...)
	b := harness.Start(t, "", flags("b")...)
	acct := signUpTenant(t, a, "nodes")
	var created struct {
		CreateToken struct {
			Token  struct{ ID string }
			Secret string
		}
	}
	pos := gqlAfter(t, a, acct.Token, 0, `mutation{ createToken(name: "agent on b"){ token{ id } secret } }`, nil, &created)
	secret := created.CreateToken.Secret
	var ep struct{ CreateEndpoint endpointInfo }
	gqlAfter(t, b, secret, pos, `mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ `+endpointFields+` } }`,
		map[string]any{"in": map[string]any{"name": "nodes", "mode": "PROXY", "target": "127.0.0.1:1"}}, &ep)
	agent := b.StartAgent(t, secret, ep.CreateEndpoint.ID, "127.0.0.1:1")
	waitAgent(t, b, acct.Token, ep.CreateEndpoint.ID, true)

	var revoked struct{ RevokeToken bool }
	pos = gqlAfter(t, a, acct.Token, 0, `mutation($id: ID!){ revokeToken(id: $id) }`, map[string]any{"id": created.CreateToken.Token.ID}, &revoked)
	// B, asked to read at the revocation's position, refuses the token.
	out, _, _ := gqlAt(t, b, secret, pos, `{ endpoints{ id } }`, nil)
	if len(out.Errors) == 0 || out.Errors[0].Code() != "UNAUTHENTICATED" {
		t.Fatalf("B at the revocation's position answered %s", out)
	}
	harness.Eventually(t, 15*time.Second, "the agent on B to stop", agent.Exited)
	if _, code := agent.ExitCode(); code != 2 || !strings.Contains(agent.Output(), "token revoked") {
		t.Fatalf("the agent on B exited %d, want 2 saying the token was revoked:\n%s", code, agent.Output())
	}
}

// TestDeviceLoginCLI: `relay login` with no token prints a code and the
// console page; approving the code through the API logs the CLI in with a
// token named after the machine; a denied code ends the CLI with a clear
// refusal (exit 2) and stores nothing.
func TestDeviceLoginCLI(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	owner := signUpTenant(t, r, "owner")
	codeRe := regexp.MustCompile(`(?s)open (\S+)/device\?code=([A-Z]{4}-[A-Z]{4}).*shows the code ([A-Z]{4}-[A-Z]{4})`)
	start := func(h cliHome) (*harness.Process, string) {
		t.Helper()
		p := harness.StartWith(t, h.command(""), "login", "--server", r.BareURL(), "--device") // standard input: /dev/null, no token: the device flow asked for
		m := waitOutput(t, p, codeRe)
		if m[1] != r.BareURL() || m[2] != m[3] {
			t.Fatalf("relay login printed %q", m[0])
		}
		return p, m[2]
	}
	host, _ := os.Hostname()

	approved := newCLIHome(t)
	login, code := start(approved)
	var seen struct{ DeviceAuthorization struct{ ClientName string } }
	r.MustGraphQL(t, owner.Token, `query($c: String!){ deviceAuthorization(userCode: $c){ clientName } }`, map[string]any{"c": code}, &seen)
	if seen.DeviceAuthorization.ClientName != host {
		t.Fatalf("the code names %q, want this machine %q", seen.DeviceAuthorization.ClientName, host)
	}
	var ok struct{ ApproveDevice struct{ Status string } }
	r.MustGraphQL(t, owner.Token, `mutation($c: String!){ approveDevice(userCode: $c){ status } }`, map[string]any{"c": code}, &ok)
	harness.Eventually(t, 30*time.Second, "relay login to finish", login.Exited)
	if _, exit := login.ExitCode(); exit != 0 || !strings.Contains(login.Output(), "logged in to "+r.BareURL()+" as owner") {
		t.Fatalf("relay login exited %d:\n%s", exit, login.Output())
	}
	list := approved.tokens(t)
	if len(list) != 2 || list[1].Name != host || !list[1].Current {
		t.Fatalf("tokens after the device login: %+v", list)
	}
	if code := r.ErrorCode(t, owner.Token, `mutation($c: String!){ approveDevice(userCode: $c){ status } }`, map[string]any{"c": code}); code != "INVALID_INPUT" {
		t.Fatalf("approving the used code again: %q, want INVALID_INPUT", code)
	}

	denied := newCLIHome(t)
	login, code = start(denied)
	r.MustGraphQL(t, owner.Token, `mutation($c: String!){ denyDevice(userCode: $c){ status } }`, map[string]any{"c": code}, &struct{ DenyDevice struct{ Status string } }{})
	harness.Eventually(t, 30*time.Second, "relay login to stop", login.Exited)
	if _, exit := login.ExitCode(); exit != 2 || !strings.Contains(login.Output(), "denied") {
		t.Fatalf("a denied relay login exited %d, want 2 saying it was denied:\n%s", exit, login.Output())
	}
	if cfg, _ := denied.stored(t); cfg.Token != "" {
		t.Fatalf("a denied login stored %+v", cfg)
	}
}
