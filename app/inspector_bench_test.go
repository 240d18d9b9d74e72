package app_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/commands"
)

// BenchmarkInspectorDelivery is one delivery to a guest inspector through
// the whole relay in one process (BodyProgress, the metrics, ingress, the
// recorder, the embedded log and its views): a sender's POST of 1 KiB of
// JSON with a signed webhook's headers, answered 204 once durable. Run with
// -benchmem: allocations per op are the figure a shared machine does not
// move. They include the sender's own and the views' (as
// BenchmarkProxiedDelivery's do), so compare two versions of the relay,
// not with zero.
//
//	go test -run '^$' -bench InspectorDelivery -benchmem -benchtime 5000x ./app
func BenchmarkInspectorDelivery(b *testing.B) {
	a, err := app.New(b.Context(), app.Config{
		Data:           b.TempDir(),
		RetentionSweep: time.Hour, InspectorRetention: time.Hour,
		Commands:  commands.Config{SignupOpen: true, InspectorTTL: 24 * time.Hour},
		PublicURL: func(id string) string { return "http://" + id + ".localhost/" },
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	srv := httptest.NewServer(a.Handler())
	b.Cleanup(srv.Close)

	var out struct{ CreateInspector struct{ ID string } }
	gql(b, srv.URL, "", `mutation{ createInspector{ id } }`, nil, &out)
	id := out.CreateInspector.ID

	body := []byte(`{"type":"payment_intent.succeeded","data":{"pad":"`)
	body = append(body, bytes.Repeat([]byte("x"), 1024-len(body)-3)...)
	body = append(body, `"}}`...)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	send := func() {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/stripe", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Host = id + ".localhost"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", "t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusNoContent || len(got) != 0 {
			b.Fatalf("sender got %d %q (%v), want 204", resp.StatusCode, got, err)
		}
	}
	for range 200 { // warm-up: connections, the views' statements
		send()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		send()
	}
}
