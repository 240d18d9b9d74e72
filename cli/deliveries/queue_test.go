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

// TestRedriveDeadSaysWhenBounded: one call puts back at most 1 000 dead
// deliveries; a full answer tells the user to run it again, and the
// command calls once (a second call could put back again what died again).
func TestRedriveDeadSaysWhenBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer int
		again  bool
	}{
		{"none", 0, false},
		{"some", 3, false},
		{"the bound", 1000, true},
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
					calls++
					fmt.Fprintf(w, `{"data":{"redriveDead":%d}}`, tc.answer)
					return
				}
				fmt.Fprint(w, `{"data":{"endpoints":[{"id":"ep1","name":"orders","url":"http://x/","mode":"QUEUE"}]}}`)
			}))
			defer srv.Close()
			var out bytes.Buffer
			if err := redriveDead(context.Background(), apiclient.New(srv.URL, "t"), "orders", &out); err != nil {
				t.Fatal(err)
			}
			first := fmt.Sprintf("%d dead deliveries of orders back in its queue\n", tc.answer)
			if calls != 1 || !strings.HasPrefix(out.String(), first) || strings.Contains(out.String(), "run it again") != tc.again {
				t.Fatalf("%d calls printing %q, want one call printing %q (run it again: %v)", calls, out.String(), first, tc.again)
			}
		})
	}
}
