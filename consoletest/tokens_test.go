package consoletest

import (
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// The settings page lists the account's tokens with the one this browser
// uses marked; a token created there works once, shown once; a token
// revoked there is refused by the CLI at once.
func TestTokensSettingsRevoke(t *testing.T) {
	token := signUp(t, "Tess")
	var created struct {
		CreateToken struct {
			Token  struct{ ID string }
			Secret string
		} `json:"createToken"`
	}
	srv.MustGraphQL(t, token, `mutation { createToken(name: "ci box") { token { id } secret } }`, nil, &created)
	ci := created.CreateToken
	cli := func(tok string) (string, int) {
		return harness.RunWith(t, harness.Command{Bin: relayBin, Env: []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(), "RELAY_SERVER=", "RELAY_TOKEN="}},
			"endpoints", "list", "--server", srv.BareURL(), "--token", tok)
	}
	if out, code := cli(ci.Secret); code != 0 {
		t.Fatalf("the CLI with the new token exited %d:\n%s", code, out)
	}

	p := newPage(t, 1280, 800)
	p.open("/#token=" + token)
	p.waitFor("the settings link", `document.querySelector('[data-testid=settings-link]')`)
	p.click(`[data-testid=settings-link]`)
	row := `tr[data-token-id="` + ci.Token.ID + `"]`
	p.waitFor("the ci token's row", `document.querySelector('`+row+`')`)
	if got := p.text(`[data-testid=tokens] tbody tr:first-child td:first-child`); !strings.Contains(got, "first token") || !strings.Contains(got, "this browser") {
		t.Errorf("first row names %q, want the first token marked as this browser's", got)
	}
	if strings.Contains(p.text(row), "this browser") {
		t.Errorf("the ci token is marked as this browser's")
	}
	p.assertLabelled()

	// Create one: its secret is shown once and works.
	p.do(chromedpSetValue(`input[name=token-name]`, "phone"))
	p.click(`form[aria-labelledby=create-token-title] button[type=submit]`)
	p.waitFor("the new token", `document.querySelector('[data-testid=new-token]')`)
	secret := p.text(`[data-testid=new-token]`)
	var me struct {
		Tokens []struct {
			Name    string
			Current bool
		} `json:"tokens"`
	}
	srv.MustGraphQL(t, secret, `{ tokens { name current } }`, nil, &me)
	if len(me.Tokens) != 3 || me.Tokens[2].Name != "phone" || !me.Tokens[2].Current {
		t.Fatalf("the token shown by the console lists %+v", me.Tokens)
	}

	// Revoke the ci token: cancel first, then confirm.
	p.click(row + ` button`)
	p.waitFor("the confirmation dialog", `document.querySelector('dialog[open]')`)
	p.click(`dialog[open] .actions .btn:not(.btn-danger)`)
	p.waitFor("the dialog closed", `!document.querySelector('dialog')`)
	if out, code := cli(ci.Secret); code != 0 {
		t.Fatalf("a cancelled revocation refused the token (%d):\n%s", code, out)
	}
	p.click(row + ` button`)
	p.click(`dialog[open] .btn-danger`)
	p.waitFor("the row gone", `!document.querySelector('`+row+`') && document.querySelector('[data-testid=tokens] table')`)
	out, code := cli(ci.Secret)
	if code != 2 || !strings.Contains(out, "UNAUTHENTICATED") {
		t.Fatalf("the CLI with the revoked token exited %d, want 2 naming UNAUTHENTICATED:\n%s", code, out)
	}
	if out, code := cli(token); code != 0 {
		t.Fatalf("the browser's own token stopped working (%d):\n%s", code, out)
	}
}
