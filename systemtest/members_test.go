package systemtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/systemtest/harness"
)

// member is a person signed in with a password: their session token, as
// the relay's Set-Cookie gave it, serves as a bearer token in tests.
type member struct {
	AccountID, MemberID, Session string
}

// passwordCall posts a password mutation as the console would and returns
// the session its Set-Cookie carries.
func passwordCall(t *testing.T, r *harness.Relay, query string, vars map[string]any) (member, harness.GQLResult) {
	t.Helper()
	m, res, _ := passwordCallAt(t, r, 0, query, vars)
	return m, res
}

// passwordCallAt is passwordCall on a node asked to have applied the log
// up to position first; it also returns the position of its change.
func passwordCallAt(t *testing.T, r *harness.Relay, position uint64, query string, vars map[string]any) (member, harness.GQLResult, uint64) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, r.BareURL()+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", r.BareURL())
	if position > 0 {
		req.Header.Set("X-Relay-Position", strconv.FormatUint(position, 10))
	}
	resp, err := harness.Client.Do(r.Route(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res harness.GQLResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	var m member
	for _, c := range resp.Cookies() {
		if c.Name == "relay_session" {
			m.Session = c.Value
		}
	}
	var data map[string]struct {
		Account struct{ ID string }
		Member  struct{ ID string }
	}
	_ = json.Unmarshal(res.Data, &data)
	for _, v := range data {
		m.AccountID, m.MemberID = v.Account.ID, v.Member.ID
	}
	pos, _ := strconv.ParseUint(resp.Header.Get("X-Relay-Position"), 10, 64)
	return m, res, pos
}

func signUpMember(t *testing.T, r *harness.Relay, name, login, password string) member {
	t.Helper()
	m, res := passwordCall(t, r, `mutation($n: String!, $l: String!, $p: String!){ signUpWithPassword(name: $n, login: $l, password: $p){ account{ id } member{ id } } }`,
		map[string]any{"n": name, "l": login, "p": password})
	if len(res.Errors) > 0 || m.Session == "" {
		t.Fatalf("sign up %s: %s", login, res)
	}
	return m
}

func joinMember(t *testing.T, r *harness.Relay, code, login, password string) (member, harness.GQLResult) {
	t.Helper()
	return passwordCall(t, r, `mutation($c: String!, $l: String!, $p: String!){ joinAccount(code: $c, login: $l, password: $p){ account{ id } member{ id } } }`,
		map[string]any{"c": code, "l": login, "p": password})
}

func memberInvite(t *testing.T, r *harness.Relay, session string) string {
	t.Helper()
	var out struct{ CreateMemberInvite struct{ Code string } }
	r.MustGraphQL(t, session, `mutation{ createMemberInvite{ code } }`, nil, &out)
	return out.CreateMemberInvite.Code
}

// TestTeamIsolation: another team's member ids, token ids and invite
// codes are refused exactly like unknown ones.
func TestTeamIsolation(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	a := signUpMember(t, r, "Team A", "alice@a.test", "alice's long password")
	b := signUpMember(t, r, "Team B", "bert@b.test", "bert's long password")
	aMate, res := joinMember(t, r, memberInvite(t, r, a.Session), "amy@a.test", "amy's long password")
	if len(res.Errors) > 0 {
		t.Fatalf("join: %s", res)
	}
	var tok struct {
		CreateToken struct{ Token struct{ ID string } }
	}
	r.MustGraphQL(t, aMate.Session, `mutation{ createToken(name: "amy's laptop"){ token{ id } } }`, nil, &tok)
	unknownID := "01a22025-0000-7000-8000-000000000000"

	for _, op := range []struct{ name, query, foreign string }{
		{"removeMember", `mutation($id: ID!){ removeMember(id: $id) }`, aMate.MemberID},
		{"changeMemberRole", `mutation($id: ID!){ changeMemberRole(id: $id, role: OWNER){ id } }`, aMate.MemberID},
		{"revokeToken", `mutation($id: ID!){ revokeToken(id: $id) }`, tok.CreateToken.Token.ID},
	} {
		sameRefusal(t, op.name, refusal(t, r, b.Session, op.query, map[string]any{"id": op.foreign}),
			refusal(t, r, b.Session, op.query, map[string]any{"id": unknownID}), op.foreign, unknownID)
	}
	var members struct {
		Me struct{ Members []struct{ ID string } }
	}
	r.MustGraphQL(t, b.Session, `{ me{ members{ id } } }`, nil, &members)
	if len(members.Me.Members) != 1 || members.Me.Members[0].ID != b.MemberID {
		t.Errorf("team B lists members %+v", members.Me.Members)
	}

	// A's spent and expired-or-unknown codes read alike to anyone.
	spent := memberInvite(t, r, a.Session)
	if _, res := joinMember(t, r, spent, "late@a.test", "a long password!"); len(res.Errors) > 0 {
		t.Fatalf("join: %s", res)
	}
	_, reused := joinMember(t, r, spent, "later@b.test", "a long password!")
	_, unknown := joinMember(t, r, "rjn_"+strings.Repeat("a", 52), "later@b.test", "a long password!")
	if len(reused.Errors) == 0 || len(unknown.Errors) == 0 || reused.Errors[0].Message != unknown.Errors[0].Message || reused.Errors[0].Code() != "INVALID_INPUT" {
		t.Errorf("a spent invite is refused as %s, an unknown one as %s", reused, unknown)
	}
	if aMate.AccountID != a.AccountID {
		t.Errorf("the invitee joined %s, want %s", aMate.AccountID, a.AccountID)
	}
}

// TestPasswordsAndTokensNeverLeak signs in with a known password, makes
// tokens and an invite, then searches the relay's log, `relay events
// export` and every file of the event store for the password and the
// secrets: none is there, while the password's sealed hash is exported.
func TestPasswordsAndTokensNeverLeak(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := harness.Start(t, dir)
	password := "pw-marker-" + unknownAddress() + "-secret"
	owner := signUpMember(t, r, "Leakproof", "leak@proof.test", password)
	again, res := passwordCall(t, r, `mutation($l: String!, $p: String!){ signIn(login: $l, password: $p){ account{ id } member{ id } } }`,
		map[string]any{"l": "LEAK@proof.test", "p": password})
	if len(res.Errors) > 0 || again.Session == "" {
		t.Fatalf("sign in: %s", res)
	}
	// A wrong password, so that refusals are in the log too.
	if _, res := passwordCall(t, r, `mutation($l: String!, $p: String!){ signIn(login: $l, password: $p){ account{ id } } }`,
		map[string]any{"l": "leak@proof.test", "p": password + "x"}); len(res.Errors) == 0 {
		t.Fatal("a wrong password signed in")
	}
	secrets := map[string]string{"password": password, "wrong password": password + "x", "session": owner.Session, "second session": again.Session}
	var tok struct{ CreateToken struct{ Secret string } }
	r.MustGraphQL(t, again.Session, `mutation{ createToken(name: "ci"){ secret } }`, nil, &tok)
	secrets["API token"] = tok.CreateToken.Secret
	secrets["invite code"] = memberInvite(t, r, owner.Session)
	mate, res := joinMember(t, r, memberInvite(t, r, owner.Session), "mate@proof.test", password+"-mate")
	if len(res.Errors) > 0 {
		t.Fatalf("join: %s", res)
	}
	secrets["member's password"], secrets["member's session"] = password+"-mate", mate.Session
	r.MustGraphQL(t, again.Session, `mutation{ signOut }`, nil, nil)

	check := func(where string, data []byte) {
		t.Helper()
		for name, s := range secrets {
			for form, v := range map[string]string{"": s, "base64 ": base64.StdEncoding.EncodeToString([]byte(s)), "JSON-escaped ": strings.Trim(string(mustJSON(s)), `"`)} {
				if bytes.Contains(data, []byte(v)) {
					t.Errorf("the %s%s is in %s", form, name, where)
				}
			}
		}
	}
	r.Stop(t)
	check("the relay's log", []byte(r.Output()))
	export, code := harness.RunCLI(t, "events", "export", "--data", dir)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, export)
	}
	if !strings.Contains(export, "member.joined.v1") || !strings.Contains(export, `"password_sealed":"aes256gcm:v1:`) {
		t.Fatalf("the export holds no member with a sealed password hash: the search reads the wrong data\n%.2000s", export)
	}
	check("relay events export", []byte(export))
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		check(path, data)
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("read the data folder: %d files, %v", files, err)
	}
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// TestMembersCLI: relay members invite, list and remove with -o json in
// their documented shapes; the account's own token (made before it had
// members) acts as an owner.
func TestMembersCLI(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, _ := loggedInHome(t, r)
	var none []jsonMember
	h.jsonOut(t, &none, "members", "list")
	if len(none) != 0 {
		t.Fatalf("a token-only account lists members %+v", none)
	}
	var inv struct {
		URL       string `json:"url"`
		Role      string `json:"role"`
		ExpiresAt string `json:"expiresAt"`
	}
	h.jsonOut(t, &inv, "members", "invite", "--role", "owner", "--expires-in", "1d")
	_, code, ok := strings.Cut(inv.URL, ":"+strconv.Itoa(r.Port)+"/join?code=")
	if !ok || inv.Role != "OWNER" || inv.ExpiresAt == "" {
		t.Fatalf("members invite: %+v", inv)
	}
	joined, res := joinMember(t, r, code, "Zoe@cli.test", "zoe's long password")
	if len(res.Errors) > 0 {
		t.Fatalf("join: %s", res)
	}
	var list []jsonMember
	h.jsonOut(t, &list, "members", "list")
	if len(list) != 1 || list[0].ID != joined.MemberID || list[0].Login != "Zoe@cli.test" || list[0].Role != "OWNER" || list[0].You {
		t.Fatalf("members list: %+v", list)
	}
	// The last owner stays: refused, exit 2.
	if out, code := h.run(t, "", "members", "remove", joined.MemberID); code != 2 || !strings.Contains(out, "last owner") {
		t.Fatalf("removing the last owner: exit %d\n%s", code, out)
	}
	if out, code := h.run(t, "", "members", "invite", "--role", "boss"); code != 2 || !strings.Contains(out, "--role") {
		t.Fatalf("a bad role: exit %d\n%s", code, out)
	}
}

