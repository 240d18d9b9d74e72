package consoletest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/systemtest/harness"
)

// uniqueLogin is a login no other test (or run) of the shared relay took.
func uniqueLogin(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b) + "@example.com"
}

// sessionCookie is the browser's session cookie for the relay (HttpOnly:
// only the browser's own protocol can read it).
func (p *page) sessionCookie() *network.Cookie {
	p.t.Helper()
	var found *network.Cookie
	p.do(func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{srv.BareURL() + "/"}})
		if err != nil {
			return chromedp.Void{}, err
		}
		for _, c := range res.Cookies {
			if c.Name == "relay_session" {
				found = c
			}
		}
		return chromedp.Void{}, nil
	})
	return found
}

// fillSignUp signs a new account up in the console's sign-up form.
func fillSignUp(p *page, name, login, password string) {
	p.t.Helper()
	p.waitFor("the sign-up form", `document.querySelector('form[aria-labelledby=signup-title]')`)
	p.do(chromedpSetValue(`form[aria-labelledby=signup-title] input[name=name]`, name))
	p.do(chromedpSetValue(`form[aria-labelledby=signup-title] input[name=login]`, login))
	p.do(chromedpSetValue(`form[aria-labelledby=signup-title] input[name=password]`, password))
	p.click(`form[aria-labelledby=signup-title] button[type=submit]`)
}

// fillSignIn submits the console's password sign-in form.
func fillSignIn(p *page, login, password string) {
	p.t.Helper()
	p.waitFor("the password sign-in form", `document.querySelector('[data-testid=password-sign-in]')`)
	p.do(chromedpSetValue(`[data-testid=password-sign-in] input[name=login]`, login))
	p.do(chromedpSetValue(`[data-testid=password-sign-in] input[name=password]`, password))
	p.click(`[data-testid=password-sign-in] button[type=submit]`)
}

// startDeviceLogin starts `relay login --device` in env and returns it
// with the user code it printed.
func startDeviceLogin(t *testing.T, env harness.Command) (*harness.Process, string) {
	t.Helper()
	login := harness.StartWith(t, env, "login", "--server", srv.BareURL(), "--device")
	codeRe := regexp.MustCompile(`/device\?code=([A-Z]{4}-[A-Z]{4})`)
	var code string
	harness.Eventually(t, 30*time.Second, "relay login to print its code", func() bool {
		if m := codeRe.FindStringSubmatch(login.Output()); m != nil {
			code = m[1]
		}
		return code != "" || login.Exited()
	})
	if code == "" {
		t.Fatalf("relay login printed no code:\n%s", login.Output())
	}
	return login, code
}

// cliEnv is a fresh home for the real CLI.
func cliEnv(t *testing.T) harness.Command {
	home := t.TempDir()
	return harness.Command{Bin: relayBin, Env: []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "RELAY_SERVER=", "RELAY_TOKEN="}}
}

// deviceLogin runs `relay login --device` and approves its code in the
// page p (signed in); it returns the CLI's environment, now logged in.
func deviceLogin(t *testing.T, p *page) harness.Command {
	t.Helper()
	env := cliEnv(t)
	login, code := startDeviceLogin(t, env)
	p.open("/device?code=" + code)
	p.waitFor("the code field", `document.querySelector('input[name=user-code]')?.value === '`+code+`'`)
	p.click(`form[aria-labelledby=device-title] button[type=submit]`)
	p.click(`[data-testid=approve-device]`)
	p.waitFor("the approval", `document.querySelector('[data-testid=device-result] .notice-success')`)
	harness.Eventually(t, 30*time.Second, "relay login to finish", login.Exited)
	if _, exit := login.ExitCode(); exit != 0 {
		t.Fatalf("relay login exited %d:\n%s", exit, login.Output())
	}
	return env
}

