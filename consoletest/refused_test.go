package consoletest

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestRefusedRequestsLine: an inspector's history page says how many
// requests its address's rate limit refused (they are not rows). A relay of
// its own, with a rate of one request, makes the count exact.
func TestRefusedRequestsLine(t *testing.T) {
	// The relay first: cleanups run in reverse, so the page closes before
	// the relay stops under it.
	r := harness.Start(t, "", "--address-rate", "1/min,burst=1", "--refusal-interval", "100ms")
	p := newPage(t, 1280, 800)
	var out struct{ CreateInspector struct{ ID string } }
	r.MustGraphQL(t, "", `mutation{ createInspector{ id } }`, nil, &out)
	id := out.CreateInspector.ID
	for i, want := range []int{204, 429, 429} {
		if resp := r.SendRaw(t, harness.RawRequest{Method: "POST", Target: fmt.Sprintf("/%d", i), Host: r.AddressHost(id)}); resp.Status != want {
			t.Fatalf("request %d: %d, want %d", i, resp.Status, want)
		}
	}
	harness.Eventually(t, 10*time.Second, "the refusals counted", func() bool {
		var q struct{ Inspector struct{ RefusedRequests int } }
		r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ refusedRequests } }`, map[string]any{"id": id}, &q)
		return q.Inspector.RefusedRequests == 2
	})
	p.do(chromedp.Navigate(r.BareURL() + "/i/" + id))
	p.waitFor("the refused line", `document.querySelector('[data-testid=refused]')?.textContent === '2 requests refused by the rate limit (answered 429, not recorded).'`)
}
