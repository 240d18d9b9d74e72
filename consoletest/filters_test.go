package consoletest

import (
	"fmt"
	"net/http"
	"testing"
)

// "Load more" pages through older rows with the cursor, and the filters
// narrow the loaded rows by method, status class and path text.
func TestLoadMoreAndFilters(t *testing.T) {
	id := newInspector(t)
	const total = 55 // one page of 50 and a bit
	for i := range total {
		method := http.MethodPost
		if i%5 == 0 {
			method = http.MethodGet
		}
		send(t, id, method, fmt.Sprintf("/item/%02d", i), nil, nil)
	}

	p := newPage(t, 1280, 800)
	p.open("/i/" + id)
	p.waitFor("the first page", `document.querySelectorAll('tr.row').length === 50`)
	p.assertLabelled()
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
		{"status 2xx", "", "2xx", "", total},
		{"status 5xx", "", "5xx", "", 0},
		{"path text", "", "", "item/4", 10},
		{"no filter", "", "", "", total},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.do(chromedpSetValue(`select[name=method]`, tt.method))
			p.do(chromedpSetValue(`select[name=status]`, tt.status))
			p.do(chromedpSetValue(`input[name=path]`, tt.path))
			if got := p.rowCount(); got != tt.want {
				t.Errorf("%d rows shown, want %d", got, tt.want)
			}
		})
	}
}
