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

// benchRelay starts the relay on embedded defaults in a temporary data
// folder, logging nothing, behind a test server, and returns its URL.
func benchRelay(b *testing.B) string {
	b.Helper()
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
	return srv.URL
}

// webhookSender returns a sender of a signed webhook (a POST of 1 KiB of
// JSON with Stripe's headers) to the public address id through the relay
// at base, which fails the benchmark unless the answer is status with
// body.
func webhookSender(b *testing.B, base, id string, status int, body []byte) func() {
	b.Helper()
	payload := []byte(`{"type":"payment_intent.succeeded","data":{"pad":"`)
	payload = append(payload, bytes.Repeat([]byte("x"), 1024-len(payload)-3)...)
	payload = append(payload, `"}}`...)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	return func() {
		req, err := http.NewRequest(http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(payload))
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
		if err != nil || resp.StatusCode != status || !bytes.Equal(got, body) {
			b.Fatalf("sender got %d %q (%v), want %d %q", resp.StatusCode, got, err, status, body)
		}
	}
}
