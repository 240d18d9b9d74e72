package graph_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/ratelimit"
)

// browser is one person's HTTP client with its own cookie jar.
type browser struct {
	t    *testing.T
	url  string
	c    *http.Client
	tok  string // a bearer token instead of the cookie, when set
	peer string // the client address the request comes from (see peerHandler), when set
}

// peerHandler lets a test choose each request's client address, as a
// trusted proxy would tell it, with the X-Test-Peer header.
func peerHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.Header.Get("X-Test-Peer"); p != "" {
			r.RemoteAddr = p + ":4711"
		}
		h.ServeHTTP(w, r)
	})
}

// from is a fresh browser whose requests come from the client address peer.
func from(t *testing.T, srv *httptest.Server, peer string) *browser {
	b := newBrowser(t, srv)
	b.peer = peer
	return b
}

func newBrowser(t *testing.T, srv *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, url: srv.URL, c: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

type gqlAnswer struct {
	Data   json.RawMessage
	Errors []struct {
		Message    string
		Extensions map[string]any
	}
}

func (a gqlAnswer) code() string {
	if len(a.Errors) == 0 {
		return ""
	}
	c, _ := a.Errors[0].Extensions["code"].(string)
	return c
}

// do posts a GraphQL operation as the page of the relay would (same origin).
func (b *browser) do(query string, vars map[string]any, out any) gqlAnswer {
	b.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, b.url+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", b.url)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if b.tok != "" {
		req.Header.Set("Authorization", "Bearer "+b.tok)
	}
	if b.peer != "" {
		req.Header.Set("X-Test-Peer", b.peer)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var a gqlAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		b.t.Fatalf("%s: status %d: %v", query, resp.StatusCode, err)
	}
	if out != nil && len(a.Errors) == 0 {
		if err := json.Unmarshal(a.Data, out); err != nil {
			b.t.Fatal(err)
		}
	}
	return a
}

func (b *browser) must(query string, vars map[string]any, out any) {
	b.t.Helper()
	if a := b.do(query, vars, out); len(a.Errors) > 0 {
		b.t.Fatalf("%s: %+v", query, a.Errors)
	}
}

const pw = "correct horse battery"

type sessionOut struct {
	Account struct{ ID, Name string }
	Member  struct{ ID, Login, Role string }
}

func (b *browser) signUp(name, login string) sessionOut {
	b.t.Helper()
	var out struct{ SignUpWithPassword sessionOut }
	b.must(`mutation($n: String!, $l: String!, $p: String!) { signUpWithPassword(name: $n, login: $l, password: $p) { account { id name } member { id login role } } }`,
		map[string]any{"n": name, "l": login, "p": pw}, &out)
	return out.SignUpWithPassword
}

func (b *browser) invite() string {
	b.t.Helper()
	var out struct{ CreateMemberInvite struct{ Code, Path string } }
	b.must(`mutation { createMemberInvite { code path } }`, nil, &out)
	if !strings.HasPrefix(out.CreateMemberInvite.Path, "/join?code=") {
		b.t.Fatalf("invite path %q", out.CreateMemberInvite.Path)
	}
	return out.CreateMemberInvite.Code
}

func (b *browser) join(code, login string) gqlAnswer {
	var out struct{ JoinAccount sessionOut }
	return b.do(`mutation($c: String!, $l: String!, $p: String!) { joinAccount(code: $c, login: $l, password: $p) { account { id } member { id role } } }`,
		map[string]any{"c": code, "l": login, "p": pw}, &out)
}

