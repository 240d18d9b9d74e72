package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/metrics"
)

func TestInstrumentCountsByAreaAndCode(t *testing.T) {
	m := metrics.New()
	m.Positions(func(context.Context) (uint64, error) { return 42, nil }, func() uint64 { return 40 })
	h := m.Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}), func(r *http.Request) string { return "address" })
	for _, p := range []string{"/a", "/b", "/missing"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, p, nil))
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`relay_http_requests_total{area="address",code="204"} 2`,
		`relay_http_requests_total{area="address",code="503"} 1`,
		`relay_http_request_duration_seconds_count{area="address"} 3`,
		`relay_log_position 42`,
		`relay_views_position 40`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestInstrumentLeavesWebSocketsOutOfLatency: an upgraded connection is
// counted as 101, but its lifetime is not a request duration.
func TestInstrumentLeavesWebSocketsOutOfLatency(t *testing.T) {
	m := metrics.New()
	h := m.Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}), func(r *http.Request) string { return "api" })
	srv := httptest.NewServer(h)
	defer srv.Close()
	if res, err := http.Get(srv.URL); err == nil {
		res.Body.Close() // the connection closes without an answer
	}
	srv.Close()
	// Close does not wait for a handler whose connection was hijacked: the
	// count appears once the handler returns.
	var body string
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		body = rec.Body.String()
		if !strings.Contains(body, `relay_http_requests_total{area="api",code="101"} 1`) {
			return fmt.Errorf("the upgraded request is not counted as 101:\n%s", body)
		}
		return nil
	})
	if strings.Contains(body, `relay_http_request_duration_seconds_count{area="api"}`) {
		t.Errorf("the upgraded connection's lifetime was observed as a latency")
	}
}
