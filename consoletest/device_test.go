package consoletest

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// `relay login` prints a code; the console, signed in, shows which machine
// asks, and approving it logs that machine in with a token of its own.
// The code cannot be approved twice.
func TestApproveDeviceCode(t *testing.T) {
	token := signUp(t, "Dora")
	login, code := startDeviceLogin(t, cliEnv(t))
	host, _ := os.Hostname()

	p := newPage(t, 1280, 800)
	p.open("/device?code=" + code + "#token=" + token)
	p.waitFor("the code field", `document.querySelector('input[name=user-code]')?.value === '`+code+`'`)
	p.assertLabelled()
	p.click(`form[aria-labelledby=device-title] button[type=submit]`)
	p.waitFor("the confirmation", `document.querySelector('[data-testid=device-confirm]')`)
	if got := p.text(`[data-testid=device-confirm] h2`); !strings.Contains(got, host) || !strings.Contains(got, "Dora") {
		t.Errorf("the confirmation asks %q, want the machine %q and the account", got, host)
	}
	if got := p.text(`[data-testid=device-code]`); got != code {
		t.Errorf("the confirmation shows the code %q, want %q", got, code)
	}
	p.click(`[data-testid=approve-device]`)
	p.waitFor("the approval", `document.querySelector('[data-testid=device-result] .notice-success')`)

	harness.Eventually(t, 30*time.Second, "relay login to finish", login.Exited)
	if _, exit := login.ExitCode(); exit != 0 || !strings.Contains(login.Output(), "logged in to") {
		t.Fatalf("relay login exited %d:\n%s", exit, login.Output())
	}
	var tokens struct {
		Tokens []struct{ Name string } `json:"tokens"`
	}
	srv.MustGraphQL(t, token, `{ tokens { name } }`, nil, &tokens)
	if n := len(tokens.Tokens); n != 2 || tokens.Tokens[1].Name != host {
		t.Fatalf("the account's tokens are %+v, want the first and one named %q", tokens.Tokens, host)
	}

	// The same code again: refused, saying why.
	p.open("/device?code=" + code)
	p.waitFor("the code field", `document.querySelector('input[name=user-code]')`)
	p.click(`form[aria-labelledby=device-title] button[type=submit]`)
	p.waitFor("the refusal", `document.querySelector('form[aria-labelledby=device-title] .notice-error')`)
	if got := p.text(`form[aria-labelledby=device-title] .notice-error`); !strings.Contains(got, "already used") {
		t.Errorf("a reused code says %q, want it named as already used", got)
	}
}
