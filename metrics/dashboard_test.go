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

	"github.com/relayhq/relay/metrics"
)

// TestGrafanaDashboardQueriesExposedMetrics: deploy/grafana's dashboard is
// valid JSON, and every metric its queries name is one the relay exposes.
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
	h := m.Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(*http.Request) string { return "address" })
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	exposed := string(body)
	name := regexp.MustCompile(`\b(relay_[a-z_]+|process_[a-z_]+|go_[a-z_]+)\b`)
	seen := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, n := range name.FindAllString(q.Expr, -1) {
				seen++
				if !strings.Contains(exposed, "\n"+n) && !strings.HasPrefix(exposed, n) {
					t.Errorf("panel %q queries %s, which the relay does not expose", p.Title, n)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no metric found in the dashboard's queries")
	}
}
