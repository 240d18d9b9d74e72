package consoletest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestCommandLineToConsole: a signed-out Endpoint page offers the sign-in
// form (not "reload the page"), and signing in there shows the Endpoint;
// `relay open` prints a link that signs the console in, and the token in
// its fragment is gone from the address bar once the page has it.
func TestCommandLineToConsole(t *testing.T) {
	token := signUp(t, "Ada")
	var created struct {
		CreateEndpoint struct{ ID string } `json:"createEndpoint"`
	}
	srv.MustGraphQL(t, token, `mutation { createEndpoint(input: {name: "Billing", mode: LOG}) { id } }`, nil, &created)
	id := created.CreateEndpoint.ID

	p := newPage(t, 1280, 800)
	p.tolerate("401|UNAUTHENTICATED")
	p.open("/e/" + id)
	p.waitFor("the sign-in form", `document.querySelector('[data-testid=sign-in]')`)
	if strings.Contains(p.text(`main`), "Reload the page") {
		t.Error("a signed-out Endpoint page still says to reload it")
	}
	p.do(chromedpSendKeys(`[data-testid=sign-in] input[name=token]`, token))
	p.click(`[data-testid=sign-in] button[type=submit]`)
	p.waitFor("the Endpoint's page", `document.querySelector('#page-title')?.textContent.includes('Billing')`)

	// From the command line: relay login stored the token; relay open
	// prints the link.
	home := t.TempDir()
	cli := harness.Command{Env: []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "RELAY_SERVER=", "RELAY_TOKEN="}}
	if out, code := harness.RunWith(t, cli, "login", "--server", srv.BareURL(), "--token", token); code != 0 {
		t.Fatalf("relay login exited %d:\n%s", code, out)
	}
	out, code := harness.RunWith(t, cli, "open", "Billing")
	link := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	if code != 0 || !strings.HasPrefix(link, srv.BareURL()+"/e/"+id+"#token=") {
		t.Fatalf("relay open exited %d, printed %q", code, out)
	}

	fresh := newPage(t, 1280, 800) // a browser context that never signed in
	fresh.do(chromedp.Navigate(link))
	fresh.waitFor("the Endpoint's page", `document.querySelector('#page-title')?.textContent.includes('Billing')`)
	if got := eval[string](fresh, `location.href`); strings.Contains(got, "token") || got != srv.BareURL()+"/e/"+id {
		t.Errorf("after the link the address bar reads %q, want the page without its fragment", got)
	}
	if stored := eval[string](fresh, `localStorage.getItem('relay.token') || ''`); stored != token {
		t.Errorf("the link's token was not stored as a signed-in token")
	}
}
