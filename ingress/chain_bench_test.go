package ingress

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/connguard"
	"github.com/relayhq/relay/metrics"
	"github.com/relayhq/relay/record"
)

// instantStore is a log that keeps nothing and answers every append at
// once: what the request path spends on a delivery, without the log.
type instantStore struct {
	domain.EventStore // every other method: not called
}

func (instantStore) Append(context.Context, string, domain.ExpectedRevision, ...domain.EventData) (domain.AppendResult, error) {
	return domain.AppendResult{NextRevision: 0, Position: 1}, nil
}

func (instantStore) Accepting() error { return nil }

func (s instantStore) QueueAppend(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (func() (domain.AppendResult, error), error) {
	return func() (domain.AppendResult, error) { return s.Append(ctx, stream, expected, events...) }, nil
}

// deadlineRecorder is an httptest.ResponseRecorder whose connection takes
// read deadlines, as net/http's does, so BodyProgress wraps the body.
type deadlineRecorder struct{ *httptest.ResponseRecorder }

func (deadlineRecorder) SetReadDeadline(time.Time) error { return nil }

// BenchmarkInspectorChain is one delivery to a guest inspector through the
// relay's request path as app mounts it (BodyProgress, the metrics,
// ingress, the recorder and the domain's encoding), in one goroutine over
// a log that answers at once: the CPU and the allocations of the path
// alone, without net/http's connection, the log's writer or the views.
// A signed webhook's headers and 1 KiB of JSON; the request and its
// recorder are made outside the measured path's own work but counted.
//
//	go test -run '^$' -bench InspectorChain -benchmem ./ingress
func BenchmarkInspectorChain(b *testing.B) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	routes := &routeMap{routes: map[string]Route{}}
	routes.set(Route{ID: "abcdefghijklmnop", Kind: domain.AddressInspector, LastActivityAt: now, ExpiresAt: now.Add(time.Hour)})
	srv := New(Config{Domain: "localhost"}, Deps{
		Recorder: record.New(record.Config{Store: instantStore{}, Now: func() time.Time { return now }}),
		Resolver: routes,
	})
	m := metrics.New()
	h := connguard.BodyProgress(time.Minute, m.Instrument(srv.Handler(), func(*http.Request) string { return "address" }))

	body := []byte(`{"type":"payment_intent.succeeded","data":{"pad":"`)
	body = append(body, bytes.Repeat([]byte("x"), 1024-len(body)-3)...)
	body = append(body, `"}}`...)
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "http://abcdefghijklmnop.localhost/webhooks/stripe", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Stripe-Signature", "t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd")
		w := httptest.NewRecorder()
		h.ServeHTTP(deadlineRecorder{w}, r)
		if w.Code != http.StatusNoContent {
			b.Fatalf("answered %d %q, want 204", w.Code, w.Body)
		}
	}
}
