package desktop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestStatsPages: the window reads its cards' charts (each Endpoint's
// last hour) for the cards on screen only, in pages of the endpoints
// list, statsPage rows a request, one request at a time, and a relay
// whose --max-query-cost refuses a page is asked for half as many rows:
// 30 Endpoints take ceil(30/9) = 4 requests under the default budget, not
// 30, and each card still gets its own Endpoint's stats. With 60
// Endpoints in a window showing nine or ten cards, the window read all 60
// in 7 requests on its first screen and again on every refresh; now the
// nine on screen in 1, the ten at the bottom in 2 once scrolled there,
// and none of the 41 cards never shown.
func TestStatsPages(t *testing.T) {
	t.Run("the cards on screen", testWindowReadsCardsOnScreen)
	const endpoints = 30
	tests := []struct {
		name  string
		flags []string
		want  int // requests that read stats
	}{
		{"default budget", nil, 4},
		// 9 rows (9 910 points) and 5 (5 506) are refused, then pages of 3.
		{"budget of 5 000", []string{"--max-query-cost", "5000"}, 2 + 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := harness.Start(t, "", tt.flags...)
			// A delivery on the third page shows whose stats a card gets.
			token, ids := signUpWithEndpoints(t, r, "stats", endpoints, func(i int) bool { return i == 20 })
			ui, log := signedInThroughCounter(t, r, token)
			stats := windowStats(t, ui, ids)
			_, reads, _, _ := log.since(0)
			t.Logf("%d Endpoints' stats read with %d requests", endpoints, reads)
			if got := reads; got != tt.want {
				t.Errorf("the window read %d Endpoints' stats with %d requests, want %d", endpoints, got, tt.want)
			}
			for i, id := range ids {
				var st struct {
					BucketSeconds int
					Totals        struct{ Deliveries, Status2xx, Pending int }
					Buckets       []struct{ Deliveries int }
				}
				if err := json.Unmarshal(stats[id], &st); err != nil {
					t.Fatalf("stats of %s: %v (%s)", id, err, stats[id])
				}
				want := 0
				if i == 20 {
					want = 1
				}
				if st.BucketSeconds != 60 || len(st.Buckets) != 60 || st.Totals.Deliveries != want {
					t.Errorf("stats of Endpoint %d: %d buckets of %d s, %d deliveries; want 60 of 60 s, %d", i, len(st.Buckets), st.BucketSeconds, st.Totals.Deliveries, want)
				}
			}
		})
	}
}