// A person signs up with a password and is signed in by an HttpOnly
// cookie (no token in the page), sees live history over the cookie's
// WebSocket, logs the real CLI in by approving its device code, revokes
// that token in settings and sees the CLI refused, signs out (the
// session is revoked on the relay, not just forgotten), is refused a
// wrong password with a clear message, and signs in again.
func TestPasswordSignUpSignOutSignIn(t *testing.T) {
	login, password := uniqueLogin("ada"), "correct horse battery staple"
	p := newPage(t, 1280, 800)
	p.open("/")
	fillSignUp(p, "Lovelace Labs", login, password)
	p.waitFor("the Endpoints area", `document.querySelector('form.create-endpoint')`)
	if got := p.text(`[data-testid=member-login]`); got != login {
		t.Errorf("the top bar names %q, want the login %q", got, login)
	}
	if stored := eval[string](p, `localStorage.getItem('relay.token') || ''`); stored != "" {
		t.Errorf("a password sign-up stored a token in the page: %q", stored)
	}
	if js := eval[string](p, `document.cookie`); strings.Contains(js, "relay_session") {
		t.Errorf("the session cookie is readable by scripts: %q", js)
	}
	c := p.sessionCookie()
	if c == nil {
		t.Fatal("no session cookie after sign-up")
	}
	if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Path != "/" || c.Secure || c.Session {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP, with an expiry", c)
	}
	session := c.Value

	// An Endpoint made in the console; its page goes live over the cookie.
	p.do(chromedpSetValue(`form.create-endpoint input[name=name]`, "hooks"))
	p.click(`form.create-endpoint button[type=submit]`)
	p.waitFor("the Endpoint page", `/^\/e\/[^/]+$/.test(location.pathname)`)
	id := strings.TrimPrefix(eval[string](p, `location.pathname`), "/e/")
	p.waitLive()

	// The real CLI, logged in by approving its device code here, lists the
	// account's Endpoints with its own token, made for this member.
	cli := deviceLogin(t, p)
	if out, code := harness.RunWith(t, cli, "endpoints", "list", "--server", srv.BareURL()); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("the device-logged CLI exited %d, want the Endpoint %s listed:\n%s", code, id, out)
	}
	host, _ := os.Hostname()
	var tokens struct {
		Tokens []struct {
			ID, Name string
			Member   *string
			Session  bool
		} `json:"tokens"`
	}
	srv.MustGraphQL(t, session, `{ tokens { id name member session } }`, nil, &tokens)
	var deviceID string
	for _, tk := range tokens.Tokens {
		if tk.Name == host && !tk.Session {
			deviceID = tk.ID
			if tk.Member == nil || *tk.Member != login {
				t.Errorf("the device's token acts for %v, want the approving member %q", tk.Member, login)
			}
		}
	}
	if deviceID == "" {
		t.Fatalf("no token named %q among %+v", host, tokens.Tokens)
	}

	// Revoked in settings: the CLI is refused at once.
	p.open("/settings")
	row := `tr[data-token-id="` + deviceID + `"]`
	p.waitFor("the device token's row", `document.querySelector('`+row+`')`)
	p.waitFor("the team card", `document.querySelector('[data-testid=members]')`)
	p.assertLabelled()
	p.screenshot("settings.png")
	// The only owner is offered no change the relay would refuse.
	if eval[bool](p, `!!document.querySelector('[data-testid=members] .btn-danger')`) || !eval[bool](p, `!!document.querySelector('[data-testid=last-owner]')`) {
		t.Error("the only owner's row offers a role change or removal, want the last-owner note")
	}
	p.click(row + ` button`)
	p.click(`dialog[open] .btn-danger`)
	p.waitFor("the row gone", `!document.querySelector('`+row+`') && document.querySelector('[data-testid=tokens] table')`)
	if out, code := harness.RunWith(t, cli, "endpoints", "list", "--server", srv.BareURL()); code != 2 || !strings.Contains(out, "UNAUTHENTICATED") {
		t.Fatalf("the CLI with the revoked token exited %d, want 2 naming UNAUTHENTICATED:\n%s", code, out)
	}

	// Sign out: the cookie is cleared and its session revoked on the relay.
	p.click(`[data-testid=sign-out]`)
	p.waitFor("the sign-in form", `document.querySelector('[data-testid=password-sign-in]')`)
	p.screenshot("signin.png")
	harness.Eventually(t, 10*time.Second, "the cookie cleared", func() bool { return p.sessionCookie() == nil })
	if code := srv.ErrorCode(t, session, `{ tokens { id } }`, nil); code != "UNAUTHENTICATED" {
		t.Errorf("the signed-out session still works: %q", code)
	}

	// A wrong password: one clear message, the same as for an unknown login.
	fillSignIn(p, login, "not the password")
	p.waitFor("the refusal", `document.querySelector('[data-testid=password-sign-in] .notice-error')`)
	wrong := p.text(`[data-testid=password-sign-in] .notice-error`)
	if !strings.Contains(wrong, "wrong login or password") {
		t.Errorf("a wrong password says %q", wrong)
	}
	fillSignIn(p, uniqueLogin("nobody"), password)
	p.waitFor("the refusal of an unknown login", `document.querySelector('[data-testid=password-sign-in] .notice-error')`)
	if unknown := p.text(`[data-testid=password-sign-in] .notice-error`); unknown != wrong {
		t.Errorf("an unknown login says %q, a wrong password %q: they must read the same", unknown, wrong)
	}

	// Signing in again (the login without regard to case) shows the team's Endpoint.
	fillSignIn(p, strings.ToUpper(login), password)
	p.waitFor("the Endpoints list", `document.querySelector('.endpoint-list a[href="/e/`+id+`"]')`)
	if c := p.sessionCookie(); c == nil || c.Value == session {
		t.Errorf("signing in again gave no new session cookie")
	}
}

