package deliveries

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/relayhq/relay/apiclient"
)

// TestRedriveDeadCallsWhileFull: the relay puts back at most 1 000 dead
// deliveries per call; the command calls again while a call was full and
// stops at the first that was not, adding up what came back.
func TestRedriveDeadCallsWhileFull(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []int
		calls   int
		total   int
	}{
		{"none", []int{0}, 1, 0},
		{"one call", []int{3}, 1, 3},
		{"full then the rest", []int{1000, 1000, 7}, 3, 2007},
		{"full then none", []int{1000, 0}, 2, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				var req struct{ Query string }
				if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
					t.Error(err)
				}
				if strings.Contains(req.Query, "redriveDead") {
					n := tc.answers[min(calls, len(tc.answers)-1)]
					calls++
					fmt.Fprintf(w, `{"data":{"redriveDead":%d}}`, n)
					return
				}
				fmt.Fprint(w, `{"data":{"endpoints":[{"id":"ep1","name":"orders","url":"http://x/","mode":"QUEUE"}]}}`)
			}))
			defer srv.Close()
			var out bytes.Buffer
			if err := redriveDead(context.Background(), apiclient.New(srv.URL, "t"), "orders", &out); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%d dead deliveries of orders back in its queue\n", tc.total)
			if calls != tc.calls || out.String() != want {
				t.Fatalf("%d calls printing %q, want %d calls printing %q", calls, out.String(), tc.calls, want)
			}
		})
	}
}
