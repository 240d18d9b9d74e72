package consoletest

import (
	"bytes"
	"net/http"
	"testing"
)

// On a ~400px wide window nothing overflows horizontally and the detail
// pane stacks under the list.
func TestNarrowWindow(t *testing.T) {
	id := newInspector(t)
	long := "/webhooks/a-very-long-path-segment-that-would-overflow/and-another-one?with=query&and=more-query-values-here"
	send(t, id, http.MethodPost, long, http.Header{
		"Content-Type": {"application/json"},
		"X-Long":       {"a-very-long-header-value-without-spaces-" + string(bytes.Repeat([]byte("x"), 120))},
	}, []byte(`{"key":"`+string(bytes.Repeat([]byte("v"), 300))+`"}`))
	send(t, id, http.MethodPut, "/big", nil, bytes.Repeat([]byte{0xff, 0x00}, 150*1024))

	p := newPage(t, 400, 800)
	noOverflow := func(when string) {
		t.Helper()
		got := eval[[]int](p, `[document.documentElement.scrollWidth, window.innerWidth,
			document.querySelector('main').scrollWidth, document.querySelector('main').clientWidth]`)
		if got[0] > got[1] || got[2] > got[3] {
			t.Errorf("%s: horizontal overflow: page %d > window %d or main %d > %d", when, got[0], got[1], got[2], got[3])
		}
	}

	p.open("/")
	p.waitFor("the home page", `document.querySelector('[data-testid=new-inspector]')`)
	noOverflow("home")

	p.open("/i/" + id)
	p.waitFor("two rows", `document.querySelectorAll('tr.row').length === 2`)
	noOverflow("history")
	p.openRow(long)
	noOverflow("detail open")
	stacked := eval[bool](p, `document.querySelector('.detail').getBoundingClientRect().top >=
		document.querySelector('.list').getBoundingClientRect().bottom`)
	if !stacked {
		t.Error("the detail pane is not below the list on a narrow window")
	}
	p.openRow("/big")
	p.waitFor("the hex view", `document.querySelector('[data-testid=body-hex]')`)
	noOverflow("binary detail open")
}
