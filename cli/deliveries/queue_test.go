package deliveries

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/apiclient"
)

// fakeQueueRelay answers the endpoints query with one QUEUE Endpoint,
// "orders" (then an empty page after it), and each redriveDeadPage call with page(the call's "after"
// variable), the JSON of its result (or of a whole answer with errors).
func fakeQueueRelay(t *testing.T, page func(after any) string) *apiclient.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var req struct {
			Query     string
			Variables map[string]any
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		if strings.Contains(req.Query, "redriveDeadPage") {
			res := page(req.Variables["after"])
			if strings.HasPrefix(res, `{"errors"`) {
				fmt.Fprint(w, res) // a refusal, whole
				return
			}
			fmt.Fprintf(w, `{"data":{"redriveDeadPage":%s}}`, res)
			return
		}
		if req.Variables["after"] != nil { // the page after "orders": the end of the list
			fmt.Fprint(w, `{"data":{"endpoints":[]}}`)
			return
		}
		fmt.Fprint(w, `{"data":{"endpoints":[{"id":"ep1","name":"orders","url":"http://x/","mode":"QUEUE"}]}}`)
	}))
	t.Cleanup(srv.Close)
	return apiclient.New(srv.URL, "t")
}

// TestRedriveDeadGoesPageByPage: the command puts back page after page,
// each call going on after the cursor the one before returned, until a
// page says there is no more, and prints the total.
func TestRedriveDeadGoesPageByPage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pages []int // what each call puts back; a full page (1000) means more may follow
	}{
		{"none", []int{0}},
		{"some", []int{3}},
		{"exactly one page", []int{1000, 0}},
		{"three pages", []int{1000, 1000, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var afters []any
			client := fakeQueueRelay(t, func(after any) string {
				i := len(afters)
				afters = append(afters, after)
				if i >= len(tc.pages) {
					t.Errorf("call %d after the last page", i+1)
					return `{"redriven":0,"endCursor":"0","hasNextPage":false}`
				}
				return fmt.Sprintf(`{"redriven":%d,"endCursor":"c%d","hasNextPage":%v}`, tc.pages[i], i+1, tc.pages[i] == redrivePerCall)
			})
			var out bytes.Buffer
			if err := redriveDead(context.Background(), client, "orders", &out); err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, n := range tc.pages {
				total += n
			}
			if want := fmt.Sprintf("%d dead deliveries of orders back in its queue\n", total); out.String() != want {
				t.Fatalf("printed %q, want %q", out.String(), want)
			}
			if len(afters) != len(tc.pages) {
				t.Fatalf("%d calls, want %d", len(afters), len(tc.pages))
			}
			for i, a := range afters {
				want := any(nil)
				if i > 0 {
					want = fmt.Sprintf("c%d", i)
				}
				if a != want {
					t.Fatalf("call %d went on after %v, want %v", i+1, a, want)
				}
			}
		})
	}
}

// TestRedriveDeadSaysWhenItStops: a run that reaches its page bound while
// the relay still says there is more says so rather than end as if done.
func TestRedriveDeadSaysWhenItStops(t *testing.T) {
	calls := 0
	client := fakeQueueRelay(t, func(any) string {
		calls++
		return fmt.Sprintf(`{"redriven":1,"endCursor":"c%d","hasNextPage":true}`, calls)
	})
	var out bytes.Buffer
	if err := redriveDead(context.Background(), client, "orders", &out); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d dead deliveries of orders back in its queue\nmore may be dead: run it again to go on\n", maxRedrivePages)
	if calls != maxRedrivePages || out.String() != want {
		t.Fatalf("%d calls, printed %q; want %d calls and %q", calls, out.String(), maxRedrivePages, want)
	}
}

// TestRedriveDeadSaysWhatItLeftDead: deliveries a page left dead (each has
// had the most attempts one delivery may have) are added up over the pages
// and said after the total.
func TestRedriveDeadSaysWhatItLeftDead(t *testing.T) {
	pages := []string{
		`{"redriven":998,"leftDead":2,"endCursor":"c1","hasNextPage":true}`,
		`{"redriven":4,"leftDead":1,"endCursor":"c2","hasNextPage":false}`,
	}
	calls := 0
	client := fakeQueueRelay(t, func(any) string {
		calls++
		return pages[min(calls, len(pages))-1]
	})
	var out bytes.Buffer
	if err := redriveDead(context.Background(), client, "orders", &out); err != nil {
		t.Fatal(err)
	}
	want := "1002 dead deliveries of orders back in its queue\n3 left dead: each has had 200 attempts or 100 redrives, the most one delivery may have\n"
	if calls != 2 || out.String() != want {
		t.Fatalf("%d calls, printed %q; want 2 calls and %q", calls, out.String(), want)
	}
}

// TestRedriveDeadWaitsWhenRateLimited: the relay admits an account's
// redrives at its bulk rate; a page refused RATE_LIMITED is asked again,
// from the same cursor, after the retryAfterSeconds the relay gave.
func TestRedriveDeadWaitsWhenRateLimited(t *testing.T) {
	var waits []time.Duration
	saved := waitFor
	waitFor = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	t.Cleanup(func() { waitFor = saved })
	var afters []any
	client := fakeQueueRelay(t, func(after any) string {
		afters = append(afters, after)
		switch len(afters) {
		case 1:
			return `{"redriven":1000,"endCursor":"c1","hasNextPage":true}`
		case 2:
			return `{"errors":[{"message":"this account made bulk changes as fast as it may","extensions":{"code":"RATE_LIMITED","retryAfterSeconds":7}}]}`
		}
		return `{"redriven":5,"endCursor":"c2","hasNextPage":false}`
	})
	var out bytes.Buffer
	if err := redriveDead(context.Background(), client, "orders", &out); err != nil {
		t.Fatal(err)
	}
	want := "1000 back so far; the relay admits redrives at its rate: going on in 7s\n1005 dead deliveries of orders back in its queue\n"
	if out.String() != want || !reflect.DeepEqual(waits, []time.Duration{7 * time.Second}) || !reflect.DeepEqual(afters, []any{nil, "c1", "c1"}) {
		t.Fatalf("printed %q, waited %v, calls after %v; want %q, [7s], [<nil> c1 c1]", out.String(), waits, afters, want)
	}
}