// testWindowReadsCardsOnScreen: the window's page (its script in
// Chromium, its bindings answered by the real UI against a real relay)
// asks for the stats of the cards on screen only, nine a request: with 60
// Endpoints in a window showing about ten cards, the first screen, a
// refresh and a scroll to the bottom each read only the cards then on
// screen (before: 7 requests reading all 60 on the first screen and on
// each refresh), and the cards between are never read. Endpoints 3 and
// 58 have a delivery, so a card shows its own Endpoint's figures. The
// refresh is the window's own, every 5 s of the page's clock, which the
// test moves (clockShim): it lists the Endpoints once, and no step lists
// them but the first screen and the refresh.
func testWindowReadsCardsOnScreen(t *testing.T) {
	const endpoints = 60
	r := harness.Start(t, "")
	token, ids := signUpWithEndpoints(t, r, "screen", endpoints, func(i int) bool { return i == 3 || i == 58 })
	ui, log := signedInThroughCounter(t, r, token)
	w := openWindow(t, ui, 1280, 2400)
	w.waitFor("the cards", `document.querySelectorAll('.endpoint-card').length === `+fmt.Sprint(endpoints))

	// onScreen is the ids of the cards in the window's view.
	const onScreen = `[...document.querySelectorAll('.endpoint-card')].filter((c) => {
	  const r = c.getBoundingClientRect();
	  return r.bottom >= 0 && r.top <= window.innerHeight;
	}).map((c) => c.dataset.endpointId)`
	const settled = `window.__ui.pending === 0 && ` + onScreen + `.every((id) => document.querySelector('[data-endpoint-id="' + id + '"] [data-testid=card-stats]'))`
	seen := map[string]bool{} // the cards ever on screen
	steps := []struct {
		name    string
		do      string // in the page, before the step's reads
		refresh bool   // every card on screen is read again
		lists   int    // listings of the Endpoints in the step
		figures int    // the Endpoint whose card must show 1 delivery
	}{
		{name: "the first screen", lists: 1, figures: 3},
		{name: "a refresh", do: `window.__ui.advance(5000)`, refresh: true, lists: 1, figures: 3},
		{name: "scrolled to the bottom", do: `window.scrollTo({ top: document.documentElement.scrollHeight, behavior: 'instant' })`, figures: 58},
	}
	from := 0 // the log's entries of the steps before
	for _, st := range steps {
		if st.do != "" {
			// A refresh asks for the list at once, so settled waits for it.
			_ = windowEval[any](w, st.do+`, 0`)
		}
		w.waitFor("the charts of the cards on screen", settled)
		shown := windowEval[[]string](w, onScreen)
		for _, id := range shown {
			seen[id] = true
		}
		end, reads, lists, read := log.since(from)
		from = end
		t.Logf("%s: %d cards on screen, %d stats requests read %d Endpoints (%d listings of the Endpoints)", st.name, len(shown), reads, len(read), lists)
		if len(shown) >= endpoints/2 {
			t.Fatalf("%d cards on screen: the window shows too many for the test", len(shown))
		}
		if lists != st.lists {
			t.Errorf("%s: the window listed the Endpoints %d times, want %d", st.name, lists, st.lists)
		}
		for _, id := range read {
			if !seen[id] {
				t.Errorf("%s: the window read the stats of Endpoint %d, never on screen", st.name, slices.Index(ids, id))
			}
		}
		// One read of the cards on screen, and one again for each
		// refresh of the list that happened meanwhile.
		if limit := (lists + 1) * ((len(shown) + statsPage - 1) / statsPage); reads > limit {
			t.Errorf("%s: %d stats requests for %d cards on screen, want at most %d", st.name, reads, len(shown), limit)
		}
		if st.refresh && len(read) < len(shown) {
			t.Errorf("%s: re-read %d Endpoints' stats of the %d on screen", st.name, len(read), len(shown))
		}
		caption := windowEval[string](w, `document.querySelector('[data-endpoint-id="`+ids[st.figures]+`"] [data-testid=card-stats-table] td')?.textContent ?? ''`)
		if caption != "1" {
			t.Errorf("%s: the card of Endpoint %d shows %q deliveries, want 1", st.name, st.figures, caption)
		}
	}
	if _, _, _, read := log.since(0); len(read) >= endpoints {
		t.Errorf("the window read all %d Endpoints' stats, the cards never on screen too", len(read))
	}
}

// windowStats reads the stats of the Endpoints ids as the window does:
// the list first, then the stats of cards it names.
func windowStats(t *testing.T, ui *UI, ids []string) map[string]json.RawMessage {
	t.Helper()
	if _, err := ui.Endpoints(); err != nil {
		t.Fatal(err)
	}
	out, err := ui.Stats(ids)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sendWebhook posts a delivery to an Endpoint's public URL.
func sendWebhook(t *testing.T, r *harness.Relay, address string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, address, strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(r.Route(req))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s: %s", address, resp.Status)
	}
}

// relayLog is what a statsCounter saw, in order: the listings of the
// Endpoints (their first pages) and the requests that read stats, with
// the ids of the Endpoints whose stats each answered.
type relayLog struct {
	mu      sync.Mutex
	entries []relayRequest
}

type relayRequest struct {
	stats bool     // reads stats, else begins a listing of the Endpoints
	ids   []string // the Endpoints whose stats it answered
}