// TestTeams: an owner invites by a one-time link, the invitee joins as a
// member and shares the account's Endpoints; members may not manage
// members nor read the activity; a used link, another team's member ids
// and unknown ones all read alike; the last owner stays; a removed
// member's session and tokens stop at once; the activity names who did
// what.
func TestTeams(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)

	ann, bob, cat := newBrowser(t, srv), newBrowser(t, srv), newBrowser(t, srv)
	acme := ann.signUp("Acme", "ann@acme.test")
	other := cat.signUp("Other", "cat@other.test")
	var ep struct{ CreateEndpoint struct{ ID string } }
	ann.must(`mutation { createEndpoint(input: {name: "hooks", mode: LOG}) { id } }`, nil, &ep)

	code := ann.invite()
	var joined struct{ JoinAccount sessionOut }
	if a := bob.join(code, "Bob"); len(a.Errors) > 0 {
		t.Fatalf("join: %+v", a.Errors)
	} else {
		_ = json.Unmarshal(a.Data, &joined)
	}
	bobID := joined.JoinAccount.Member.ID
	if joined.JoinAccount.Account.ID != acme.Account.ID || joined.JoinAccount.Member.Role != "MEMBER" {
		t.Fatalf("joined %+v, want a member of %s", joined.JoinAccount, acme.Account.ID)
	}
	var eps struct{ Endpoints []struct{ ID string } }
	bob.must(`{ endpoints { id } }`, nil, &eps)
	if len(eps.Endpoints) != 1 || eps.Endpoints[0].ID != ep.CreateEndpoint.ID {
		t.Fatalf("the member sees %+v, want the team's Endpoint", eps.Endpoints)
	}

	// The link is spent; a second use reads like an unknown code.
	reused, unknown := newBrowser(t, srv).join(code, "eve"), newBrowser(t, srv).join("rjn_nosuchcode", "eve2")
	if reused.code() != "INVALID_INPUT" || reused.Errors[0].Message != unknown.Errors[0].Message {
		t.Fatalf("a reused link: %+v; an unknown one: %+v", reused.Errors, unknown.Errors)
	}
	// A login is unique without regard to case.
	if a := newBrowser(t, srv).join(ann.invite(), "BOB"); a.code() != "INVALID_INPUT" || !strings.Contains(a.Errors[0].Message, "not available") {
		t.Fatalf("a taken login: %+v", a.Errors)
	}

	// Members may not manage members nor read the activity.
	for _, q := range []string{`mutation { createMemberInvite { code } }`, `{ me { activity { type } } }`, `{ events { nodes { id } } }`,
		`mutation($id: ID!) { removeMember(id: $id) }`, `mutation($id: ID!) { changeMemberRole(id: $id, role: OWNER) { id } }`} {
		if a := bob.do(q, map[string]any{"id": acme.Member.ID}, nil); a.code() != "FORBIDDEN" {
			t.Errorf("a member's %s: %+v, want FORBIDDEN", q, a.Errors)
		}
	}
	// Another team's member id is NOT_FOUND like an unknown one.
	for _, id := range []string{other.Member.ID, "01a22025-0000-7000-8000-000000000000"} {
		if a := ann.do(`mutation($id: ID!) { removeMember(id: $id) }`, map[string]any{"id": id}, nil); a.code() != "NOT_FOUND" || a.Errors[0].Message != "not found" {
			t.Errorf("removing %s: %+v", id, a.Errors)
		}
	}
	// The last owner stays.
	for _, q := range []string{`mutation($id: ID!) { removeMember(id: $id) }`, `mutation($id: ID!) { changeMemberRole(id: $id, role: MEMBER) { id } }`} {
		if a := ann.do(q, map[string]any{"id": acme.Member.ID}, nil); a.code() != "INVALID_INPUT" || !strings.Contains(a.Errors[0].Message, "last owner") {
			t.Errorf("the last owner, %s: %+v", q, a.Errors)
		}
	}

	// Bob's own API token; then Bob is removed: his session and token stop at once.
	var tok struct{ CreateToken struct{ Secret string } }
	bob.must(`mutation { createToken(name: "bob laptop") { secret } }`, nil, &tok)
	bobAPI := &browser{t: t, url: srv.URL, c: http.DefaultClient, tok: tok.CreateToken.Secret}
	bobAPI.must(`{ endpoints { id } }`, nil, nil)
	ann.must(`mutation($id: ID!) { removeMember(id: $id) }`, map[string]any{"id": bobID}, nil)
	if a := bob.do(`{ endpoints { id } }`, nil, nil); a.code() != "UNAUTHENTICATED" {
		t.Errorf("a removed member's session: %+v", a.Errors)
	}
	if a := bobAPI.do(`{ endpoints { id } }`, nil, nil); a.code() != "UNAUTHENTICATED" {
		t.Errorf("a removed member's token: %+v", a.Errors)
	}

	// The activity names who did what, newest first.
	var act struct {
		Me struct {
			Activity []struct {
				Type    string
				By      *string
				Subject string
			}
		}
	}
	ann.must(`{ me { activity { type by subject } } }`, nil, &act)
	var types []string
	for _, a := range act.Me.Activity {
		types = append(types, a.Type)
	}
	want := []string{"token.revoked.v1", "token.revoked.v1", "member.removed.v1", "token.issued.v1", "member.invited.v1", "member.joined.v1", "member.invite_used.v1", "member.invited.v1"}
	if len(types) < len(want) || strings.Join(types[:len(want)], " ") != strings.Join(want, " ") {
		t.Fatalf("activity %v, want it to begin %v", types, want)
	}
	if by := act.Me.Activity[2].By; by == nil || *by != "ann@acme.test" {
		t.Errorf("the removal names %v as its author", by)
	}
	// Changes to the team's Endpoints are there too, with their author.
	created := false
	for _, a := range act.Me.Activity {
		created = created || (a.Type == "endpoint.created.v1" && a.Subject == ep.CreateEndpoint.ID && a.By != nil && *a.By == "ann@acme.test")
	}
	if !created {
		t.Errorf("activity %v: no endpoint.created.v1 of %s by ann", types, ep.CreateEndpoint.ID)
	}
}

