package consoletest

import (
	"strings"
	"testing"
)

// An Endpoint's page says how long it keeps deliveries; the settings set
// its own window, refuse one beyond the relay's maximum saying so, and an
// empty field goes back to the relay's default.
func TestEndpointRetentionSetting(t *testing.T) {
	token := signUp(t, "Retention")
	p := newPage(t, 1280, 800)
	p.open("/#token=" + token)

	p.waitFor("the create form", `document.querySelector('form.create-endpoint')`)
	p.do(chromedpSetValue(`form.create-endpoint input[name=name]`, "Kept a week"))
	p.do(chromedpSetValue(`form.create-endpoint select[name=mode]`, "LOG"))
	p.do(chromedpSetValue(`form.create-endpoint input[name=retention]`, "7d"))
	p.click(`form.create-endpoint button[type=submit]`)
	p.waitFor("the Endpoint page", `/^\/e\/[^/]+$/.test(location.pathname)`)
	p.waitFor("the retention line", `document.querySelector('[data-testid=retention]')`)
	if got := p.text(`[data-testid=retention]`); !strings.Contains(got, "Keeps deliveries for 7d;") {
		t.Fatalf("retention line = %q", got)
	}

	// Beyond the relay's maximum (the default 30d): refused, naming it.
	p.click(`details.settings summary`)
	p.do(chromedpSetValue(`details.settings input[name=retention]`, "400d"))
	p.click(`details.settings button[type=submit]`)
	p.waitFor("the refusal", `document.querySelector('details.settings .form-status')?.textContent.includes('30d')`)
	if got := p.text(`details.settings .form-status`); !strings.Contains(got, "maximum of 30d") {
		t.Errorf("refusal = %q", got)
	}

	// Empty: the relay's default.
	p.do(chromedpSetValue(`details.settings input[name=retention]`, ""))
	p.click(`details.settings button[type=submit]`)
	p.waitFor("the default window shown", `document.querySelector('[data-testid=retention]')?.textContent.includes("30d (the relay's default)")`)
}