// since returns how many entries the log holds and, of those from n on,
// the stats requests, the listings and the distinct ids read.
func (l *relayLog) since(n int) (end, stats, lists int, ids []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.entries[n:] {
		if !e.stats {
			lists++
			continue
		}
		stats++
		for _, id := range e.ids {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return len(l.entries), stats, lists, ids
}

type statsKey struct{}

// statsCounter is a proxy on 127.0.0.1 in front of the relay that logs
// the listings of the Endpoints and the GraphQL requests reading stats,
// with the Endpoints each of those answered; its URL is where the window
// signs in.
func statsCounter(t *testing.T, r *harness.Relay) (string, *relayLog) {
	t.Helper()
	target, err := url.Parse(r.BareURL())
	if err != nil {
		t.Fatal(err)
	}
	target.Host = "127.0.0.1:" + target.Port()
	log := &relayLog{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = r.Domain() + ":" + target.Port()
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Context().Value(statsKey{}) == nil {
				return nil
			}
			body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			resp.Body.Close()
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			var out struct {
				Data struct{ Endpoints []struct{ ID string } }
			}
			_ = json.Unmarshal(body, &out) // a refusal answers no rows
			e := relayRequest{stats: true}
			for _, ep := range out.Data.Endpoints {
				e.ids = append(e.ids, ep.ID)
			}
			log.mu.Lock()
			log.entries = append(log.entries, e)
			log.mu.Unlock()
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && req.URL.Path == "/graphql" {
			body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			switch {
			case bytes.Contains(body, []byte("stats(")):
				req = req.WithContext(context.WithValue(req.Context(), statsKey{}, true))
				req.Header.Del("Accept-Encoding") // the answer is read here
			case bytes.Contains(body, []byte("endpoints(")) && !bytes.Contains(body, []byte(`"after"`)):
				// The first page of a listing: one a refresh.
				log.mu.Lock()
				log.entries = append(log.entries, relayRequest{})
				log.mu.Unlock()
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
		}
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, log
}

// TestStatsRuns: UI.Stats reads the ids the window names as runs of
// neighbours in the list, each from the Endpoint listed before it, and
// leaves out an id the list does not hold.
func TestStatsRuns(t *testing.T) {
	listed := []string{"a", "b", "c", "d", "e", "f"}
	tests := []struct {
		name string
		ids  []string
		want []statsRun
	}{
		{"the list's start", []string{"a", "b"}, []statsRun{{"", []string{"a", "b"}}}},
		{"the middle", []string{"d", "c"}, []statsRun{{"b", []string{"c", "d"}}}},
		{"two runs", []string{"a", "e", "f"}, []statsRun{{"", []string{"a"}}, {"d", []string{"e", "f"}}}},
		{"an Endpoint not listed", []string{"x", "f"}, []statsRun{{"e", []string{"f"}}}},
		{"none", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := statsRuns(listed, tt.ids); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("statsRuns(%v) = %v, want %v", tt.ids, got, tt.want)
			}
		})
	}
}

// signUpWithEndpoints signs up an account named name on r and creates n
// LOG Endpoints ep00, ep01, … in it, sending one webhook to each Endpoint i
// for which delivered(i) holds and waiting until its stats count it; it
// returns the account's token and the
// Endpoints' ids in the order created.
func signUpWithEndpoints(t *testing.T, r *harness.Relay, name string, n int, delivered func(i int) bool) (string, []string) {
	t.Helper()
	var out struct {
		SignUp struct{ Token string }
	}
	r.MustGraphQL(t, "", `mutation($n: String!){ signUp(name: $n){ token } }`, map[string]any{"n": name}, &out)
	token := out.SignUp.Token
	ids := make([]string, 0, n)
	for i := range n {
		var created struct{ CreateEndpoint struct{ ID, URL string } }
		r.MustGraphQL(t, token, `mutation($n: String!){ createEndpoint(input: {name: $n, mode: LOG}){ id url } }`,
			map[string]any{"n": fmt.Sprintf("ep%02d", i)}, &created)
		ids = append(ids, created.CreateEndpoint.ID)
		if delivered(i) {
			sendWebhook(t, r, created.CreateEndpoint.URL)
			harness.Eventually(t, 15*time.Second, "the delivery in the stats", func() bool {
				var got struct {
					Endpoint struct {
						Stats struct{ Totals struct{ Deliveries int } }
					}
				}
				r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ stats(range: HOUR){ totals{ deliveries } } } }`,
					map[string]any{"id": created.CreateEndpoint.ID}, &got)
				return got.Endpoint.Stats.Totals.Deliveries == 1
			})
		}
	}
	return token, ids
}

// signedInThroughCounter starts the desktop app signed in to r with token
// through statsCounter's proxy, and returns its bindings and the proxy's
// log of the stats requests.
func signedInThroughCounter(t *testing.T, r *harness.Relay, token string) (*UI, *relayLog) {
	t.Helper()
	proxy, log := statsCounter(t, r)
	app := New(Options{Store: Store{Config: LoginFile{path: filepath.Join(t.TempDir(), "config.json")}}})
	app.Start(t.Context(), &recorder{})
	t.Cleanup(app.Shutdown)
	ui := app.Bindings()
	if _, err := ui.SignIn(proxy, token); err != nil {
		t.Fatal(err)
	}
	return ui, log
}