type jsonMember struct {
	ID       string `json:"id"`
	Login    string `json:"login"`
	Role     string `json:"role"`
	JoinedAt string `json:"joinedAt"`
	You      bool   `json:"you"`
}

// TestTeamsAcrossNodes: two relays share one log (JetStream) and one
// secrets key. A password set on one node signs in on the other. One
// invite link used on both nodes at once admits one person; a member removed on
// A is refused by B at once, and their agent connected to B stops (exit 2).
func TestTeamsAcrossNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts NATS and two relays")
	}
	url := natstest.Start(t).URL()
	keyFile := filepath.Join(t.TempDir(), "secrets.key") // the nodes' one secrets key: passwords are sealed under it
	flags := func(node string) []string {
		return []string{"--eventstore", url, "--bus", url, "--node-id", node, "--node-lease", clusterLease, "--secrets-key", keyFile}
	}
	a := harness.Start(t, "", flags("a")...)
	b := harness.Start(t, "", flags("b")...)
	owner := signUpMember(t, a, "Nodes", "owner@nodes.test", "owner's long password")
	var inv struct{ CreateMemberInvite struct{ Code string } }
	pos := gqlAfter(t, a, owner.Session, 0, `mutation{ createMemberInvite{ code } }`, nil, &inv)
	// The password set on A (sealed there) signs in on B.
	if m, res, _ := passwordCallAt(t, b, pos, signInQuery, map[string]any{"l": "owner@nodes.test", "p": "owner's long password"}); m.Session == "" {
		t.Fatalf("the owner signed up on A cannot sign in on B: %s", res)
	}

	type joined struct {
		m   member
		res harness.GQLResult
		pos uint64
	}
	results := make(chan joined, 2)
	for i, node := range []*harness.Relay{a, b} {
		go func() {
			m, res, p := passwordCallAt(t, node, pos, `mutation($c: String!, $l: String!, $p: String!){ joinAccount(code: $c, login: $l, password: $p){ account{ id } member{ id } } }`,
				map[string]any{"c": inv.CreateMemberInvite.Code, "l": "racer-" + strconv.Itoa(i) + "@nodes.test", "p": "a racer's password"})
			results <- joined{m, res, p}
		}()
	}
	var mate joined
	wins := 0
	for range 2 {
		j := <-results
		if len(j.res.Errors) == 0 {
			wins++
			mate = j
		} else if j.res.Errors[0].Code() != "INVALID_INPUT" && j.res.Errors[0].Code() != "CONFLICT" {
			t.Errorf("the losing racer: %s", j.res)
		}
	}
	if wins != 1 {
		t.Fatalf("%d people joined with one link on two nodes, want 1", wins)
	}

	// The member's token and agent on B; the owner removes them on A.
	var tok struct{ CreateToken struct{ Secret string } }
	pos = gqlAfter(t, b, mate.m.Session, mate.pos, `mutation{ createToken(name: "mate on b"){ secret } }`, nil, &tok)
	var ep struct{ CreateEndpoint endpointInfo }
	pos = gqlAfter(t, b, tok.CreateToken.Secret, pos, `mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ `+endpointFields+` } }`,
		map[string]any{"in": map[string]any{"name": "nodes", "mode": "PROXY", "target": "127.0.0.1:1"}}, &ep)
	agent := b.StartAgent(t, tok.CreateToken.Secret, ep.CreateEndpoint.ID, "127.0.0.1:1")
	waitAgent(t, b, tok.CreateToken.Secret, ep.CreateEndpoint.ID, true)

	var removed struct{ RemoveMember bool }
	pos = gqlAfter(t, a, owner.Session, pos, `mutation($id: ID!){ removeMember(id: $id) }`, map[string]any{"id": mate.m.MemberID}, &removed)
	for what, secret := range map[string]string{"session": mate.m.Session, "token": tok.CreateToken.Secret} {
		out, _, _ := gqlAt(t, b, secret, pos, `{ endpoints{ id } }`, nil)
		if len(out.Errors) == 0 || out.Errors[0].Code() != "UNAUTHENTICATED" {
			t.Errorf("B at the removal's position answered the removed member's %s with %s", what, out)
		}
	}
	harness.Eventually(t, 15*time.Second, "the removed member's agent on B to stop", agent.Exited)
	if _, code := agent.ExitCode(); code != 2 || !strings.Contains(agent.Output(), "token revoked") {
		t.Fatalf("the agent on B exited %d, want 2 saying the token was revoked:\n%s", code, agent.Output())
	}
}

