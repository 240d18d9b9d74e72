package consoletest

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/relayhq/relay/systemtest/harness"
)

// statsCells reads the totals row of the chart's table, by column name.
func statsCells(p *page) map[string]string {
	p.t.Helper()
	row := eval[[]string](p, `[...document.querySelectorAll('[data-testid=stats-totals] td')].map((td) => td.textContent)`)
	cols := eval[[]string](p, `[...document.querySelectorAll('[data-testid=stats-table] thead th')].slice(1).map((th) => th.textContent)`)
	out := map[string]string{}
	for i, c := range cols {
		if i < len(row) {
			out[c] = row[i]
		}
	}
	return out
}

// An Endpoint receives 5 requests its local process answers 200, 3 it
// answers 500 and 2 its filters keep from the listener (answered 204):
// the chart's table on the Endpoint's page counts exactly those, follows a
// new delivery live, and clicking the 5xx part of a bar lists the 5xx
// deliveries of that minute. The home page shows the Endpoint's sparkline.
func TestChartsCountTheMix(t *testing.T) {
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/bad") {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(local.Close)
	target := strings.TrimPrefix(local.URL, "http://")
	token := signUp(t, "Charts")
	var created struct {
		CreateEndpoint struct{ ID string } `json:"createEndpoint"`
	}
	srv.MustGraphQL(t, token, `mutation($t: String!) { createEndpoint(input: {name: "Charts", mode: PROXY, target: $t, filterTexts: ["path=/ok,/bad"]}) { id } }`,
		map[string]any{"t": target}, &created)
	id := created.CreateEndpoint.ID
	srv.StartAgent(t, token, id, target)
	harness.Eventually(t, 15*time.Second, "the agent to connect", func() bool {
		var out struct {
			Endpoint struct{ AgentConnected bool } `json:"endpoint"`
		}
		srv.MustGraphQL(t, token, `query($id: ID!) { endpoint(id: $id) { agentConnected } }`, map[string]any{"id": id}, &out)
		return out.Endpoint.AgentConnected
	})
	sendAll := func(path string, n, want int) {
		for range n {
			if status, _ := send(t, id, http.MethodPost, path, nil, []byte(`{}`)); status != want {
				t.Fatalf("%s answered %d, want %d", path, status, want)
			}
		}
	}
	sendAll("/ok", 5, 200)
	sendAll("/bad", 3, 500)
	sendAll("/skip", 2, 204)

	p := newPage(t, 1280, 900)
	p.openEndpoint(token, id)
	p.waitFor("the chart's table", `document.querySelector('[data-testid=stats-totals]')`)
	p.waitFor("ten deliveries in the chart", `document.querySelector('[data-testid=stats-totals] td')?.textContent === '10'`)
	want := map[string]string{"Deliveries": "10", "2xx": "7", "3xx": "0", "4xx": "0", "5xx": "3", "No answer yet": "0", "Filtered": "2", "Refused": "0"}
	got := statsCells(p)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("chart table %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if !eval[bool](p, `!!document.querySelector('[data-testid=chart-volume] canvas') && !!document.querySelector('[data-testid=chart-latency] canvas')`) {
		t.Error("no uPlot canvas in the charts")
	}

	// Live: one more 500 reaches the chart without a reload.
	sendAll("/bad", 1, 500)
	p.waitFor("the new 500 in the chart", `document.querySelector('[data-testid=stats-totals] td')?.textContent === '11'`)
	if got := statsCells(p); got["5xx"] != "4" {
		t.Errorf("after a live 500 the chart's 5xx is %q, want 4", got["5xx"])
	}
	p.waitFor("eleven rows", `document.querySelectorAll('tr.row').length === 11`)
	p.click(`details.stats-table summary`)
	p.screenshot("charts.png")

	// Click the 5xx band of the newest bar that has one: the history then
	// lists that minute's 5xx deliveries only.
	pick := eval[map[string]float64](p, `(() => {
		const rows = [...document.querySelectorAll('[data-testid=stats-table] tbody tr')];
		const cols = [...document.querySelectorAll('[data-testid=stats-table] thead th')].map((th) => th.textContent);
		const col = (name) => cols.indexOf(name);
		const num = (tr, name) => Number(tr.children[col(name)].textContent);
		const row = rows.filter((tr) => num(tr, '5xx') > 0).pop();
		const peak = Math.max(...rows.map((tr) => num(tr, 'Deliveries')));
		const over = document.querySelector('[data-testid=chart-volume] .u-over').getBoundingClientRect();
		const table = document.querySelector('[data-testid=stats-table]');
		const index = (Date.parse(row.dataset.start) - Date.parse(table.dataset.from)) / (Number(table.dataset.bucketSeconds) * 1000);
		const below = num(row, '2xx') + num(row, '3xx') + num(row, '4xx');
		const mid = below + num(row, '5xx') / 2;
		return { x: over.left + over.width * index / 59 - (index === 59 ? 3 : 0), y: over.bottom - over.height * mid / peak, fivexx: num(row, '5xx') };
	})()`)
	p.do(chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, pick["x"], pick["y"]), chromedp.MouseClickXY(pick["x"], pick["y"]))
	p.waitFor("the time filter", `!!document.querySelector('[data-testid=time-filter] .chip')`)
	if got := eval[string](p, `document.querySelector('select[name=status]').value`); got != "5xx" {
		t.Errorf("status filter %q after clicking the 5xx band, want 5xx", got)
	}
	p.waitFor(fmt.Sprintf("%v rows of 500", pick["fivexx"]), fmt.Sprintf(`document.querySelectorAll('tr.row').length === %d && [...document.querySelectorAll('tr.row .status')].every((s) => s.textContent === '500')`, int(pick["fivexx"])))

	if screenshots() {
		// The same page in the dark theme, drawn anew with its colours.
		colorScheme(p, "dark")
		p.open("/e/" + id)
		p.waitFor("the chart's table", `document.querySelector('[data-testid=stats-totals] td')?.textContent === '11'`)
		p.click(`details.stats-table summary`)
		p.screenshot("charts-dark.png")
		colorScheme(p, "light")
	}

	// The home page shows a sparkline beside the Endpoint.
	p.open("/")
	p.waitFor("the sparkline", `!!document.querySelector('[data-testid=sparkline] canvas')`)
	if got := eval[string](p, `document.querySelector('[data-testid=sparkline] table td')?.textContent`); got != "11" {
		t.Errorf("sparkline table says %q deliveries, want 11", got)
	}
}