// TestSignInRefusals: a wrong password and an unknown login read the same;
// the attempts of one login from addresses that never signed in to it are
// limited; passwords are 10 to 256 bytes.
func TestSignInRefusals(t *testing.T) {
	e := newEnvWith(t, nil, func(r *graph.Resolver) { r.SignInRate = ratelimit.Rate{N: 3, Per: time.Hour, Burst: 3} })
	srv := httptest.NewServer(peerHandler(e.h))
	t.Cleanup(srv.Close)
	ann := newBrowser(t, srv)
	ann.signUp("Acme", "ann")

	var n atomic.Int32
	signIn := func(login, password string) gqlAnswer { // each from an address of its own
		return from(t, srv, fmt.Sprintf("192.0.2.%d", n.Add(1))).do(`mutation($l: String!, $p: String!) { signIn(login: $l, password: $p) { member { login } } }`,
			map[string]any{"l": login, "p": password}, nil)
	}
	wrong, unknown := signIn("ann", "not the password"), signIn("nobody", "not the password")
	if wrong.code() != "UNAUTHENTICATED" || len(unknown.Errors) == 0 || wrong.Errors[0].Message != unknown.Errors[0].Message {
		t.Fatalf("wrong password %+v, unknown login %+v: want the same refusal", wrong.Errors, unknown.Errors)
	}
	if a := signIn("ANN", pw); len(a.Errors) > 0 {
		t.Fatalf("the right password: %+v", a.Errors)
	}
	if a := signIn("ann", "wrong again!"); a.code() != "UNAUTHENTICATED" {
		t.Fatalf("the third attempt of one login: %+v", a.Errors)
	}
	if a := signIn("ann", pw); a.code() != "RATE_LIMITED" {
		t.Fatalf("the fourth attempt of one login: %+v, want RATE_LIMITED", a.Errors)
	}
	short := newBrowser(t, srv).do(`mutation { signUpWithPassword(name: "x", login: "short", password: "123456789") { member { id } } }`, nil, nil)
	if short.code() != "INVALID_INPUT" || !strings.Contains(short.Errors[0].Message, "at least 10 bytes") {
		t.Fatalf("a short password: %+v", short.Errors)
	}
}

// TestSetUpSignIn: an account made with tokens only gets its first owner
// from its token, once.
func TestSetUpSignIn(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	tok := e.signUp(t, "Legacy")
	b := newBrowser(t, srv)
	b.tok = tok
	var out struct{ SetUpSignIn sessionOut }
	b.must(`mutation { setUpSignIn(login: "old@legacy.test", password: "correct horse battery") { member { login role } } }`, nil, &out)
	if out.SetUpSignIn.Member.Role != "OWNER" {
		t.Fatalf("set up: %+v", out.SetUpSignIn)
	}
	if a := b.do(`mutation { setUpSignIn(login: "again@legacy.test", password: "correct horse battery") { member { login } } }`, nil, nil); a.code() != "INVALID_INPUT" {
		t.Fatalf("a second set-up: %+v", a.Errors)
	}
	b.tok = "" // the cookie the set-up gave
	var me struct {
		Me struct{ Member struct{ Login string } }
	}
	b.must(`{ me { member { login } } }`, nil, &me)
	if me.Me.Member.Login != "old@legacy.test" {
		t.Fatalf("signed in as %+v", me.Me)
	}
}

// TestInviteLinkOnceAndUntilExpiry: two people racing with one link: one
// joins, the other is refused; a link past its expiry is refused in the
// same words as an unknown one.
func TestInviteLinkOnceAndUntilExpiry(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := newEnvWith(t, now, nil)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	ann := newBrowser(t, srv)
	ann.signUp("Acme", "ann")

	code := ann.invite()
	results := make(chan gqlAnswer, 2)
	for _, login := range []string{"racer-1", "racer-2"} {
		go func() { results <- newBrowser(t, srv).join(code, login) }()
	}
	joined := 0
	for range 2 {
		if a := <-results; len(a.Errors) == 0 {
			joined++
		} else if a.code() != "INVALID_INPUT" {
			t.Errorf("the losing racer: %+v", a.Errors)
		}
	}
	if joined != 1 {
		t.Fatalf("%d people joined with one link, want 1", joined)
	}
	var team struct {
		Me struct{ Members []struct{ Login string } }
	}
	ann.must(`{ me { members { login } } }`, nil, &team)
	if len(team.Me.Members) != 2 {
		t.Fatalf("members %+v, want the owner and one racer", team.Me.Members)
	}

	var short struct{ CreateMemberInvite struct{ Code string } }
	ann.must(`mutation { createMemberInvite(expiresIn: "1m") { code } }`, nil, &short)
	offset.Store(int64(2 * time.Minute))
	expired, unknown := newBrowser(t, srv).join(short.CreateMemberInvite.Code, "late"), newBrowser(t, srv).join("rjn_unknown", "late")
	if expired.code() != "INVALID_INPUT" || len(unknown.Errors) == 0 || expired.Errors[0].Message != unknown.Errors[0].Message {
		t.Fatalf("an expired link: %+v; an unknown one: %+v", expired.Errors, unknown.Errors)
	}
}

