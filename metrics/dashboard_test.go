package metrics_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/metrics"
)

// TestGrafanaDashboardQueriesExposedMetrics: deploy/grafana's dashboard is
// valid JSON, every metric its queries name is one the relay exposes, and
// it shows the disk reserve's metrics: the operator's first look when
// sign-ups are refused INSUFFICIENT_STORAGE.
func TestGrafanaDashboardQueriesExposedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../deploy/grafana/relay-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	m := metrics.New()
	m.Positions(func(context.Context) (uint64, error) { return 1, nil }, func() uint64 { return 1 })
	m.ViewsFailing(func() bool { return false })
	m.ConnectionRefused()
	m.DiskReserve(func() diskreserve.State { return diskreserve.State{Free: 3 << 30, Reserve: 1 << 30} },
		func() map[string]int64 { return map[string]int64{} })
	h := m.Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(*http.Request) string { return "address" })
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	exposed := string(body)
	name := regexp.MustCompile(`\b(relay_[a-z_]+|process_[a-z_]+|go_[a-z_]+)\b`)
	seen := 0
	queried := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, n := range name.FindAllString(q.Expr, -1) {
				seen++
				queried[n] = true
				if !strings.Contains(exposed, "\n"+n) && !strings.HasPrefix(exposed, n) {
					t.Errorf("panel %q queries %s, which the relay does not expose", p.Title, n)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no metric found in the dashboard's queries")
	}
	for _, n := range []string{"relay_disk_free_bytes", "relay_disk_reserve_bytes", "relay_disk_reserve_level", "relay_disk_reserve_refusals_total"} {
		if !queried[n] {
			t.Errorf("no panel queries %s", n)
		}
	}
}