// colorScheme makes the page prefer a light or dark theme.
func colorScheme(p *page, scheme string) {
	p.t.Helper()
	if _, err := chromedp.Call(p.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
		p.t.Fatalf("emulate %s theme: %v", scheme, err)
	}
}

// countGraphQL makes the page record the name of every GraphQL operation
// it posts (window.__graphql.ops) and how many are still unanswered, their
// bodies unread (window.__graphql.pending), from its first script on.
func countGraphQL(p *page) {
	p.t.Helper()
	const script = `(() => {
  const seen = window.__graphql = { ops: [], pending: 0 };
  const fetch = window.fetch;
  window.fetch = function (input, init) {
    const url = typeof input === 'string' ? input : input.url;
    if (!url.endsWith('/graphql') || !init || typeof init.body !== 'string') return fetch.apply(this, arguments);
    const m = /^\s*(?:query|mutation|subscription)\s+(\w+)/.exec(JSON.parse(init.body).query || '');
    seen.ops.push(m ? m[1] : '');
    seen.pending++;
    return fetch.apply(this, arguments).then((r) => {
      r.clone().text().finally(() => seen.pending--);
      return r;
    }, (err) => {
      seen.pending--;
      throw err;
    });
  };
})();`
	p.do(func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: script})
		return chromedp.Void{}, err
	})
}

// sparklinesPage is charts.js SPARKLINES_PAGE: the Endpoints whose stats one
// request of the home page reads.
const sparklinesPage = 9

// sparklineAccount signs up on r an account of n LOG Endpoints, Endpoint i
// with i%4 deliveries, and waits until their stats count them.
func sparklineAccount(t *testing.T, r *harness.Relay, n int) string {
	t.Helper()
	var up struct {
		SignUp struct{ Token string } `json:"signUp"`
	}
	r.MustGraphQL(t, "", `mutation { signUp(name: "Sparklines") { token } }`, nil, &up)
	token := up.SignUp.Token
	ids := make([]string, n)
	for i := range ids {
		var created struct {
			CreateEndpoint struct{ ID string } `json:"createEndpoint"`
		}
		r.MustGraphQL(t, token, `mutation($n: String!) { createEndpoint(input: {name: $n, mode: LOG}) { id } }`,
			map[string]any{"n": fmt.Sprintf("spark%02d", i)}, &created)
		ids[i] = created.CreateEndpoint.ID
		for range i % 4 {
			if status, _ := sendTo(t, r, ids[i], http.MethodPost, "/spark", nil, []byte("x")); status != http.StatusNoContent {
				t.Fatalf("a delivery to %s was answered %d", ids[i], status)
			}
		}
	}
	for i, id := range ids {
		harness.Eventually(t, 15*time.Second, "the stats of "+id, func() bool {
			var out struct {
				Endpoint struct {
					Stats struct{ Totals struct{ Deliveries int } }
				} `json:"endpoint"`
			}
			r.MustGraphQL(t, token, `query($id: ID!) { endpoint(id: $id) { stats { totals { deliveries } } } }`, map[string]any{"id": id}, &out)
			return out.Endpoint.Stats.Totals.Deliveries == i%4
		})
	}
	return token
}

