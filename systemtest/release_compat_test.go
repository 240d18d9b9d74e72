package systemtest

import (
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestDataFolderOfAnEarlierRelay opens a data folder written by an earlier
// release (commit 1681afb, testdata/release-1681afb: a PROXY Endpoint with
// three proxied deliveries, one retried, in the two-event receipt shape,
// and an inspector with two) and finds the same history: the same
// deliveries, requests, answers and attempts. Its views (an older schema)
// are rebuilt at start; its log verifies.
func TestDataFolderOfAnEarlierRelay(t *testing.T) {
	src := filepath.Join("testdata", "release-1681afb")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(src, "data"))); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"secrets.key", "checkpoint.key"} {
		if err := os.Chmod(filepath.Join(dir, key), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}

	// The folder's inspector expired a day after it was written; its
	// deliveries would go a week later (--inspector-retention), the
	// Endpoint's after a month (--retention). Kept here, so that the test
	// does not depend on the folder's age.
	r := harness.Start(t, dir, "--inspector-retention", "876000h", "--retention", "876000h")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("RELAY_SERVER", "http://127.0.0.1:"+strconv.Itoa(r.Port))
	t.Setenv("RELAY_TOKEN", read("token"))
	cli := func(args ...string) string {
		t.Helper()
		out, code := harness.RunCLI(t, args...)
		if code != 0 {
			t.Fatalf("relay %v: exit %d\n%s\nrelay's output:\n%s", args, code, out, r.Output())
		}
		return out
	}

	// The lists, as the earlier relay printed them.
	type row struct {
		ID             string `json:"id"`
		Method         string `json:"method"`
		Path           string `json:"path"`
		ReceivedAt     string `json:"receivedAt"`
		ResponseStatus *int   `json:"responseStatus"`
		BodySize       int64  `json:"bodySize"`
		Attempts       int    `json:"attempts"`
	}
	for _, c := range []struct{ address, expected string }{
		{read("endpoint"), "expected-pay.json"},
		{read("inspector"), "expected-inspector.json"},
	} {
		var want, got []row
		if err := json.Unmarshal([]byte(read(c.expected)), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(cli("deliveries", "list", c.address, "-o", "json")), &got); err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 || !jsonEqual(t, got, want) {
			t.Errorf("deliveries of %s:\n got %+v\nwant %+v", c.address, got, want)
		}
	}

	// One delivery in detail: the request byte for byte and both attempts.
	type attempt struct {
		Status *int `json:"status"`
		Retry  bool `json:"retry"`
	}
	type shown struct {
		ID             string            `json:"id"`
		Method         string            `json:"method"`
		Path           string            `json:"path"`
		Headers        []json.RawMessage `json:"headers"`
		BodyBase64     string            `json:"bodyBase64"`
		ResponseStatus *int              `json:"responseStatus"`
		Attempts       []attempt         `json:"attempts"`
	}
	var want, got shown
	if err := json.Unmarshal([]byte(read("expected-show.json")), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(cli("deliveries", "show", read("failed"), "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if len(want.Attempts) != 2 || !jsonEqual(t, got, want) {
		t.Errorf("the retried delivery:\n got %+v\nwant %+v", got, want)
	}

	// A delivery recorded now lands in the same log, stored compressed
	// (the earlier relay's rows are kept as they are), and shows as sent.
	// It goes to the Endpoint (no agent: answered 503 and recorded): the
	// inspector has expired since the folder was written.
	var ep struct{ ID string }
	if err := json.Unmarshal([]byte(cli("endpoints", "show", read("endpoint"), "-o", "json")), &ep); err != nil || ep.ID == "" {
		t.Fatalf("endpoints show %s: %+v, %v", read("endpoint"), ep, err)
	}
	body := []byte(`{"type":"invoice.paid","lines":[` + strings.Repeat(`{"amount":1200,"currency":"usd"},`, 60) + `{}]}`)
	if resp := r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/after-upgrade", Host: r.AddressHost(ep.ID), Body: body}); resp.Status != 503 {
		t.Fatalf("a delivery to the Endpoint with no agent: answered %d %q, want 503", resp.Status, resp.Body)
	}
	// The sender's answer does not wait for the views: the list shows the
	// delivery once they have applied it.
	var listed []row
	harness.Eventually(t, 15*time.Second, "the new delivery to be listed first", func() bool {
		listed = nil
		if err := json.Unmarshal([]byte(cli("deliveries", "list", read("endpoint"), "-o", "json")), &listed); err != nil {
			t.Fatal(err)
		}
		return len(listed) > 0 && listed[0].Path == "/after-upgrade"
	})
	var newest shown
	if err := json.Unmarshal([]byte(cli("deliveries", "show", listed[0].ID, "-o", "json")), &newest); err != nil {
		t.Fatal(err)
	}
	if newest.BodyBase64 != base64.StdEncoding.EncodeToString(body) {
		t.Errorf("the new delivery's body: %q", newest.BodyBase64)
	}

	r.Stop(t)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "events.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var old, compressed int
	if err := db.QueryRow(`SELECT COUNT(*) FILTER (WHERE enc = 0 AND position <= 24), COUNT(*) FILTER (WHERE enc = 1) FROM events`).Scan(&old, &compressed); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if old != 24 || compressed == 0 {
		t.Errorf("%d of the earlier relay's 24 events as they were, %d compressed since: want 24 and at least 1", old, compressed)
	}
	if out, code := harness.RunCLI(t, "events", "verify", "--data", dir); code != 0 {
		t.Errorf("relay events verify on the earlier relay's log and what came after: exit %d\n%s", code, out)
	}
}

// jsonEqual compares a and b by their JSON.
func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}