// TestChangePassword: a member's new password is set once the current one
// is checked; their other browser sessions end, the one asking and their
// API tokens stay; the old password no longer signs in, the new one does;
// wrong current passwords are limited as sign-ins are; the activity says
// who changed it.
func TestChangePassword(t *testing.T) {
	// Three attempts of ann's login an hour: the password changes below
	// take them all (the sign-ins come from an address that signed in to
	// the login, which passes its limit; a password change never does).
	e := newEnvWith(t, nil, func(r *graph.Resolver) { r.SignInRate = ratelimit.Rate{N: 3, Per: time.Hour, Burst: 3} })
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	ann := newBrowser(t, srv)
	ann.signUp("Acme", "ann")
	signIn := func(b *browser, password string) gqlAnswer {
		return b.do(`mutation($l: String!, $p: String!) { signIn(login: $l, password: $p) { member { login } } }`,
			map[string]any{"l": "ann", "p": password}, nil)
	}
	laptop := newBrowser(t, srv) // ann's other browser
	if a := signIn(laptop, pw); len(a.Errors) > 0 {
		t.Fatalf("sign in on the laptop: %+v", a.Errors)
	}
	var tok struct{ CreateToken struct{ Secret string } }
	ann.must(`mutation { createToken(name: "ci") { secret } }`, nil, &tok)
	script := newBrowser(t, srv)
	script.tok = tok.CreateToken.Secret

	change := func(b *browser, current, next string) gqlAnswer {
		return b.do(`mutation($c: String!, $n: String!) { changePassword(currentPassword: $c, newPassword: $n) }`,
			map[string]any{"c": current, "n": next}, nil)
	}
	const next = "a much better passphrase"
	for _, tc := range []struct{ name, current, next, field string }{
		{"a wrong current password", "not the password", next, "currentPassword"},
		{"a short new password", pw, "short", "newPassword"},
	} {
		a := change(ann, tc.current, tc.next)
		if a.code() != "INVALID_INPUT" || !strings.Contains(a.Errors[0].Message, tc.field) {
			t.Errorf("%s: %+v, want INVALID_INPUT naming %s", tc.name, a.Errors, tc.field)
		}
	}
	if a := change(ann, pw, next); len(a.Errors) > 0 {
		t.Fatalf("change the password: %+v", a.Errors)
	}
	// Signed in: me names the member (a refused session reads as no one).
	signedIn := func(b *browser) bool {
		var out struct {
			Me *struct{ Member *struct{ Login string } }
		}
		a := b.do(`{ me { member { login } } }`, nil, &out)
		return len(a.Errors) == 0 && out.Me != nil
	}
	if !signedIn(ann) {
		t.Error("the session that changed the password was ended, want it kept")
	}
	if signedIn(laptop) {
		t.Error("the other browser is still signed in after the change")
	}
	if !signedIn(script) {
		t.Error("the API token stopped working, want it kept")
	}
	if a := signIn(newBrowser(t, srv), pw); a.code() != "UNAUTHENTICATED" {
		t.Errorf("the old password signs in: %+v", a.Errors)
	}
	if a := signIn(laptop, next); len(a.Errors) > 0 {
		t.Errorf("the new password: %+v", a.Errors)
	}
	// The limit counted the wrong current password and the change, not
	// the malformed new password (refused before any rate): one guess
	// more is the third.
	if a := change(ann, "another guess!", "yet another passphrase"); a.code() != "INVALID_INPUT" {
		t.Errorf("the third attempt: %+v, want INVALID_INPUT on currentPassword", a.Errors)
	}
	if a := change(ann, "another guess!", "yet another passphrase"); a.code() != "RATE_LIMITED" {
		t.Errorf("a guess past the sign-in limit: %+v, want RATE_LIMITED", a.Errors)
	}
	var act struct {
		Me struct{ Activity []struct{ Type, By string } }
	}
	ann.must(`{ me { activity { type by } } }`, nil, &act)
	// Newest first: the laptop's session revoked with the change, then the change.
	if a := act.Me.Activity; len(a) < 2 || a[0].Type != "token.revoked.v1" || a[1].Type != "member.password_changed.v1" || a[1].By != "ann" {
		t.Errorf("activity %+v, want the change by ann and the session it ended", a)
	}
}

