package consoletest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
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