// CSRF: a POST carrying the session cookie from another origin is refused
// while the same request from the console's origin works; a WebSocket
// from another origin gets nothing from the cookie.
func TestSessionCookieSameOriginOnly(t *testing.T) {
	login, password := uniqueLogin("csrf"), "correct horse battery staple"
	p := newPage(t, 1280, 800)
	p.open("/")
	fillSignUp(p, "Csrf Inc", login, password)
	p.waitFor("signed in", `document.querySelector('[data-testid=member-login]')`)
	cookie := p.sessionCookie()
	if cookie == nil {
		t.Fatal("no session cookie")
	}
	post := func(origin, site string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.BareURL()+"/graphql", strings.NewReader(`{"query":"mutation { createToken(name: \"csrf\") { secret } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", "relay_session="+cookie.Value)
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", site)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		return resp.StatusCode, string(b[:n])
	}
	if status, body := post("http://evil.localhost:1", "cross-site"); status != http.StatusForbidden || strings.Contains(body, "rly_") {
		t.Errorf("a cross-origin cookie POST answered %d %s, want 403 and no token", status, body)
	}
	if status, body := post(srv.BareURL(), "same-origin"); status != http.StatusOK || !strings.Contains(body, "rly_") {
		t.Errorf("the same-origin cookie POST answered %d %s, want a new token", status, body)
	}
	// From the page itself (same origin, the browser adds the cookie): works.
	got := eval[string](p, `fetch('/graphql', {method: 'POST', headers: {'Content-Type': 'application/json'},
		body: JSON.stringify({query: '{ me { name } }'})}).then((r) => r.json()).then((j) => j.data.me ? j.data.me.name : 'none')`)
	if got != "Csrf Inc" {
		t.Errorf("the console's own cookie request read %q", got)
	}

	// A WebSocket with the cookie: the console's origin is signed in,
	// another origin is not.
	for _, tc := range []struct{ origin, want string }{{srv.BareURL(), "Csrf Inc"}, {"http://evil.localhost:1", "none"}} {
		if got := wsMe(t, tc.origin, cookie.Value); got != tc.want {
			t.Errorf("a socket from %s with the cookie is signed in as %q, want %q", tc.origin, got, tc.want)
		}
	}
}

// wsMe asks `{ me { name } }` over a graphql-transport-ws socket opened
// from origin with the session cookie; "none" when signed out.
func wsMe(t *testing.T, origin, session string) string {
	t.Helper()
	h := http.Header{}
	h.Set("Origin", origin)
	h.Set("Cookie", "relay_session="+session)
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 10 * time.Second}
	conn, resp, err := d.Dial(strings.Replace(srv.BareURL(), "http", "ws", 1)+"/graphql", h)
	if err != nil {
		t.Fatalf("dial from %s: %v", origin, err)
	}
	resp.Body.Close()
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	must := func(v any) {
		if err := conn.WriteJSON(v); err != nil {
			t.Fatal(err)
		}
	}
	must(map[string]any{"type": "connection_init", "payload": map[string]any{}})
	must(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": "{ me { name } }"}})
	for {
		var msg struct {
			Type    string
			Payload struct {
				Data struct {
					Me *struct{ Name string }
				}
			}
		}
		if err := conn.ReadJSON(&msg); err != nil {
			t.Fatalf("socket from %s: %v", origin, err)
		}
		if msg.Type == "next" {
			if msg.Payload.Data.Me == nil {
				return "none"
			}
			return msg.Payload.Data.Me.Name
		}
		if msg.Type == "error" {
			t.Fatalf("socket from %s: error", origin)
		}
	}
}

// An owner makes a one-time invite link in settings; a second person opens
// it in a fresh browser, joins with a login and password, and sees the
// team's Endpoints; the real CLI, logged in by that member's approval of
// its device code, runs `relay listen` on the team's Endpoint and relays a
// webhook. The owner removes the member: the listener is refused at once
// (it exits 2, as for a revoked token) and the member's browser session
// no longer works.
func TestTeamInviteJoinListen(t *testing.T) {
	ownerLogin, memberLogin, password := uniqueLogin("owner"), uniqueLogin("member"), "correct horse battery staple"
	owner := newPage(t, 1280, 800)
	owner.open("/")
	fillSignUp(owner, "Team Relay", ownerLogin, password)
	owner.waitFor("the create form", `document.querySelector('form.create-endpoint')`)
	owner.do(chromedpSetValue(`form.create-endpoint input[name=name]`, "team-hooks"))
	owner.click(`form.create-endpoint button[type=submit]`)
	owner.waitFor("the Endpoint page", `/^\/e\/[^/]+$/.test(location.pathname)`)
	id := strings.TrimPrefix(eval[string](owner, `location.pathname`), "/e/")
	ownerSession := owner.sessionCookie().Value

	owner.open("/settings")
	owner.waitFor("the invite form", `document.querySelector('form[aria-labelledby=invite-title]')`)
	owner.click(`form[aria-labelledby=invite-title] button[type=submit]`)
	owner.waitFor("the invite link", `document.querySelector('[data-testid=invite-link]')`)
	link := owner.text(`[data-testid=invite-link]`)
	if !strings.HasPrefix(link, srv.BareURL()+"/join?code=rjn_") {
		t.Fatalf("invite link %q", link)
	}

	member := newPage(t, 1280, 800) // its own browser context: no cookie of the owner's
	member.do(chromedp.Navigate(link))
	member.waitFor("the join form", `document.querySelector('form[aria-labelledby=join-title]')`)
	// The page names the account the link joins, before anyone joins.
	member.waitFor("the account named", `document.querySelector('[data-testid=join-account] strong')?.textContent === 'Team Relay'`)
	if got := member.text(`[data-testid=join-account]`); !strings.Contains(got, "join Team Relay as member") {
		t.Errorf("the join page says %q", got)
	}
	member.assertLabelled()
	member.do(chromedpSetValue(`form[aria-labelledby=join-title] input[name=login]`, memberLogin))
	member.do(chromedpSetValue(`form[aria-labelledby=join-title] input[name=password]`, password))
	member.click(`form[aria-labelledby=join-title] button[type=submit]`)
	member.waitFor("the team's Endpoint", `document.querySelector('.endpoint-list a[href="/e/`+id+`"]')`)
	if got := member.text(`[data-testid=member-login]`); got != memberLogin {
		t.Errorf("the member's top bar names %q", got)
	}
	// A member reads no activity and manages nobody: the settings page
	// shows the team without the owner's controls.
	member.open("/settings")
	member.waitFor("the members", `document.querySelector('[data-testid=members] tbody tr')`)
	if eval[bool](member, `!!document.querySelector('form[aria-labelledby=invite-title], [data-testid=activity]')`) {
		t.Error("a member is offered to invite or to read the activity")
	}

	// The owner's activity says it in words, not event type names.
	owner.open("/settings")
	owner.waitFor("the activity", `document.querySelector('[data-testid=activity-text]')`)
	activity := eval[[]string](owner, `[...document.querySelectorAll('[data-testid=activity-text]')].map((e) => e.textContent)`)
	if !slices.Contains(activity, memberLogin+" joined as member") || !slices.Contains(activity, ownerLogin+" created Endpoint team-hooks") {
		t.Errorf("the activity reads %q", activity)
	}
	for _, line := range activity {
		if strings.Contains(line, ".v1") {
			t.Errorf("the activity shows an event type name: %q", line)
		}
	}

	// The link is spent.
	again := newPage(t, 1280, 800)
	again.do(chromedp.Navigate(link))
	again.waitFor("the join form", `document.querySelector('form[aria-labelledby=join-title]')`)
	again.do(chromedpSetValue(`form[aria-labelledby=join-title] input[name=login]`, uniqueLogin("late")))
	again.do(chromedpSetValue(`form[aria-labelledby=join-title] input[name=password]`, password))
	again.click(`form[aria-labelledby=join-title] button[type=submit]`)
	again.waitFor("the refusal", `document.querySelector('form[aria-labelledby=join-title] .notice-error')`)
	if got := again.text(`form[aria-labelledby=join-title] .notice-error`); !strings.Contains(got, "already used") {
		t.Errorf("a reused link says %q", got)
	}

	// The member's CLI, logged in through the browser, listens on the team's Endpoint.
	cli := deviceLogin(t, member)
	if out, code := harness.RunWith(t, cli, "members", "list"); code != 0 || !strings.Contains(out, memberLogin) || !strings.Contains(out, ownerLogin) {
		t.Fatalf("relay members list exited %d:\n%s", code, out)
	}
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, "local got "+r.URL.Path)
	}))
	t.Cleanup(local.Close)
	port := strings.TrimPrefix(local.URL, "http://127.0.0.1:")
	listen := harness.StartWith(t, cli, "listen", port, id)
	harness.Eventually(t, 30*time.Second, "the member's agent connected", func() bool {
		var got struct {
			Endpoint struct{ AgentConnected bool } `json:"endpoint"`
		}
		srv.MustGraphQL(t, ownerSession, `query($id: ID!) { endpoint(id: $id) { agentConnected } }`, map[string]any{"id": id}, &got)
		return got.Endpoint.AgentConnected || listen.Exited()
	})
	if status, body := send(t, id, http.MethodPost, "/team", nil, []byte(`{}`)); status != http.StatusAccepted || body != "local got /team" {
		t.Fatalf("a webhook through the member's listener: %d %q\n%s", status, body, listen.Output())
	}

	// The owner removes the member: the listener is refused at once, the
	// member's browser is signed out.
	owner.open("/settings")
	owner.waitFor("the member's row", `[...document.querySelectorAll('[data-testid=members] tbody tr')].some((r) => r.textContent.includes('`+memberLogin+`'))`)
	owner.click(`[data-testid=members] tr[data-member-id="` + eval[string](owner, `[...document.querySelectorAll('[data-testid=members] tbody tr')].find((r) => r.textContent.includes('`+memberLogin+`')).dataset.memberId`) + `"] .btn-danger`)
	owner.click(`dialog[open] .btn-danger`)
	owner.waitFor("the member gone", `![...document.querySelectorAll('[data-testid=members] tbody tr')].some((r) => r.textContent.includes('`+memberLogin+`'))`)
	harness.Eventually(t, 30*time.Second, "the removed member's listener to stop", listen.Exited)
	if _, code := listen.ExitCode(); code != 2 {
		t.Errorf("the removed member's listener exited %d, want 2:\n%s", code, listen.Output())
	}
	member.open("/")
	member.waitFor("the sign-in form", `document.querySelector('[data-testid=password-sign-in]')`)
}

// An account made with tokens only (relay login --signup) sets up sign-in
// from the settings page: its first owner is signed in by cookie, the
// pasted token forgotten, and the login works from then on.
func TestSetUpSignInFromSettings(t *testing.T) {
	token := signUp(t, "Legacy Co")
	login, password := uniqueLogin("legacy"), "correct horse battery staple"
	p := newPage(t, 1280, 800)
	p.open("/settings#token=" + token)
	p.waitFor("the set-up form", `document.querySelector('form[aria-labelledby=setup-title]')`)
	p.assertLabelled()
	p.do(chromedpSetValue(`form[aria-labelledby=setup-title] input[name=login]`, login))
	p.do(chromedpSetValue(`form[aria-labelledby=setup-title] input[name=password]`, "too short"))
	p.click(`form[aria-labelledby=setup-title] button[type=submit]`)
	p.waitFor("the refusal", `document.querySelector('form[aria-labelledby=setup-title] .notice-error')`)
	if got := p.text(`form[aria-labelledby=setup-title] .notice-error`); !strings.Contains(got, "at least 10 bytes") {
		t.Errorf("a short password says %q", got)
	}
	p.do(chromedpSetValue(`form[aria-labelledby=setup-title] input[name=password]`, password))
	p.click(`form[aria-labelledby=setup-title] button[type=submit]`)
	p.waitFor("the signed-in member", `document.querySelector('[data-testid=member-login]')?.textContent === '`+login+`'`)
	if stored := eval[string](p, `localStorage.getItem('relay.token') || ''`); stored != "" {
		t.Errorf("the pasted token is still used: %q", stored)
	}
	if p.sessionCookie() == nil {
		t.Fatal("no session cookie after setting up sign-in")
	}
	p.waitFor("the team with its owner", `document.querySelector('[data-testid=members] [data-testid=member-role]')?.textContent === 'Owner'`)
	// The account's token still works for the CLI.
	srv.MustGraphQL(t, token, `{ endpoints { id } }`, nil, nil)
}

// A member changes their password in settings: a wrong current password
// is refused naming it; then the old password no longer signs in and the
// new one does.
func TestChangePasswordInSettings(t *testing.T) {
	login, old, next := uniqueLogin("pat"), "the first long password", "a brand new passphrase"
	p := newPage(t, 1280, 900)
	p.open("/")
	fillSignUp(p, "Pat's Team", login, old)
	p.waitFor("the Endpoints area", `document.querySelector('form.create-endpoint')`)
	p.open("/settings")
	form := `[data-testid=change-password]`
	p.waitFor("the password form", `document.querySelector('`+form+`')`)
	p.assertLabelled()
	change := func(current string) {
		t.Helper()
		p.do(chromedpSetValue(form+` input[name=currentPassword]`, current))
		p.do(chromedpSetValue(form+` input[name=newPassword]`, next))
		p.click(form + ` button[type=submit]`)
	}
	change("not my password at all")
	p.waitFor("the refusal", `document.querySelector('`+form+` .notice-error')`)
	if got := p.text(form + ` .notice-error`); !strings.Contains(got, "currentPassword") {
		t.Errorf("a wrong current password says %q, want the field named", got)
	}
	change(old)
	p.waitFor("the change", `document.querySelector('`+form+` .notice-success')`)

	p.click(`[data-testid=sign-out]`)
	fillSignIn(p, login, old)
	p.waitFor("the old password refused", `document.querySelector('[data-testid=password-sign-in] .notice-error')`)
	fillSignIn(p, login, next)
	p.waitFor("signed in with the new password", `document.querySelector('form.create-endpoint')`)
}

// A session revoked elsewhere while a page is open: the page's next
// request is refused, and the console forgets the account at once,
// saying why, instead of failing request after request.
func TestSessionEndedWhileOpen(t *testing.T) {
	login := uniqueLogin("rae")
	p := newPage(t, 1280, 900)
	p.open("/")
	fillSignUp(p, "Rae's Team", login, "a long enough password")
	p.waitFor("the Endpoints area", `document.querySelector('form.create-endpoint')`)
	session := p.sessionCookie().Value
	var made struct {
		CreateToken struct{ Secret string }
	}
	srv.MustGraphQL(t, session, `mutation { createToken(name: "elsewhere") { secret } }`, nil, &made)
	var tokens struct {
		Tokens []struct {
			ID      string
			Session bool
		}
	}
	srv.MustGraphQL(t, made.CreateToken.Secret, `{ tokens { id session } }`, nil, &tokens)
	for _, tk := range tokens.Tokens {
		if tk.Session {
			srv.MustGraphQL(t, made.CreateToken.Secret, `mutation($id: ID!) { revokeToken(id: $id) }`, map[string]any{"id": tk.ID}, nil)
		}
	}

	p.open("/settings")
	p.waitFor("the sign-in, with why", `document.querySelector('[data-testid=password-sign-in]') && !document.querySelector('[data-testid=sign-out]')`)
	// A page already open finds out at its next request.
	fillSignIn(p, login, "a long enough password")
	p.waitFor("the settings again", `document.querySelector('[data-testid=change-password]')`)
	srv.MustGraphQL(t, made.CreateToken.Secret, `{ tokens { id session } }`, nil, &tokens)
	for _, tk := range tokens.Tokens {
		if tk.Session {
			srv.MustGraphQL(t, made.CreateToken.Secret, `mutation($id: ID!) { revokeToken(id: $id) }`, map[string]any{"id": tk.ID}, nil)
		}
	}
	p.click(`form[aria-labelledby=invite-title] button[type=submit]`)
	p.waitFor("the page signed out", `document.querySelector('[data-testid=password-sign-in]') && !document.querySelector('[data-testid=sign-out]')`)
	if got := p.text(`main`); !strings.Contains(got, "Your session ended") {
		t.Errorf("the page says %q, want why it signed out", got)
	}
}
