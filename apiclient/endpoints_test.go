package apiclient

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// endpointsList is a relay's endpoints list as EndpointsIn pages it: the
// ids held, the most rows it answers (cap, 0: first), the most rows its
// cost budget passes (budget, 0: any) and a page it fails (fail, 0: none).
type endpointsList struct {
	ids                []string
	cap, budget, fail  int
	requests, refusals int
}

func (l *endpointsList) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Variables struct {
			First int
			After string
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	l.requests++
	w.Header().Set("Content-Type", "application/json")
	first := req.Variables.First
	if l.budget > 0 && first > l.budget {
		l.refusals++
		fmt.Fprint(w, `{"errors":[{"message":"query too complex","extensions":{"code":"QUERY_TOO_COMPLEX"}}]}`)
		return
	}
	if l.requests == l.fail {
		fmt.Fprint(w, `{"errors":[{"message":"unavailable","extensions":{"code":"UNAVAILABLE"}}]}`)
		return
	}
	if l.cap > 0 {
		first = min(first, l.cap)
	}
	start := 0
	if req.Variables.After != "" {
		start = slices.Index(l.ids, req.Variables.After) + 1
	}
	rows := []map[string]string{}
	for _, id := range l.ids[start:min(start+first, len(l.ids))] {
		rows = append(rows, map[string]string{"id": id})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"endpoints": rows}})
}

func ids(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("e%02d", i))
	}
	return out
}

// TestEndpointsInPages: EndpointsIn reads len(ids) rows in
// ceil(len(ids)/page) requests, halves its page after QUERY_TOO_COMPLEX,
// follows a relay that answers fewer rows than asked, and ends, with what
// it read, when the list no longer holds what ids names. A run from the
// middle of the list (the desktop's cards on screen) is read from the
// Endpoint before it: ten of sixty, after the fiftieth, read the list's
// first nine instead (one request, none of the ten); now the ten in two.
func TestEndpointsInPages(t *testing.T) {
	tests := []struct {
		name         string
		list         endpointsList
		after        string   // the Endpoint listed before run
		run          []string // the ids asked for; nil: ids(0, 30)
		wantRows     int
		wantRequests int
		wantErr      bool
	}{
		{"whole pages", endpointsList{ids: ids(0, 30)}, "", nil, 30, 4, false},
		{"a relay that answers four rows at most", endpointsList{ids: ids(0, 30), cap: 4}, "", nil, 30, 8, false},
		// 9 and 5 are refused, then ten pages of 3.
		{"a budget of three rows", endpointsList{ids: ids(0, 30), budget: 3}, "", nil, 30, 12, false},
		{"an Endpoint deleted since", endpointsList{ids: slices.Delete(ids(0, 30), 5, 6)}, "", nil, 29, 4, false},
		// 9, 9, then 7 of 9 and an empty page after the last.
		{"the list ends early", endpointsList{ids: ids(0, 25)}, "", nil, 25, 4, false},
		{"the third page fails", endpointsList{ids: ids(0, 30), fail: 3}, "", nil, 18, 3, true},
		{"a run from the middle", endpointsList{ids: ids(0, 60)}, "e49", ids(50, 60), 10, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(&tt.list)
			t.Cleanup(srv.Close)
			type row struct {
				ID string `json:"id"`
			}
			run := tt.run
			if run == nil {
				run = ids(0, 30)
			}
			rows, err := EndpointsIn(t.Context(), New(srv.URL, ""), "id", tt.after, run, 9, func(r row) string { return r.ID })
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, want an error: %v", err, tt.wantErr)
			}
			if len(rows) != tt.wantRows || tt.list.requests != tt.wantRequests {
				t.Errorf("%d rows in %d requests, want %d in %d", len(rows), tt.list.requests, tt.wantRows, tt.wantRequests)
			}
			seen := map[string]bool{}
			for _, r := range rows {
				if seen[r.ID] || !slices.Contains(tt.list.ids, r.ID) || !slices.Contains(run, r.ID) {
					t.Errorf("row %s read twice, not in the list or not asked for", r.ID)
				}
				seen[r.ID] = true
			}
		})
	}
}