// TestPasswordSignUpModes: the console's sign-up follows --signup: closed
// refuses, invite needs an unused invite (spent once); a login whose
// sign-up failed on the invite is free again.
func TestPasswordSignUpModes(t *testing.T) {
	t.Parallel()
	closed := harness.Start(t, "", "--signup", "closed")
	byInvite := harness.Start(t, "", "--signup", "invite", "--admin-token", "ops-secret")
	const q = `mutation($n: String!, $l: String!, $p: String!, $i: String){ signUpWithPassword(name: $n, login: $l, password: $p, invite: $i){ account{ id } member{ id } } }`
	vars := func(login, invite string) map[string]any {
		v := map[string]any{"n": "Team", "l": login, "p": "a long enough password"}
		if invite != "" {
			v["i"] = invite
		}
		return v
	}
	if _, res := passwordCall(t, closed, q, vars("x@closed.test", "")); len(res.Errors) == 0 || !strings.Contains(res.Errors[0].Message, "closed") {
		t.Errorf("sign-up on a closed relay: %s", res)
	}
	if _, res := passwordCall(t, byInvite, q, vars("y@invite.test", "")); len(res.Errors) == 0 || res.Errors[0].Code() != "INVALID_INPUT" {
		t.Errorf("sign-up without an invite: %s", res)
	}
	if _, res := passwordCall(t, byInvite, q, vars("y@invite.test", "rin_unknown")); len(res.Errors) == 0 || !strings.Contains(res.Errors[0].Message, "invite") {
		t.Errorf("sign-up with an unknown invite: %s", res)
	}
	var inv struct{ CreateInvite struct{ Code string } }
	byInvite.MustGraphQL(t, "ops-secret", `mutation{ createInvite{ code } }`, nil, &inv)
	// The login refused a moment ago (its invite was unknown) is free.
	m, res := passwordCall(t, byInvite, q, vars("Y@invite.test", inv.CreateInvite.Code))
	if len(res.Errors) > 0 || m.Session == "" {
		t.Fatalf("sign-up with an invite: %s", res)
	}
	if _, res := passwordCall(t, byInvite, q, vars("z@invite.test", inv.CreateInvite.Code)); len(res.Errors) == 0 {
		t.Errorf("an invite spent twice")
	}
}