// TestSignInKnownAddress: strangers' wrong guesses use up a login's limit,
// yet its user signs in from an address that signed in to it before; a new
// address waits like the strangers; the known address still has its own
// per-address limit.
func TestSignInKnownAddress(t *testing.T) {
	e := newEnvWith(t, nil, func(r *graph.Resolver) { r.SignInRate = ratelimit.Rate{N: 3, Per: time.Hour, Burst: 3} })
	srv := httptest.NewServer(peerHandler(e.h))
	t.Cleanup(srv.Close)
	const home = "198.51.100.1"
	from(t, srv, home).signUp("Acme", "ann@acme.test")

	signIn := func(peer, password string) gqlAnswer {
		return from(t, srv, peer).do(`mutation($l: String!, $p: String!) { signIn(login: $l, password: $p) { member { login } } }`,
			map[string]any{"l": "ann@acme.test", "p": password}, nil)
	}
	for i := range 3 {
		if a := signIn("203.0.113.7", fmt.Sprintf("guess number %d", i)); a.code() != "UNAUTHENTICATED" {
			t.Fatalf("guess %d: %+v", i, a.Errors)
		}
	}
	for _, peer := range []string{"203.0.113.7", "203.0.113.8"} {
		if a := signIn(peer, "yet another guess"); a.code() != "RATE_LIMITED" {
			t.Fatalf("a guess from %s past the login's limit: %+v, want RATE_LIMITED", peer, a.Errors)
		}
	}
	if a := signIn(home, pw); len(a.Errors) > 0 {
		t.Fatalf("the user from the address they signed up from: %+v, want signed in", a.Errors)
	}
	if a := signIn("198.51.100.2", pw); a.code() != "RATE_LIMITED" {
		t.Fatalf("the user from a new address while the login is attacked: %+v, want RATE_LIMITED", a.Errors)
	}
	// The known address's own budget: four times the login's, of which the
	// sign-up and the sign-in above took two.
	tries := 0
	for ; tries < 20; tries++ {
		if a := signIn(home, "a wrong password"); a.code() == "RATE_LIMITED" {
			break
		}
	}
	if tries != 10 {
		t.Errorf("the known address was refused after %d more tries, want 10 (4×3 less the sign-up and the sign-in)", tries)
	}
}

// TestSignUpAndJoinLimitedPerAddress: sign-up with a login and joining tell
// whether a login exists, so one client address makes no more of them
// than of sign-ins (four times --signin-rate), in neutral words.
func TestSignUpAndJoinLimitedPerAddress(t *testing.T) {
	e := newEnvWith(t, nil, func(r *graph.Resolver) { r.SignInRate = ratelimit.Rate{N: 1, Per: time.Hour, Burst: 1} })
	srv := httptest.NewServer(peerHandler(e.h))
	t.Cleanup(srv.Close)
	owner := from(t, srv, "198.51.100.1")
	owner.signUp("Acme", "ann@acme.test")
	code := owner.invite()

	const prober = "203.0.113.9"
	signUp := func(login string) gqlAnswer {
		return from(t, srv, prober).do(`mutation($l: String!, $p: String!) { signUpWithPassword(name: "x", login: $l, password: $p) { member { id } } }`,
			map[string]any{"l": login, "p": pw}, nil)
	}
	a := signUp("ann@acme.test")
	if a.code() != "INVALID_INPUT" || !strings.Contains(a.Errors[0].Message, "not available") {
		t.Fatalf("a held login: %+v, want INVALID_INPUT, not available", a.Errors)
	}
	for i := range 3 {
		if a := signUp(fmt.Sprintf("probe%d@acme.test", i)); len(a.Errors) > 0 {
			t.Fatalf("probe %d: %+v", i, a.Errors)
		}
	}
	if a := signUp("bob@acme.test"); a.code() != "RATE_LIMITED" {
		t.Fatalf("the fifth sign-up from one address: %+v, want RATE_LIMITED", a.Errors)
	}
	if a := from(t, srv, prober).join(code, "ann@acme.test"); a.code() != "RATE_LIMITED" {
		t.Fatalf("a join from that address: %+v, want RATE_LIMITED", a.Errors)
	}
	if a := from(t, srv, "198.51.100.7").join(code, "bob@acme.test"); len(a.Errors) > 0 {
		t.Fatalf("a join from another address: %+v", a.Errors)
	}
}

