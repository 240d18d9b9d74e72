package systemtest

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestDeliveriesDiff: relay deliveries diff compares what two attempts
// sent (an edited retry against the original) and got back (status,
// headers, JSON bodies field by field), through the real agent.
func TestDeliveriesDiff(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	var calls atomic.Int64
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.ReadAll(req.Body)
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			w.Header().Set("X-Failure", "boom")
			w.WriteHeader(500)
			_, _ = io.WriteString(w, `{"error":"no such customer","ok":false}`)
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	_, port, _ := strings.Cut(target, ":")
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "shop", "mode": "PROXY", "target": "localhost:" + port, "responseCapture": true})
	listen := h.startIn(t, t.TempDir(), "listen", port, "shop")
	waitOutput(t, listen, regexp.MustCompile(`(?m)^endpoint shop `))
	waitAgent(t, r, acct.Token, ep.ID, true)
	if resp := send(t, r, ep.ID, "POST", "/hook", [][2]string{{"Content-Type", "application/json"}}, []byte(`{"type":"charge.failed","customer":"cus_1"}`)); resp.Status != 500 {
		t.Fatalf("sender got %d, want the local 500", resp.Status)
	}
	id := waitOutput(t, listen, regexp.MustCompile(`delivery (\S+)`))[1]
	if out, code := h.run(t, "", "retry", id, "--body", `{"type":"charge.failed","customer":"cus_2"}`); code != 0 {
		t.Fatalf("retry: exit %d\n%s", code, out)
	}

	out, code := h.run(t, "", "deliveries", "diff", id)
	for _, want := range []string{
		"comparing attempt 1 (500",
		"with attempt 2 (200",
		`body $.customer: "cus_1" → "cus_2"`,
		"header Content-Length: 43 → 43", // not listed: the same length
		"status: 500 → 200",
		"header X-Failure: boom → (none)",
		`body $.error: "no such customer" → (none)`,
		"body $.ok: false → true",
	} {
		has := strings.Contains(out, want)
		if want == "header Content-Length: 43 → 43" {
			has = !has
		}
		if code != 0 || !has {
			t.Errorf("diff: exit %d, want %q (or its absence for Content-Length):\n%s", code, want, out)
		}
	}
	out, code = h.run(t, "", "deliveries", "diff", id, "original", "2", "-o", "json")
	var d struct {
		Request  []struct{ Where string }
		Response []struct{ Where string }
		Note     string
	}
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil || len(d.Request) != 1 || d.Request[0].Where != "body $.customer" || len(d.Response) != 0 || d.Note == "" {
		t.Errorf("diff original 2 -o json: exit %d, %v\n%s", code, err, out)
	}
	// The comparison is the API's: sides by attempt id too; an unknown
	// side is refused as invalid input.
	var ids struct {
		Delivery struct{ Attempts []struct{ ID string } }
	}
	r.MustGraphQL(t, acct.Token, `query($id: ID!){ delivery(id: $id){ attempts{ id } } }`, map[string]any{"id": id}, &ids)
	var byID struct {
		Delivery struct {
			Compare struct {
				Request          []struct{ Where string }
				ResponseCompared bool
			}
		}
	}
	const qc = `query($id: ID!, $a: String!, $b: String!){ delivery(id: $id){ compare(a: $a, b: $b){ request{ where } responseCompared } } }`
	if at := ids.Delivery.Attempts; len(at) == 2 {
		r.MustGraphQL(t, acct.Token, qc, map[string]any{"id": id, "a": at[0].ID, "b": at[1].ID}, &byID)
	}
	if c := byID.Delivery.Compare; len(c.Request) != 1 || c.Request[0].Where != "body $.customer" || !c.ResponseCompared {
		t.Errorf("compare by attempt ids: %+v", c)
	}
	if res := r.GraphQL(t, acct.Token, qc, map[string]any{"id": id, "a": "1", "b": "9"}); len(res.Errors) != 1 || res.Errors[0].Code() != "INVALID_INPUT" {
		t.Errorf("compare 1 with 9 of 2 attempts: %+v", res.Errors)
	}
	for _, bad := range [][]string{{id, "9"}, {id, "x", "1"}} {
		if out, code := h.run(t, "", append([]string{"deliveries", "diff"}, bad...)...); code != 2 || !strings.Contains(out, "want original or a number") {
			t.Errorf("diff %v: exit %d\n%s", bad, code, out)
		}
	}
}
