package consoletest

import (
	"strconv"
	"strings"
	"testing"
)

// adminToken is the shared relay's --admin-token.
const adminToken = "console-admin"

// The settings page shows the account's usage beside the quota the
// operator set, and says when the storage quota is used up.
func TestUsageSettings(t *testing.T) {
	token := signUp(t, "Uma")
	var me struct {
		Me struct{ ID string } `json:"me"`
	}
	srv.MustGraphQL(t, token, `{ me { id } }`, nil, &me)
	var ep struct {
		CreateEndpoint struct{ ID string } `json:"createEndpoint"`
	}
	srv.MustGraphQL(t, token, `mutation { createEndpoint(input: {name: "usage", mode: LOG}) { id } }`, nil, &ep)
	srv.MustGraphQL(t, adminToken, `mutation($a: ID!) { setAccountQuota(account: $a, storage: "2KiB", rate: "50/s") { accountId } }`,
		map[string]any{"a": me.Me.ID}, nil)
	// Send until the quota refuses one: the first delivery alone (~2 KiB
	// as stored, the body base64) fills most of it.
	body := []byte(strings.Repeat("u", 1500))
	accepted := 0
	for i := 0; ; i++ {
		status, _ := send(t, ep.CreateEndpoint.ID, "POST", "/u", nil, body)
		if status == 507 {
			break
		}
		if status != 204 || i == 10 {
			t.Fatalf("request %d: %d, want 204 until the 2 KiB quota answers 507", i, status)
		}
		accepted++
	}

	p := newPage(t, 1280, 800)
	p.open("/#token=" + token)
	p.waitFor("the settings link", `document.querySelector('[data-testid=settings-link]')`)
	p.click(`[data-testid=settings-link]`)
	p.waitFor("the usage table", `document.querySelector('[data-testid=usage-total]')`)
	for _, c := range []struct{ id, want string }{
		{"usage-stored", "of 2 KiB"},
		{"usage-rate", "50/s,burst=50 across all Endpoints"},
		{"usage-total", strconv.Itoa(accepted)},
		{"usage-day", strconv.Itoa(accepted)},
		{"usage-refused", "1 storage quota used up (507)"},
	} {
		if got := p.text(`[data-testid=` + c.id + `]`); !strings.Contains(got, c.want) {
			t.Errorf("%s reads %q, want %q", c.id, got, c.want)
		}
	}
	if got := p.text(`[data-testid=usage]`); !strings.Contains(got, "storage quota is used up") {
		t.Errorf("the usage card does not say the quota is used up: %q", got)
	}
	p.assertLabelled()
}