// TestInviteLimits: only owners make sign-up invites; an account holds at
// most MaxOpenInvites open ones and makes them no faster than its rate,
// each refused RATE_LIMITED with words that say which; the operator is
// not bounded.
func TestInviteLimits(t *testing.T) {
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		r.InviteRate = ratelimit.Rate{N: graph.MaxOpenInvites + 5, Per: time.Hour, Burst: graph.MaxOpenInvites + 5}
		r.AdminToken = "ops-secret"
	})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	ann, bob := newBrowser(t, srv), newBrowser(t, srv)
	ann.signUp("Acme", "ann@acme.test")
	if a := bob.join(ann.invite(), "bob@acme.test"); len(a.Errors) > 0 {
		t.Fatal(a.Errors)
	}
	const q = `mutation { createInvite { code url } }`
	if a := bob.do(q, nil, nil); a.code() != "FORBIDDEN" {
		t.Fatalf("a member's invite: %+v, want FORBIDDEN", a.Errors)
	}
	for i := range graph.MaxOpenInvites {
		if a := ann.do(q, nil, nil); len(a.Errors) > 0 {
			t.Fatalf("invite %d: %+v", i+1, a.Errors)
		}
	}
	a := ann.do(q, nil, nil)
	if a.code() != "RATE_LIMITED" || !strings.Contains(a.Errors[0].Message, "open invites") {
		t.Fatalf("invite %d: %+v, want RATE_LIMITED for open invites", graph.MaxOpenInvites+1, a.Errors)
	}
	ops := newBrowser(t, srv)
	ops.tok = "ops-secret"
	for i := range graph.MaxOpenInvites + 1 {
		if a := ops.do(q, nil, nil); len(a.Errors) > 0 {
			t.Fatalf("the operator's invite %d: %+v", i+1, a.Errors)
		}
	}

	// The rate, on its default: another owner's account.
	e2 := newEnv(t)
	srv2 := httptest.NewServer(e2.h)
	t.Cleanup(srv2.Close)
	cat := newBrowser(t, srv2)
	cat.signUp("Other", "cat@other.test")
	for i := range graph.DefaultInviteRate.Burst {
		if a := cat.do(q, nil, nil); len(a.Errors) > 0 {
			t.Fatalf("invite %d: %+v", i+1, a.Errors)
		}
	}
	if a := cat.do(q, nil, nil); a.code() != "RATE_LIMITED" || !strings.Contains(a.Errors[0].Message, "as fast as it may") {
		t.Fatalf("invite %d within the hour: %+v, want RATE_LIMITED for the rate", graph.DefaultInviteRate.Burst+1, a.Errors)
	}
}

// TestSignInLimitOff: --signin-rate off (NoSignInLimit) means no limit,
// not the default one.
func TestSignInLimitOff(t *testing.T) {
	e := newEnvWith(t, nil, func(r *graph.Resolver) { r.NoSignInLimit = true })
	srv := httptest.NewServer(peerHandler(e.h))
	t.Cleanup(srv.Close)
	newBrowser(t, srv).signUp("Acme", "ann@acme.test")
	guesser := from(t, srv, "203.0.113.7")
	for i := range graph.DefaultSignInRate.Burst*4 + 5 {
		a := guesser.do(`mutation($l: String!, $p: String!) { signIn(login: $l, password: $p) { member { login } } }`,
			map[string]any{"l": "ann@acme.test", "p": fmt.Sprintf("guess number %d", i)}, nil)
		if a.code() != "UNAUTHENTICATED" {
			t.Fatalf("guess %d with the limits off: %+v, want UNAUTHENTICATED", i+1, a.Errors)
		}
	}
}

// TestMemberInvitePreview: the join page's look-up names the account and
// the role of an unused code without signing in; a used, an expired and
// an unknown code read alike; look-ups of one code share joinAccount's
// budget (RATE_LIMITED beyond).
func TestMemberInvitePreview(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := newEnvWith(t, now, func(r *graph.Resolver) { r.SignInRate = ratelimit.Rate{N: 3, Per: time.Hour, Burst: 3} })
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	ann := newBrowser(t, srv)
	ann.signUp("Acme", "ann")
	preview := func(code string) (gqlAnswer, string, string) {
		var out struct {
			MemberInvite struct{ AccountName, Role string }
		}
		a := newBrowser(t, srv).do(`query($c: String!) { memberInvite(code: $c) { accountName role expiresAt } }`, map[string]any{"c": code}, &out)
		return a, out.MemberInvite.AccountName, out.MemberInvite.Role
	}

	code := ann.invite()
	if a, name, role := preview(code); len(a.Errors) > 0 || name != "Acme" || role != "MEMBER" {
		t.Fatalf("preview of a fresh link: %+v %q %q", a.Errors, name, role)
	}
	if a := newBrowser(t, srv).join(code, "bob"); len(a.Errors) > 0 {
		t.Fatalf("join: %+v", a.Errors)
	}
	used, _, _ := preview(code)
	unknown, _, _ := preview("rjn_unknown")
	if used.code() != "INVALID_INPUT" || len(unknown.Errors) == 0 || used.Errors[0].Message != unknown.Errors[0].Message {
		t.Fatalf("a used link: %+v; an unknown one: %+v; want the same refusal", used.Errors, unknown.Errors)
	}
	var short struct{ CreateMemberInvite struct{ Code string } }
	ann.must(`mutation { createMemberInvite(expiresIn: "1m") { code } }`, nil, &short)
	offset.Store(int64(2 * time.Minute))
	if expired, _, _ := preview(short.CreateMemberInvite.Code); expired.code() != "INVALID_INPUT" {
		t.Fatalf("an expired link: %+v", expired.Errors)
	}
	// The budget of one code: three look-ups or joins, then refused.
	preview("rjn_guess")
	preview("rjn_guess")
	if a, _, _ := preview("rjn_guess"); a.code() != "INVALID_INPUT" {
		t.Fatalf("the third look-up: %+v", a.Errors)
	}
	if a, _, _ := preview("rjn_guess"); a.code() != "RATE_LIMITED" {
		t.Fatalf("the fourth look-up of one code: %+v, want RATE_LIMITED", a.Errors)
	}
}

