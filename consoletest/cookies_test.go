package consoletest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/relayhq/relay/systemtest/harness"
)

// Two registrable domains, as deploy.md recommends: the console on
// console.example.com, the addresses under relay.example.net (the browser
// maps both to 127.0.0.1, see startBrowser).
const (
	consoleHost = "console.example.com"
	addressSite = "relay.example.net"
)

// twoSiteRelay runs a relay whose console has a host of its own.
func twoSiteRelay(t *testing.T) (r *harness.Relay, console string) {
	t.Helper()
	r = harness.Start(t, "", "--domain", addressSite, "--console-url", "http://"+consoleHost, "--anonymous-rate", "off")
	return r, "http://" + consoleHost + ":" + strconv.Itoa(r.Port)
}

// consoleGraphQL posts an operation to r's console on host as a
// same-origin page would, with the Cookie header given; it returns the
// data and the session cookie the answer set, if any.
func consoleGraphQL(t *testing.T, r *harness.Relay, host, cookie, query string, vars map[string]any, out any) (session string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/graphql", bytes.NewReader(body))
	req.Host = host + ":" + strconv.Itoa(r.Port)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if cookie != "" {
		req.Header.Set("Cookie", "relay_session="+cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || len(a.Errors) > 0 {
		t.Fatalf("%s: status %d, %v %+v", query, resp.StatusCode, err, a.Errors)
	}
	if out != nil {
		if err := json.Unmarshal(a.Data, out); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range resp.Cookies() {
		if c.Name == "relay_session" {
			session = c.Value
		}
	}
	return session
}

// cookiesFor lists the browser's cookies that would go to url.
func (p *page) cookiesFor(url string) []*network.Cookie {
	p.t.Helper()
	var found []*network.Cookie
	p.do(func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
		if err != nil {
			return chromedp.Void{}, err
		}
		found = res.Cookies
		return chromedp.Void{}, nil
	})
	return found
}

// meInPage asks the relay, from the open console page with its cookies,
// whose account it acts for ("" when signed out).
func meInPage(p *page) string {
	p.t.Helper()
	return eval[string](p, `fetch('/graphql', {method: 'POST', headers: {'Content-Type': 'application/json'},
		body: JSON.stringify({query: '{ me { name } }'})}).then(r => r.json()).then(j => (j.data && j.data.me && j.data.me.name) || '')`)
}

// tosser is a stranger's account on r with a PROXY Endpoint whose local
// process answers every request with Set-Cookie carrying the stranger's
// own browser session for the whole address domain.
type tosser struct {
	session, token, endpoint string
	address                  string // the Endpoint's public URL
	toss                     []string
}

// newTosser signs the stranger up on the console at consoleAt (a host of
// r) and connects the real agent to the tossing Endpoint.
func newTosser(t *testing.T, r *harness.Relay, consoleAt string) tosser {
	t.Helper()
	port := strconv.Itoa(r.Port)
	var x tosser
	x.session = consoleGraphQL(t, r, consoleAt, "", `mutation($l: String!, $p: String!){ signUpWithPassword(name: "Mallory's", login: $l, password: $p){ account { name } } }`,
		map[string]any{"l": uniqueLogin("mallory"), "p": "mallory's long passphrase"}, nil)
	if x.session == "" {
		t.Fatal("no session cookie for the stranger's sign-up on the console")
	}
	var tok struct{ CreateToken struct{ Secret string } }
	consoleGraphQL(t, r, consoleAt, x.session, `mutation { createToken(name: "agent") { secret } }`, nil, &tok)
	x.token = tok.CreateToken.Secret
	// One cookie: two of the name would be refused as a toss wherever
	// they arrived, and a signed-out browser must show the site boundary
	// itself.
	x.toss = []string{"relay_session=" + x.session + "; Domain=" + r.Domain() + "; Path=/graphql"}
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		for _, c := range x.toss {
			w.Header().Add("Set-Cookie", c)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<!doctype html><title>hello</title><p>nothing to see</p>")
	}))
	t.Cleanup(local.Close)
	target := strings.TrimPrefix(local.URL, "http://")
	var ep struct{ CreateEndpoint struct{ ID string } }
	r.MustGraphQL(t, x.token, `mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ id } }`,
		map[string]any{"in": map[string]any{"name": "toss", "mode": "PROXY", "target": target}}, &ep)
	x.endpoint = ep.CreateEndpoint.ID
	r.StartAgent(t, x.token, x.endpoint, target)
	x.address = "http://" + r.AddressHost(x.endpoint) + "/"
	harness.Eventually(t, 15*time.Second, "the agent connected", func() bool {
		var q struct{ Endpoint struct{ AgentConnected bool } }
		r.MustGraphQL(t, x.token, `query($id: ID!){ endpoint(id: $id){ agentConnected } }`, map[string]any{"id": x.endpoint}, &q)
		return q.Endpoint.AgentConnected
	})
	// The Endpoint passes the local Set-Cookie on unchanged (fidelity).
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+"/", nil)
	req.Host = r.AddressHost(x.endpoint)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Values("Set-Cookie"); strings.Join(got, "\n") != strings.Join(x.toss, "\n") {
		t.Fatalf("the Endpoint answered Set-Cookie %q, want the local %q unchanged", got, x.toss)
	}
	return x
}

