package ingress

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/relayhq/relay/domain"
)

// TestWriteOutcomeHeadersUnchanged: the local answer's headers reach the
// sender as the local process sent them: net/http adds neither a Date nor
// a sniffed Content-Type that were not there, and keeps those that were.
func TestWriteOutcomeHeadersUnchanged(t *testing.T) {
	for _, tt := range []struct {
		name    string
		headers []domain.Header
	}{
		{"no Date, no Content-Type", nil},
		{"a Date of its own", []domain.Header{{Name: "Date", Value: "Mon, 01 Jan 2001 00:00:00 GMT"}, {Name: "Content-Type", Value: "text/x-odd"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				writeOutcome(w, r.Method, domain.ForwardOutcome{Status: 200, Headers: tt.headers, Body: []byte("<html>ok</html>")})
			}))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := map[string]string{}
			for _, h := range tt.headers {
				want[h.Name] = h.Value
			}
			for _, name := range []string{"Date", "Content-Type"} {
				got, sent := resp.Header.Get(name), want[name]
				if got != sent {
					t.Errorf("%s: %q reached the sender, the local process sent %q", name, got, sent)
				}
			}
		})
	}
}