// TestSessionCookieOverHTTPS: over TLS the session cookie is Secure and
// named __Host-relay_session (host-only, Path=/), and signs requests in.
func TestSessionCookieOverHTTPS(t *testing.T) {
	t.Parallel()
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "*.localhost", "localhost")
	r := harness.StartTLS(t, "", ca, cert, key)
	c := r.TLSClient(false)
	post := func(cookie *http.Cookie, query string) (*http.Response, harness.GQLResult) {
		body, _ := json.Marshal(map[string]any{"query": query})
		req, _ := http.NewRequest(http.MethodPost, r.BareURL()+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", r.BareURL())
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res harness.GQLResult
		_ = json.NewDecoder(resp.Body).Decode(&res)
		return resp, res
	}
	resp, res := post(nil, `mutation{ signUpWithPassword(name: "Tls", login: "tls@example.test", password: "a long enough password"){ member{ id } } }`)
	if len(res.Errors) > 0 {
		t.Fatalf("sign up over TLS: %s", res)
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if strings.Contains(ck.Name, "relay_session") {
			session = ck
		}
	}
	if session == nil || session.Name != "__Host-relay_session" || !session.Secure || !session.HttpOnly ||
		session.SameSite != http.SameSiteStrictMode || session.Path != "/" || session.Domain != "" || session.MaxAge <= 0 {
		t.Fatalf("the session cookie over TLS: %+v", session)
	}
	var me struct{ Me struct{ Name string } }
	if _, res := post(&http.Cookie{Name: session.Name, Value: session.Value}, `{ me{ name } }`); len(res.Errors) > 0 || json.Unmarshal(res.Data, &me) != nil || me.Me.Name != "Tls" {
		t.Fatalf("a request with the cookie: %s", res)
	}
}

// TestSessionCookieBehindProxy: a trusted proxy's X-Forwarded-Proto: https
// makes the cookie Secure; the same header from anyone else does not.
func TestSessionCookieBehindProxy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		flags   []string
		secure  bool
		cookies string
	}{
		{"trusted proxy", []string{"--trusted-proxies", "127.0.0.1/32"}, true, "__Host-relay_session"},
		{"no trusted proxy", nil, false, "relay_session"},
	} {
		r := harness.Start(t, "", tc.flags...)
		body := `{"query":"mutation{ signUpWithPassword(name: \"P\", login: \"p@proxy.test\", password: \"a long enough password\"){ member{ id } } }"}`
		req, _ := http.NewRequest(http.MethodPost, r.BareURL()+"/graphql", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		resp, err := harness.Client.Do(r.Route(req))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookies := resp.Cookies()
		if len(cookies) != 1 || cookies[0].Name != tc.cookies || cookies[0].Secure != tc.secure {
			t.Errorf("%s: cookies %+v, want %s with Secure %v", tc.name, cookies, tc.cookies, tc.secure)
		}
	}
}
