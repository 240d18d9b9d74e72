package systemtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestEditAndRetry: relay retry with edit flags sends a changed copy
// through the real agent; the local process gets exactly the edit, the
// attempt records it, the recorded request stays as it was, and bad
// edits are refused before anything is sent.
func TestEditAndRetry(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--max-body", "4096", "--capture-cap", "4096")
	h, acct := loggedInHome(t, r)
	seen, port := recordingTarget(t)
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "shop", "mode": "PROXY", "target": "localhost:" + port})
	listen := h.startIn(t, t.TempDir(), "listen", port, "shop")
	waitOutput(t, listen, regexp.MustCompile(`(?m)^endpoint shop `))
	waitAgent(t, r, acct.Token, ep.ID, true)

	headers := [][2]string{{"Content-Type", "application/json"}, {"Stripe-Signature", "t=1,v1=abc"}, {"X-Trace", "a"}, {"X-Trace", "b"}}
	if resp := send(t, r, ep.ID, "POST", "/webhooks?v=1", headers, []byte(`{"type":"charge.failed"}`)); resp.Status != 200 {
		t.Fatalf("sender got %d", resp.Status)
	}
	line := waitOutput(t, listen, regexp.MustCompile(`delivery (\S+)`))
	id := line[1]

	body := filepath.Join(t.TempDir(), "fixed.json")
	if err := os.WriteFile(body, []byte(`{"type":"charge.succeeded"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := h.run(t, "", "retry", id, "--set-header", "X-Trace=edited", "--set-header", "X-Debug=1",
		"--unset-header", "stripe-signature", "--body", "@"+body, "--path", "/webhooks/v2", "--method", "put")
	if code != 0 || !strings.Contains(out, "attempt 2: 200") || !strings.Contains(out, "edited: method PUT, path /webhooks/v2, set X-Trace, set X-Debug, unset stripe-signature, body (27 bytes)") {
		t.Fatalf("retry with an edit: exit %d\n%s", code, out)
	}
	got := seen.last(t)
	switch {
	case got.Method != "PUT" || got.RequestURI != "/webhooks/v2":
		t.Errorf("local process got %s %s, want PUT /webhooks/v2", got.Method, got.RequestURI)
	case string(got.Body) != `{"type":"charge.succeeded"}`:
		t.Errorf("local process got body %q", got.Body)
	case got.Header.Get("Stripe-Signature") != "":
		t.Errorf("the unset header was sent: %q", got.Header.Get("Stripe-Signature"))
	case strings.Join(got.Header.Values("X-Trace"), ",") != "edited" || got.Header.Get("X-Debug") != "1":
		t.Errorf("headers sent %v", got.Header)
	case got.Header.Get("Content-Type") != "application/json":
		t.Errorf("an untouched header was lost: %v", got.Header)
	}

	// The recorded request is unchanged; the attempt carries the edit.
	var shown struct {
		BodyBase64 string
		Attempts   []struct {
			Retry bool
			Edit  *struct {
				Method, Path *string
				UnsetHeaders []string
				Body         *string
			}
			Fidelity struct{ Status string }
		}
	}
	shownOut, code := h.run(t, "", "deliveries", "show", id, "-o", "json")
	if err := json.Unmarshal([]byte(shownOut), &shown); code != 0 || err != nil {
		t.Fatalf("deliveries show: exit %d, %v\n%s", code, err, shownOut)
	}
	if len(shown.Attempts) != 2 || shown.Attempts[0].Edit != nil || shown.Attempts[1].Edit == nil {
		t.Fatalf("attempts %+v: want the first as recorded, the second edited", shown.Attempts)
	}
	// The agent's receipt is compared with the edited request the relay
	// sent, not the recorded one.
	for i, a := range shown.Attempts {
		if a.Fidelity.Status != "IDENTICAL" {
			t.Errorf("attempt %d: fidelity %s, want IDENTICAL", i+1, a.Fidelity.Status)
		}
	}
	if e := shown.Attempts[1].Edit; strp(e.Method) != `"PUT"` || strp(e.Path) != `"/webhooks/v2"` || strp(e.Body) != strconv.Quote(`{"type":"charge.succeeded"}`) {
		t.Errorf("recorded edit %+v", e)
	}
	var full struct {
		Delivery struct{ Method, Path, Body string }
	}
	r.MustGraphQL(t, acct.Token, `query($id: ID!){ delivery(id: $id){ method path body } }`, map[string]any{"id": id}, &full)
	if d := full.Delivery; d.Method != "POST" || d.Path != "/webhooks?v=1" || d.Body != `{"type":"charge.failed"}` {
		t.Errorf("the recorded request changed: %+v", d)
	}
	// The explanation tells apart what the sender got (attempt 1) and
	// what the history shows now (the edited retry's).
	explainedApart(t, h, id, 2, "EDITED_RETRY", "an edited retry")
	// A plain retry sends the recorded request again, not the edit.
	if out, code := h.run(t, "", "retry", id); code != 0 {
		t.Fatalf("plain retry: exit %d\n%s", code, out)
	}
	explainedApart(t, h, id, 3, "RETRY", "a retry")
	if got := seen.last(t); got.Method != "POST" || got.RequestURI != "/webhooks?v=1" || string(got.Body) != `{"type":"charge.failed"}` {
		t.Errorf("plain retry sent %s %s %q", got.Method, got.RequestURI, got.Body)
	}

	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", 5000)), 0o600); err != nil {
		t.Fatal(err)
	}
	before := len(seen.all())
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--set-header", "Bad Name=x"}, "edit.setHeaders"},
		{[]string{"--set-header", "Content-Length=5"}, "edit.setHeaders"},
		{[]string{"--path", "no-slash"}, "edit.path"},
		{[]string{"--body", "@" + big}, "edit.body"},
		{[]string{"--set-header", "novalue"}, "--set-header"},
		{[]string{"--body", "@/no/such/file"}, "--body"},
	} {
		out, code := h.run(t, "", append([]string{"retry", id}, bad.args...)...)
		if code != 2 || !strings.Contains(out, bad.want) {
			t.Errorf("retry %v: exit %d, want 2 naming %s:\n%s", bad.args, code, bad.want, out)
		}
	}
	if n := len(seen.all()); n != before {
		t.Errorf("bad edits reached the local process: %d requests, want %d", n, before)
	}
}

// explainedApart checks `relay deliveries explain -o json` of a delivery
// the sender got 200 for from attempt 1, shown now from attempt shown, a
// retry of kind.
func explainedApart(t *testing.T, h cliHome, id string, shown int, kind, name string) {
	t.Helper()
	var x struct {
		Status  *int
		Summary string
		Sender  *struct {
			Status  int
			Attempt *int
		}
		Shown *struct {
			Status  int
			Attempt *int
			Kind    string
		}
		Facts []struct{ Text string }
	}
	out, code := h.run(t, "", "deliveries", "explain", id, "-o", "json")
	if err := json.Unmarshal([]byte(out), &x); code != 0 || err != nil {
		t.Fatalf("deliveries explain: exit %d, %v\n%s", code, err, out)
	}
	if x.Sender == nil || x.Sender.Status != 200 || x.Sender.Attempt == nil || *x.Sender.Attempt != 1 {
		t.Errorf("sender %+v, want 200 from attempt 1\n%s", x.Sender, out)
	}
	if x.Shown == nil || x.Status == nil || x.Shown.Status != *x.Status || x.Shown.Attempt == nil || *x.Shown.Attempt != shown || x.Shown.Kind != kind {
		t.Errorf("shown %+v (status %v), want attempt %d, %s\n%s", x.Shown, x.Status, shown, kind, out)
	}
	if !strings.HasPrefix(x.Summary, "The sender was answered 200 by your local process at ") ||
		!strings.Contains(x.Summary, "Shown now: 200, from attempt "+strconv.Itoa(shown)+", "+name+", which the sender never saw") {
		t.Errorf("summary %q", x.Summary)
	}
	for _, f := range x.Facts {
		if strings.Contains(f.Text, "the sender waited") && !strings.Contains(f.Text, "(attempt 1)") {
			t.Errorf("fact %q: the sender waited for attempt 1 only", f.Text)
		}
	}
}
