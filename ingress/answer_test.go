package ingress

import (
	"net/http"
	"net/http/httptest"
	"slices"
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

// TestWriteOutcomeHeaderValues: the answer's fields reach the sender as
// http.Header.Add would set them from the end-to-end fields (repeats in
// order, names canonical, hop-by-hop and Connection-named fields dropped,
// more fields than fit on the stack), though their values share one array,
// and Content-Length is the body's.
func TestWriteOutcomeHeaderValues(t *testing.T) {
	many := make([]domain.Header, 0, 40)
	for i := range 40 {
		many = append(many, domain.Header{Name: "x-field-" + string(rune('a'+i%26)), Value: string(rune('A' + i%26))})
	}
	for name, headers := range map[string][]domain.Header{
		"none": nil,
		"repeats and hop-by-hop": {
			{Name: "set-cookie", Value: "a=1"}, {Name: "Connection", Value: "X-Drop, keep-alive"}, {Name: "X-Drop", Value: "x"},
			{Name: "Set-Cookie", Value: "b=2"}, {Name: "Keep-Alive", Value: "timeout=5"}, {Name: "Content-Length", Value: "999"},
			{Name: "Transfer-Encoding", Value: "chunked"}, {Name: "X-Empty", Value: ""}, {Name: "content-type", Value: "text/plain"},
			{Name: "SET-COOKIE", Value: "c=3"},
		},
		"more than 32": many,
	} {
		t.Run(name, func(t *testing.T) {
			body := []byte("answer")
			want := http.Header{"Date": nil, "Content-Type": nil}
			for _, h := range domain.StripHopByHop(headers) {
				want.Add(h.Name, h.Value)
			}
			want.Set("Content-Length", "6")
			rec := httptest.NewRecorder()
			writeOutcome(rec, http.MethodPost, domain.ForwardOutcome{Status: 200, Headers: headers, Body: body})
			got := rec.Header()
			if len(got) != len(want) {
				t.Fatalf("header %v, want %v", got, want)
			}
			for k, vs := range want {
				if g, ok := got[k]; !ok || !slices.Equal(g, vs) {
					t.Errorf("%s: %q, want %q", k, g, vs)
				}
			}
		})
	}
}
