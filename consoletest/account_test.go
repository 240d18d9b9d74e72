package consoletest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// signUp creates an account through the API and returns its token.
func signUp(t *testing.T, name string) string {
	t.Helper()
	var out struct {
		SignUp struct{ Token string } `json:"signUp"`
	}
	srv.MustGraphQL(t, "", `mutation($name: String!) { signUp(name: $name) { token } }`, map[string]any{"name": name}, &out)
	return out.SignUp.Token
}

// Signing in by pasting a token lists the account's Endpoints; the settings
// form saves; delete asks for confirmation; signing out forgets the token.
func TestSignInSettingsAndDelete(t *testing.T) {
	token := signUp(t, "Grace")
	var created struct {
		CreateEndpoint struct{ ID string } `json:"createEndpoint"`
	}
	srv.MustGraphQL(t, token, `mutation { createEndpoint(input: {name: "Orders", mode: LOG}) { id } }`, nil, &created)
	id := created.CreateEndpoint.ID

	p := newPage(t, 1280, 800)
	p.open("/")
	p.do(chromedpSendKeys(`input[name=token]`, "not-a-token"))
	p.click(`form[aria-labelledby=signin-title] button[type=submit]`)
	p.waitFor("the refusal", `document.querySelector('form[aria-labelledby=signin-title] .notice-error')`)
	if stored := eval[string](p, `localStorage.getItem('relay.token') || ''`); stored != "" {
		t.Errorf("a refused token was stored: %q", stored)
	}
	if eval[bool](p, `document.querySelector('form[aria-labelledby=signin-title] button[type=submit]').disabled`) {
		t.Error("the Sign in button stays disabled after a refusal")
	}

	p.do(chromedpSetValue(`input[name=token]`, token))
	p.click(`form[aria-labelledby=signin-title] button[type=submit]`)
	p.waitFor("the Endpoints list", `document.querySelector('.endpoint-list a[href="/e/`+id+`"]')`)
	if got := p.text(`#account`); !strings.Contains(got, "Grace") {
		t.Errorf("top bar shows %q, want the account name", got)
	}

	p.click(`.endpoint-list a[href="/e/` + id + `"]`)
	p.waitFor("the Endpoint page", `document.querySelector('#page-title')?.textContent === 'Orders'`)
	p.waitLive()
	send(t, id, http.MethodPost, "/logged", nil, []byte("x"))
	p.openRow("/logged")
	if reason := p.text(`[data-testid=retry-reason]`); reason != "Retry needs Log and Proxy or Queue mode" {
		t.Errorf("retry reason in LOG mode = %q", reason)
	}

	p.click(`details.settings summary`)
	p.do(chromedpSetValue(`details.settings input[name=name]`, "Orders v2"))
	p.do(chromedpSetValue(`details.settings input[name=target]`, "127.0.0.1:4000"))
	p.click(`details.settings button[type=submit]`)
	p.waitFor("the saved name", `document.querySelector('#page-title')?.textContent === 'Orders v2'`)
	p.waitFor("the saved notice", `document.querySelector('details.settings .notice-success')`)
	var got struct {
		Endpoint struct{ Name, Target string } `json:"endpoint"`
	}
	srv.MustGraphQL(t, token, `query($id: ID!) { endpoint(id: $id) { name target } }`, map[string]any{"id": id}, &got)
	if got.Endpoint.Name != "Orders v2" || got.Endpoint.Target != "127.0.0.1:4000" {
		t.Errorf("saved settings = %+v", got.Endpoint)
	}
	// relay listen, as the README teaches (not relay agent): TARGET, then
	// the Endpoint, by id since its name has a space.
	if cmd := p.text(`[data-testid=agent-command]`); !strings.Contains(cmd, "relay listen 127.0.0.1:4000 "+id+" --server ") {
		t.Errorf("agent command %q does not follow the new target", cmd)
	}

	// Delete: cancel first, then confirm.
	p.click(`details.settings .btn-danger`)
	p.waitFor("the confirmation dialog", `document.querySelector('dialog[open]')`)
	p.click(`dialog[open] .actions .btn:not(.btn-danger)`)
	p.waitFor("the dialog closed", `!document.querySelector('dialog')`)
	p.click(`details.settings .btn-danger`)
	p.click(`dialog[open] .btn-danger`)
	p.waitFor("the home page", `location.pathname === '/' && document.querySelector('.endpoint-list')`)
	p.waitFor("an empty list", `document.querySelector('.endpoint-list .empty')`)

	p.click(`#account button`)
	p.waitFor("the sign-in form", `document.querySelector('form[aria-labelledby=signin-title]')`)
	if stored := eval[string](p, `localStorage.getItem('relay.token') || ''`); stored != "" {
		t.Errorf("sign out kept the token %q", stored)
	}
}

// TestEndpointsListPages: on a relay without a cap on an account's
// Endpoints (--account-endpoints 0) the endpoints list refuses a list
// without first to an account holding more than 1 000, so the home page
// pages with first and after: an account of 1 001 Endpoints sees all of
// them, the last one included. Before, it saw the refusal and no list.
func TestEndpointsListPages(t *testing.T) {
	r := harness.Start(t, "", "--account-endpoints", "0", "--anonymous-rate", "off")
	var up struct {
		SignUp struct{ Token string } `json:"signUp"`
	}
	r.MustGraphQL(t, "", `mutation { signUp(name: "Many") { token } }`, nil, &up)
	token := up.SignUp.Token
	const endpoints = 1001
	var last string
	for i := range endpoints {
		var created struct {
			CreateEndpoint struct{ ID string } `json:"createEndpoint"`
		}
		r.MustGraphQL(t, token, `mutation($n: String!) { createEndpoint(input: {name: $n, mode: LOG}) { id } }`,
			map[string]any{"n": fmt.Sprintf("ep%04d", i)}, &created)
		last = created.CreateEndpoint.ID
	}

	p := newPage(t, 1280, 800)
	p.openOn(r, "/")
	p.waitFor("the sign-in form", `document.querySelector('input[name=token]')`)
	p.do(chromedpSetValue(`input[name=token]`, token))
	p.click(`form[aria-labelledby=signin-title] button[type=submit]`)
	p.waitFor("the Endpoints list or its refusal", `document.querySelector('.endpoint-list table, .endpoint-list .notice-error')`)
	if refusal := eval[string](p, `document.querySelector('.endpoint-list .notice-error')?.textContent || ''`); refusal != "" {
		t.Fatalf("the Endpoints list was refused: %s", refusal)
	}
	if rows := eval[int](p, `document.querySelectorAll('.endpoint-list table.table > tbody > tr').length`); rows != endpoints {
		t.Errorf("the Endpoints list shows %d rows, want %d", rows, endpoints)
	}
	if !eval[bool](p, `!!document.querySelector('.endpoint-list a[href="/e/`+last+`"]')`) {
		t.Errorf("the last Endpoint %s is not in the list", last)
	}
}
