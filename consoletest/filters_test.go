package consoletest

import (
	"fmt"
	"net/http"
	"testing"
)

// "Load more" pages through older rows with the cursor, and the filters
// search the whole history on the relay by method, status class, path and
// body text: a match older than the rows loaded is found.
func TestLoadMoreAndFilters(t *testing.T) {
	id := newInspector(t)
	const total = 55 // one page of 50 and a bit
	for i := range total {
		method := http.MethodPost
		if i%5 == 0 {
			method = http.MethodGet
		}
		var body []byte
		if i == 2 {
			body = []byte(`{"type":"invoice.payment_failed"}`) // only in an old row
		}
		send(t, id, method, fmt.Sprintf("/item/%02d", i), nil, body)
	}

	p := newPage(t, 1280, 800)
	p.open("/i/" + id)
	p.waitFor("the first page", `document.querySelectorAll('tr.row').length === 50`)
	p.assertLabelled()
	// The body search finds the old row, beyond the page loaded.
	p.do(chromedpSetValue(`input[name=body]`, "payment_failed"))
	p.waitFor("the match from older history", `document.querySelectorAll('tr.row').length === 1 && document.querySelector('tr.row .path-wrap code').textContent === '/item/02'`)
	p.do(chromedpSetValue(`input[name=body]`, ""))
	p.waitFor("the first page again", `document.querySelectorAll('tr.row').length === 50`)
	p.click(`.more button`)
	p.waitFor("every row", fmt.Sprintf(`document.querySelectorAll('tr.row').length === %d`, total))
	p.waitFor("no more pages", `!document.querySelector('.more button')`)
	if last := eval[string](p, `[...document.querySelectorAll('tr.row .path-wrap code')].at(-1).textContent`); last != "/item/00" {
		t.Errorf("last row after Load more = %q, want the oldest /item/00", last)
	}

	tests := []struct {
		name, method, status, path string
		want                       int
	}{
		{"method GET", "GET", "", "", 11},
		{"method and path", "GET", "", "/item/1", 2}, // /item/10, /item/15
		{"status 2xx (a page: Load more for the rest)", "", "2xx", "", 50},
		{"status 5xx", "", "5xx", "", 0},
		{"path prefix", "", "", "/item/4", 10},
		{"no filter (the first page again)", "", "", "", 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.do(chromedpSetValue(`select[name=method]`, tt.method))
			p.do(chromedpSetValue(`select[name=status]`, tt.status))
			p.do(chromedpSetValue(`input[name=path]`, tt.path))
			p.waitFor(fmt.Sprintf("%d rows", tt.want), fmt.Sprintf(`document.querySelectorAll('tr.row').length === %d`, tt.want))
		})
	}
}
