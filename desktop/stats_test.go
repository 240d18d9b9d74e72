package desktop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestStatsPages: the window reads its cards' charts (each Endpoint's
// last hour) in pages of the endpoints list, statsPage rows a request,
// one request at a time, and a relay whose --max-query-cost refuses a
// page is asked for half as many rows: 30 Endpoints take ceil(30/9) = 4
// requests under the default budget, not 30, and each card still gets its
// own Endpoint's stats.
func TestStatsPages(t *testing.T) {
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
			var out struct {
				SignUp struct{ Token string }
			}
			r.MustGraphQL(t, "", `mutation{ signUp(name: "stats"){ token } }`, nil, &out)
			token := out.SignUp.Token
			var ids []string
			for i := range endpoints {
				var created struct{ CreateEndpoint struct{ ID, URL string } }
				r.MustGraphQL(t, token, `mutation($n: String!){ createEndpoint(input: {name: $n, mode: LOG}){ id url } }`,
					map[string]any{"n": fmt.Sprintf("ep%02d", i)}, &created)
				ids = append(ids, created.CreateEndpoint.ID)
				if i == 20 { // a delivery on the third page shows whose stats a card gets
					sendWebhook(t, r, created.CreateEndpoint.URL)
				}
			}
			harness.Eventually(t, 15*time.Second, "the delivery in the stats", func() bool {
				var got struct {
					Endpoint struct {
						Stats struct{ Totals struct{ Deliveries int } }
					}
				}
				r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ stats(range: HOUR){ totals{ deliveries } } } }`,
					map[string]any{"id": ids[20]}, &got)
				return got.Endpoint.Stats.Totals.Deliveries == 1
			})

			proxy, reads := statsCounter(t, r)
			app := New(Options{Store: Store{Config: LoginFile{path: filepath.Join(t.TempDir(), "config.json")}}})
			app.Start(t.Context(), &recorder{})
			t.Cleanup(app.Shutdown)
			ui := app.Bindings()
			if _, err := ui.SignIn(proxy, token); err != nil {
				t.Fatal(err)
			}
			stats := windowStats(t, ui, ids)
			t.Logf("%d Endpoints' stats read with %d requests", endpoints, reads.Load())
			if got := int(reads.Load()); got != tt.want {
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

// windowStats reads the stats of the Endpoints ids as the window's
// loadStats does.
func windowStats(t *testing.T, ui *UI, ids []string) map[string]json.RawMessage {
	t.Helper()
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

// statsCounter is a proxy on 127.0.0.1 in front of the relay that counts
// the GraphQL requests reading stats; its URL is where the window signs in.
func statsCounter(t *testing.T, r *harness.Relay) (string, *atomic.Int64) {
	t.Helper()
	target, err := url.Parse(r.BareURL())
	if err != nil {
		t.Fatal(err)
	}
	target.Host = "127.0.0.1:" + target.Port()
	reads := &atomic.Int64{}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = r.Domain() + ":" + target.Port()
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && req.URL.Path == "/graphql" {
			body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if bytes.Contains(body, []byte("stats(")) {
				reads.Add(1)
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
		}
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, reads
}
