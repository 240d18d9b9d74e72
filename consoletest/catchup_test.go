package consoletest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCatchUpProgress: requests answered 503 while no agent was connected
// are offered again once one is; sending them, oldest first, shows which
// one is on its way, and the end says how many the local process answered
// 2xx and how many not. Each row then shows its new status.
func TestCatchUpProgress(t *testing.T) {
	held := make(chan struct{})
	release := make(chan struct{})
	var holding, releasing sync.Once
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away-2":
			holding.Do(func() { close(held) })
			<-release
		case "/away-3":
			http.Error(w, "still broken", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(local.Close)
	free := func() { releasing.Do(func() { close(release) }) }
	t.Cleanup(free) // before the server closes, should the test end early
	target := strings.TrimPrefix(local.URL, "http://")
	token := signUp(t, "CatchUp")
	id := proxyEndpoint(t, token, "away", target)
	for _, path := range []string{"/away-1", "/away-2", "/away-3"} {
		if status, _ := send(t, id, http.MethodPost, path, nil, []byte(`{}`)); status != http.StatusServiceUnavailable {
			t.Fatalf("%s with no agent: %d, want 503", path, status)
		}
	}

	p := newPage(t, 1280, 800)
	p.openEndpoint(token, id)
	p.waitFor("three rows", `document.querySelectorAll('tr.row').length === 3`)
	if eval[bool](p, `!!document.querySelector('[data-testid=catch-up]')`) {
		t.Error("catch-up offered with no agent to send to")
	}
	srv.StartAgent(t, token, id, target)
	p.waitFor("the catch-up offer", `document.querySelector('[data-testid=catch-up]')?.textContent.startsWith('3 requests were answered 503 while no agent was connected.')`)
	p.click(`[data-testid=catch-up-run]`)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the catch-up did not send /away-2")
	}
	p.waitFor("the progress", `document.querySelector('[data-testid=catch-up-progress]')?.textContent === 'Sending 2 of 3…'`)
	p.waitFor("the first one answered", rowSelector("/away-1")+`?.querySelector('.status').textContent === '200'`)
	free()
	p.waitFor("caught up", `document.querySelector('[data-testid=catch-up-progress]')?.textContent === 'Caught up: 2 answered 2xx, 1 not.'`)
	for path, want := range map[string]string{"/away-2": "200", "/away-3": "500"} {
		p.waitFor(path+" answered "+want, rowSelector(path)+`?.querySelector('.status').textContent === '`+want+`'`)
	}
	// Once caught up, nothing is offered again.
	if eval[bool](p, `!!document.querySelector('[data-testid=catch-up-run]')`) {
		t.Error("the catch-up is still offered after it ran")
	}
}
