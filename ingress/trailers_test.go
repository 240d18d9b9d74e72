package ingress

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStoredTrailersAreCapped: a delivery stores at most MaxHeaders header
// and trailer fields together, and MaxHeaderBytes of their names and
// values, the headers first; the fields left out are counted in
// DroppedHeaders. A chunked body's trailer of 4 KiB (net/http reads no
// more) holds 1 020 fields: all of them were stored, where a request's
// headers past 200 were not.
func TestStoredTrailersAreCapped(t *testing.T) {
	e := newEnv(t, Config{})
	e.addInspector("insp1", time.Hour)
	send := func(t *testing.T, headers, trailers int) {
		t.Helper()
		raw := "POST /t HTTP/1.1\r\nHost: insp1.localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n" +
			strings.Repeat("H: v\r\n", headers) + "\r\n3\r\nabc\r\n0\r\n" + strings.Repeat("A:\r\n", trailers) + "\r\n"
		if resp, body := e.raw(raw); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("answer %d %q, want 204", resp.StatusCode, body)
		}
	}
	// The raw request's own Transfer-Encoding and Connection are stored
	// too, before the headers it repeats.
	const maxHeaders, own = DefaultMaxHeaders, 2
	for _, tc := range []struct {
		name                                   string
		headers, trailers                      int
		wantHeaders, wantTrailers, wantDropped int
	}{
		{"a few of each", 3, 5, own + 3, 5, 0},
		{"1 020 trailer fields", 0, 1020, own, maxHeaders - own, 1020 - (maxHeaders - own)},
		{"headers leave room for a few", 195, 1020, own + 195, maxHeaders - own - 195, 1020 - (maxHeaders - own - 195)},
		{"headers over the bound", 250, 10, maxHeaders, 0, own + 250 - maxHeaders + 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send(t, tc.headers, tc.trailers)
			got, _ := e.lastDelivery()
			t.Logf("%d headers and %d trailer fields sent: %d and %d stored, %d dropped", own+tc.headers, tc.trailers, len(got.Headers), len(got.Trailers), got.DroppedHeaders)
			if len(got.Headers) != tc.wantHeaders || len(got.Trailers) != tc.wantTrailers || got.DroppedHeaders != tc.wantDropped {
				t.Fatalf("stored %d headers and %d trailer fields, %d dropped; want %d, %d and %d",
					len(got.Headers), len(got.Trailers), got.DroppedHeaders, tc.wantHeaders, tc.wantTrailers, tc.wantDropped)
			}
		})
	}
}