// TestSetUpSignInLimitedPerAddress: setting up sign-in hashes a password
// and tells whether a login is held, so a token holder makes no more of
// them from one client address than sign-ins (four times --signin-rate),
// and an account that already has members is refused before any hash.
func TestSetUpSignInLimitedPerAddress(t *testing.T) {
	e := newEnvWith(t, nil, func(r *graph.Resolver) { r.SignInRate = ratelimit.Rate{N: 1, Per: time.Hour, Burst: 1} })
	srv := httptest.NewServer(peerHandler(e.h))
	t.Cleanup(srv.Close)
	from(t, srv, "198.51.100.1").signUp("Acme", "ann@acme.test")

	const prober = "203.0.113.9"
	b := from(t, srv, prober)
	b.tok = e.signUp(t, "Legacy") // an account without members: setUpSignIn is open to it
	taken, limited := 0, 0
	for range 10 {
		a := b.do(`mutation($l: String!, $p: String!) { setUpSignIn(login: $l, password: $p) { member { id } } }`,
			map[string]any{"l": "ann@acme.test", "p": pw}, nil)
		switch {
		case a.code() == "INVALID_INPUT" && strings.Contains(a.Errors[0].Message, "not available"):
			taken++
		case a.code() == "RATE_LIMITED":
			limited++
		default:
			t.Fatalf("set-up with a held login: %+v", a.Errors)
		}
	}
	// Each "not available" answer cost an argon2id hash and told the
	// prober that the login exists.
	if taken != 4 || limited != 6 {
		t.Errorf("10 set-ups from one address: %d answered that the login is held, %d refused; want 4 and 6 (4× a sign-in rate of 1)", taken, limited)
	}
	other := from(t, srv, "198.51.100.9")
	other.tok = b.tok
	if a := other.do(`mutation($p: String!) { setUpSignIn(login: "old@legacy.test", password: $p) { member { id } } }`,
		map[string]any{"p": pw}, nil); len(a.Errors) > 0 {
		t.Fatalf("set-up from another address: %+v", a.Errors)
	}
}

// TestPasswordHashesPerNetwork: wrong sign-ins for logins nobody has, from
// 64 addresses of one /24 at once (each within its own address's budget),
// take at most PasswordsPerNetwork of the argon2id hashing turns; the rest
// are refused at once instead of queueing ahead of everyone's sign-ins,
// and a member signing in from another network is not refused.
func TestPasswordHashesPerNetwork(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(peerHandler(e.h))
	t.Cleanup(srv.Close)
	from(t, srv, "198.51.100.1").signUp("Acme", "ann@acme.test")

	const flood = 64
	start := make(chan struct{})
	codes := make(chan string, flood)
	for i := range flood {
		go func() {
			b := from(t, srv, fmt.Sprintf("203.0.113.%d", i+1))
			<-start
			a := b.do(`mutation($l: String!, $p: String!) { signIn(login: $l, password: $p) { member { id } } }`,
				map[string]any{"l": fmt.Sprintf("nobody%d@acme.test", i), "p": "a wrong password"}, nil)
			codes <- a.code()
		}()
	}
	close(start)
	hashed, limited := 0, 0
	for range flood {
		switch c := <-codes; c {
		case "UNAUTHENTICATED":
			hashed++
		case "RATE_LIMITED":
			limited++
		default:
			t.Fatalf("a wrong sign-in: code %q", c)
		}
	}
	// Requests that overlap a hash (tens of milliseconds) are refused: a
	// few may start after earlier ones ended, never all of them.
	if hashed > flood/4 || hashed+limited != flood {
		t.Errorf("%d wrong sign-ins at once from one /24: %d hashed, %d refused; want at most %d hashed", flood, hashed, limited, flood/4)
	}
	if a := from(t, srv, "198.51.100.1").do(`mutation($l: String!, $p: String!) { signIn(login: $l, password: $p) { member { id } } }`,
		map[string]any{"l": "ann@acme.test", "p": pw}, nil); len(a.Errors) > 0 {
		t.Fatalf("the member from another network: %+v", a.Errors)
	}
}