// TestHomePageReadsSparklinesInPages: the home page drew a sparkline per
// Endpoint with one EndpointStats request each, priced and rated as any
// (850 points and more): an account of N Endpoints sent N requests on every
// visit, and one of 1 000 could spend its own API budget on its home page.
// Now the page reads the stats of the rows on screen only, nine Endpoints a
// request, one request at a time. An account of 60 Endpoints, Endpoint i
// with i%4 deliveries: with every row on screen the page sent 60 stats
// requests, now 7 (ceil(60/9)), and every sparkline shows its figures; on a
// screen of 800 pixels scrolled to the bottom it sent 60, now 4 for the 27
// rows it showed (two runs of rows: one partial page more at most), and the
// rows it never showed are not read. On a relay whose --max-query-cost
// (5 000) refuses a page of nine, the console asks for smaller pages and
// still draws every sparkline: 60 requests before, now 22.
func TestHomePageReadsSparklinesInPages(t *testing.T) {
	const endpoints = 60
	low := harness.Start(t, "", "--anonymous-rate", "off", "--max-query-cost", "5000")
	tokens := map[*harness.Relay]string{srv: sparklineAccount(t, srv, endpoints), low: sparklineAccount(t, low, endpoints)}

	for _, tc := range []struct {
		name     string
		relay    *harness.Relay
		height   int64
		scroll   bool // to the bottom, once the first row's sparkline is drawn
		page     int  // rows a request reads: 0, sparklinesPage
		slack    int  // requests beyond one per page of rows drawn
		everyRow bool // every sparkline is drawn, else some are not
		refusals bool // the relay refuses pages: the browser logs them
	}{
		{name: "every row on screen", relay: srv, height: 6000, everyRow: true},
		{name: "a screen scrolled to the bottom", relay: srv, height: 800, scroll: true, slack: 1},
		// Pages of 9 and 5 rows cost 9 865 and 5 481: both refused (422,
		// QUERY_TOO_COMPLEX), then pages of 3 (3 289): 20 requests and
		// the 2 refused.
		{name: "a lower cost budget", relay: low, height: 6000, page: 3, slack: 2, everyRow: true, refusals: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPage(t, 1280, tc.height)
			if tc.refusals {
				p.tolerate(`status of 422 \(Unprocessable Entity\) .*/graphql$`)
			}
			countGraphQL(p)
			p.openOn(tc.relay, "/")
			p.waitFor("the sign-in form", `document.querySelector('input[name=token]')`)
			p.do(chromedpSetValue(`input[name=token]`, tokens[tc.relay]))
			p.click(`form[aria-labelledby=signin-title] button[type=submit]`)
			p.waitFor("the Endpoints list", `document.querySelectorAll('.endpoint-list [data-testid=sparkline]').length === `+fmt.Sprint(endpoints))
			const drawn = `[...document.querySelectorAll('.endpoint-list [data-testid=sparkline]')].map((b) => [b.querySelector('table td')?.textContent ?? '', b.querySelectorAll('table td')[1]?.textContent ?? '', b.title, !!b.querySelector('canvas')])`
			p.waitFor("the first sparkline", drawn+`[0][0] !== ''`)
			if tc.scroll {
				p.do(chromedp.Evaluate[chromedp.Void](`window.scrollTo({ top: document.documentElement.scrollHeight, behavior: 'instant' })`))
				p.waitFor("the last sparkline", drawn+`[`+fmt.Sprint(endpoints-1)+`][0] !== ''`)
			}
			if tc.everyRow {
				p.waitFor("every sparkline", drawn+`.every((d) => d[0] !== '')`)
			}
			p.waitFor("the stats read", `window.__graphql.pending === 0`)

			rows := eval[[][]any](p, drawn)
			shown := 0
			for i, r := range rows {
				if r[0] == "" {
					continue
				}
				shown++
				want := []any{fmt.Sprint(i % 4), "0", fmt.Sprintf("%d deliveries, 0 failed in the last hour", i%4), true}
				if fmt.Sprint(r) != fmt.Sprint(want) {
					t.Errorf("sparkline %d shows %v, want %v", i, r, want)
				}
			}
			requests := 0
			for _, op := range eval[[]string](p, `window.__graphql.ops`) {
				if op == "EndpointStats" || op == "EndpointsStats" {
					requests++
				}
			}
			page := cmp.Or(tc.page, sparklinesPage)
			limit := (shown+page-1)/page + tc.slack
			t.Logf("%d stats requests for %d sparklines drawn of %d Endpoints (at most %d)", requests, shown, endpoints, limit)
			if requests > limit {
				t.Errorf("the home page sent %d stats requests for %d sparklines, want at most %d", requests, shown, limit)
			}
			if tc.everyRow && shown != endpoints {
				t.Errorf("%d sparklines show their figures, want all %d", shown, endpoints)
			}
			if !tc.everyRow && shown == endpoints {
				t.Errorf("all %d sparklines were read, the rows never on screen too", endpoints)
			}
		})
	}
}