// tossAt opens the Endpoint's address in p and checks the browser kept
// the tossed cookie for the address domain of r.
func (x tosser) tossAt(t *testing.T, p *page, r *harness.Relay) {
	t.Helper()
	p.do(chromedp.Navigate(x.address))
	p.waitFor("the local answer", `document.title === 'hello'`)
	var kept bool
	for _, c := range p.cookiesFor("http://" + r.Domain() + ":" + strconv.Itoa(r.Port) + "/graphql") {
		kept = kept || (c.Name == "relay_session" && c.Value == x.session)
	}
	if !kept {
		t.Fatal("the browser did not keep the tossed cookie for the address domain: the test no longer tries the attack")
	}
}

// Cookie tossing, in the recommended deployment (the console on its own
// site): a stranger's PROXY Endpoint answers with Set-Cookie carrying the
// stranger's own session for the whole address domain, and the relay
// passes it on unchanged. The browser does keep it for relay.example.net;
// yet the console on console.example.com stays signed in as its user, a
// signed-out browser stays signed out, and the bare domain sends browsers
// to the console and reads no cookie. The CLI's device login names the
// console's URL.
func TestTossedCookieCannotReachTheConsole(t *testing.T) {
	r, console := twoSiteRelay(t)
	port := strconv.Itoa(r.Port)
	x := newTosser(t, r, consoleHost)

	t.Run("signed in", func(t *testing.T) {
		victim := uniqueLogin("vic")
		p := newPage(t, 1280, 800)
		p.do(chromedp.Navigate(console + "/"))
		fillSignUp(p, "Victim's", victim, "victim's long passphrase")
		p.waitFor("the signed-in console", `document.querySelector('[data-testid=member-login]')`)
		x.tossAt(t, p, r)
		p.do(chromedp.Navigate(console + "/"))
		p.waitFor("the signed-in console", `document.querySelector('[data-testid=member-login]')`)
		if got := p.text(`[data-testid=member-login]`); got != victim {
			t.Errorf("after the toss the console names %q, want its user %q", got, victim)
		}
		if got := meInPage(p); got != "Victim's" {
			t.Errorf("after the toss the console acts for %q, want Victim's", got)
		}
		for _, c := range p.cookiesFor(console + "/graphql") {
			if c.Value == x.session {
				t.Errorf("the tossed cookie reaches the console: %+v", c)
			}
		}
	})

	t.Run("signed out", func(t *testing.T) {
		p := newPage(t, 1280, 800)
		x.tossAt(t, p, r)
		p.do(chromedp.Navigate(console + "/"))
		p.waitFor("the sign-in form", `document.querySelector('[data-testid=password-sign-in]')`)
		if got := meInPage(p); got != "" {
			t.Errorf("a signed-out console acts for %q after the toss, want nobody", got)
		}
		// The bare domain gets the tossed cookie, reads none, and sends a
		// browser to the console.
		p.do(chromedp.Navigate("http://" + addressSite + ":" + port + "/e/" + x.endpoint))
		p.waitFor("the console host", fmt.Sprintf(`location.host === %q && location.pathname === '/e/%s'`, consoleHost+":"+port, x.endpoint))
	})

	t.Run("bare domain keeps the API", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+port+"/graphql", strings.NewReader(`{"query":"{ me { name } }"}`))
		req.Host = addressSite + ":" + port
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", "relay_session="+x.session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"me":null`) {
			t.Errorf("the bare domain read a session cookie: %s", b)
		}
		var me struct{ Me struct{ Name string } }
		r.MustGraphQL(t, x.token, `{ me { name } }`, nil, &me)
		if me.Me.Name != "Mallory's" {
			t.Errorf("a token on the bare domain acts for %q, want Mallory's", me.Me.Name)
		}
	})

	t.Run("device login names the console", func(t *testing.T) {
		login := harness.StartWith(t, cliEnv(t), "login", "--server", "http://127.0.0.1:"+port, "--device")
		re := regexp.MustCompile(regexp.QuoteMeta(console) + `/device\?code=[A-Z]{4}-[A-Z]{4}`)
		harness.Eventually(t, 30*time.Second, "relay login to print the console's link", func() bool {
			return re.MatchString(login.Output()) || login.Exited()
		})
		if !re.MatchString(login.Output()) {
			t.Errorf("relay login printed no link on %s:\n%s", console, login.Output())
		}
		login.Stop(t)
	})
}

// Cookie tossing where the console shares the addresses' site over plain
// HTTP (what relay serve warns of): the tossed cookie reaches the console
// beside its user's own, and the relay signs the request out rather than
// choose; the user signs in again on the page.
func TestTossedCookieOnASharedSiteSignsOut(t *testing.T) {
	r := harness.Start(t, "", "--domain", addressSite, "--anonymous-rate", "off")
	console := r.BareURL()
	x := newTosser(t, r, addressSite)

	victim := uniqueLogin("vic")
	p := newPage(t, 1280, 800)
	p.do(chromedp.Navigate(console + "/"))
	fillSignUp(p, "Victim's", victim, "victim's long passphrase")
	p.waitFor("the signed-in console", `document.querySelector('[data-testid=member-login]')`)
	x.tossAt(t, p, r)
	p.do(chromedp.Navigate(console + "/"))
	var n int
	for _, c := range p.cookiesFor(console + "/graphql") {
		if c.Name == "relay_session" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the console's requests carry %d session cookies, want the user's and the tossed one", n)
	}
	p.waitFor("the sign-in form", `document.querySelector('[data-testid=password-sign-in]')`)
	if got := meInPage(p); got != "" {
		t.Errorf("with a tossed cookie beside its own the console acts for %q, want nobody", got)
	}
}