// TestMemberInvitesRated: every member invite is appended to the account's
// stream, which each of the account's commands reads whole, so an owner
// makes them no faster than the invite rate, in a budget apart from the
// sign-up invites'.
func TestMemberInvitesRated(t *testing.T) {
	e := newEnvWith(t, nil, func(r *graph.Resolver) { r.InviteRate = ratelimit.Rate{N: 3, Per: time.Hour, Burst: 3} })
	srv := httptest.NewServer(peerHandler(e.h))
	t.Cleanup(srv.Close)
	owner := from(t, srv, "198.51.100.1")
	owner.signUp("Acme", "ann@acme.test")
	made, limited := 0, 0
	for range 10 {
		switch a := owner.do(`mutation { createMemberInvite { code } }`, nil, nil); a.code() {
		case "":
			made++
		case "RATE_LIMITED":
			limited++
		default:
			t.Fatalf("a member invite: %+v", a.Errors)
		}
	}
	if made != 3 || limited != 7 {
		t.Errorf("10 member invites at a rate of 3/h: %d made, %d refused; want 3 and 7", made, limited)
	}
	if a := owner.do(`mutation { createInvite { code } }`, nil, nil); len(a.Errors) > 0 {
		t.Errorf("a sign-up invite after the member invites: %+v", a.Errors)
	}
}

// TestMemberInviteToAFullAccount: an account whose members and open invites
// hold its 150 seats is refused another invite with INVALID_INPUT saying
// so, in the singular where one is, and the refusal takes nothing from the
// invite rate: with the hour's last invite left, the next one, once an open
// invite has expired, is made.
func TestMemberInviteToAFullAccount(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	// No refill within the test: the burst is every invite it has.
	e := newEnvWith(t, func() time.Time { return time.Unix(0, clock.Load()) }, func(r *graph.Resolver) {
		r.InviteRate = ratelimit.Rate{N: 1, Per: 24 * time.Hour, Burst: domain.MaxMembers}
	})
	srv := httptest.NewServer(peerHandler(e.h))
	t.Cleanup(srv.Close)
	owner := from(t, srv, "198.51.100.1")
	owner.signUp("Acme", "ann@acme.test")
	invite := func(expiresIn string) gqlAnswer {
		t.Helper()
		return owner.do(`mutation($e: String) { createMemberInvite(expiresIn: $e) { code } }`, map[string]any{"e": expiresIn}, nil)
	}
	if a := invite("1h"); len(a.Errors) > 0 {
		t.Fatalf("the first invite: %+v", a.Errors)
	}
	for i := 2; i < domain.MaxMembers; i++ { // the owner and 149 open invites
		if a := invite("7d"); len(a.Errors) > 0 {
			t.Fatalf("invite %d: %+v", i, a.Errors)
		}
	}
	for range 3 {
		a := invite("7d")
		if a.code() != "INVALID_INPUT" || !strings.Contains(a.Errors[0].Message, "this account has 1 member and 149 open invites, the most it may hold together is 150") {
			t.Fatalf("an invite to a full account: %+v, want INVALID_INPUT saying it is full", a.Errors)
		}
	}
	clock.Add(int64(2 * time.Hour)) // the first invite expires
	if a := invite("7d"); len(a.Errors) > 0 {
		t.Errorf("the hour's last invite, once a seat is free: %+v, want it made", a.Errors)
	}
}

// TestInviteInputCheckedBeforeTheRate: an invite whose expiresIn is past
// the longest an invite lasts (7d) is refused INVALID_INPUT before the
// invite rate is taken from, so refusals leave the hour's invites whole:
// with a burst of 2, five refused invites still leave both.
func TestInviteInputCheckedBeforeTheRate(t *testing.T) {
	const burst = 2
	for _, tt := range []struct{ name, mutation string }{
		{"sign-up invite", `mutation($e: String) { createInvite(expiresIn: $e) { code } }`},
		{"member invite", `mutation($e: String) { createMemberInvite(expiresIn: $e) { code } }`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// No refill within the test: the burst is every invite it has.
			e := newEnvWith(t, nil, func(r *graph.Resolver) {
				r.InviteRate = ratelimit.Rate{N: 1, Per: 24 * time.Hour, Burst: burst}
			})
			srv := httptest.NewServer(e.h)
			t.Cleanup(srv.Close)
			owner := newBrowser(t, srv)
			owner.signUp("Acme", "ann@acme.test")
			for i := range 5 {
				a := owner.do(tt.mutation, map[string]any{"e": "8d"}, nil)
				if a.code() != "INVALID_INPUT" || !strings.Contains(a.Errors[0].Message, "at most 7d") {
					t.Errorf("invite %d of 8d: %+v, want INVALID_INPUT saying at most 7d", i+1, a.Errors)
				}
			}
			made := 0
			for range burst {
				if a := owner.do(tt.mutation, map[string]any{"e": "7d"}, nil); len(a.Errors) == 0 {
					made++
				} else {
					t.Logf("an invite of 7d: %+v", a.Errors)
				}
			}
			t.Logf("%d of %d invites made after 5 refused", made, burst)
			if made != burst {
				t.Errorf("after 5 invites refused for their expiresIn, %d of the burst's %d invites were made, want all", made, burst)
			}
		})
	}
}
