package systemtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestNewUserCLIRoughEdges runs, with the real binary, what a new user met:
// endpoints show's first line, a look-back of days, times in tables to the
// second in local time, and listen with an Endpoint name that does not
// exist yet.
func TestNewUserCLIRoughEdges(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, _ := loggedInHome(t, r)

	var ep jsonEndpoint
	h.jsonOut(t, &ep, "endpoints", "create", "stripe", "--mode", "LOG")
	out, code := h.run(t, "", "endpoints", "show", "stripe")
	if code != 0 || !strings.HasPrefix(out, "endpoint "+ep.ID+" (stripe), LOG mode") || strings.Contains(out, "endpoint endpoint") {
		t.Errorf("endpoints show exited %d:\n%s", code, out)
	}

	send(t, r, ep.ID, "POST", "/hook", nil, []byte("x"))
	var rows []struct{ ReceivedAt string }
	harness.Eventually(t, 10*time.Second, "the delivery listed", func() bool {
		out, code := h.run(t, "", "deliveries", "list", ep.ID, "--since", "1d", "-o", "json")
		if code != 0 {
			t.Fatalf("deliveries list --since 1d exited %d:\n%s", code, out)
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("deliveries list -o json: %v\n%s", err, out)
		}
		return len(rows) == 1
	})
	// Days are read by every duration flag, as --expires-in always did.
	for _, args := range [][]string{
		{"deliveries", "list", ep.ID, "--since", "1d"},
		{"deliveries", "list", ep.ID, "--since", "1d12h"},
		{"tokens", "create", "ci", "--expires-in", "90d"},
	} {
		if out, code := h.run(t, "", args...); code != 0 {
			t.Errorf("relay %v exited %d:\n%s", args, code, out)
		}
	}
	if out, code := h.run(t, "", "deliveries", "list", ep.ID, "--since", "1w"); code != 2 || !strings.Contains(out, "--since") {
		t.Errorf("--since 1w exited %d, want 2 naming the flag:\n%s", code, out)
	}

	// Tables: to the second, in the machine's time zone.
	received, err := time.Parse(time.RFC3339Nano, rows[0].ReceivedAt)
	if err != nil {
		t.Fatal(err)
	}
	tokyo := h.command("")
	tokyo.Env = append(tokyo.Env, "TZ=Asia/Tokyo")
	out, code = harness.RunWith(t, tokyo, "deliveries", "list", ep.ID)
	loc, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	if want := received.In(loc).Format("2006-01-02 15:04:05") + "  "; code != 0 || !strings.Contains(out, want) {
		t.Errorf("deliveries list exited %d, want the time %q (Tokyo, to the second):\n%s", code, want, out)
	}
	if regexp.MustCompile(`\d\d:\d\d:\d\d\.\d|T\d\d:\d\d`).MatchString(out) {
		t.Errorf("deliveries list prints RFC 3339 or fractions of seconds:\n%s", out)
	}

	// listen with no login, where nothing can be asked: says both ways in.
	if out, code := newCLIHome(t).run(t, "", "listen", "3000", "--server", r.BareURL()); code != 2 ||
		!strings.Contains(out, "not logged in to "+r.BareURL()) || !strings.Contains(out, "relay login --server") || !strings.Contains(out, "--signup NAME") {
		t.Errorf("listen with no login exited %d, want 2 naming relay login and --signup:\n%s", code, out)
	}

	// listen with a name no Endpoint has: refused with the way on when
	// nothing can be asked, created with --create.
	out, code = h.run(t, "", "listen", "3000", "github")
	if code != 2 || !strings.Contains(out, `no endpoint "github"`) || !strings.Contains(out, "--create") {
		t.Errorf("listen 3000 github exited %d, want 2 saying how to create it:\n%s", code, out)
	}
	listen := h.startIn(t, t.TempDir(), "listen", "3000", "github", "--create")
	waitOutput(t, listen, publicURLLine)
	var eps []jsonEndpoint
	h.jsonOut(t, &eps, "endpoints", "list", "-o", "json")
	var shown jsonEndpoint
	for _, e := range eps {
		if e.Name == "github" {
			shown = e
		}
	}
	if shown.Mode != "PROXY" || shown.Target == nil || !strings.HasSuffix(*shown.Target, ":3000") {
		t.Errorf("listen --create made %+v", shown)
	}
}

// TestDeviceLoginKeepsAStoredLogin: `relay login --device` refuses, as
// --signup does, to replace the stored login of the same relay (exit 2,
// naming the account, offering --force); with --force it asks the relay
// for a code.
func TestDeviceLoginKeepsAStoredLogin(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	server := r.BareURL()
	h := newCLIHome(t)
	if out, code := h.run(t, "", "login", "--server", server, "--signup", "alice"); code != 0 {
		t.Fatalf("sign-up exited %d:\n%s", code, out)
	}
	alice, _ := h.stored(t)
	out, code := h.run(t, "", "login", "--server", server, "--device")
	if code != 2 || !strings.Contains(out, "already logged in to "+server+" as alice (") || !strings.Contains(out, "--force") ||
		strings.Contains(out, "To log in, open") {
		t.Errorf("login --device over alice's login exited %d, want 2 naming alice and --force, before any code:\n%s", code, out)
	}
	if cfg, _ := h.stored(t); cfg.Token != alice.Token {
		t.Errorf("the refused login replaced the stored token")
	}
	forced := h.startIn(t, t.TempDir(), "login", "--server", server, "--device", "--force")
	waitOutput(t, forced, regexp.MustCompile(`To log in, open \S+/device\?code=`))
}

// TestVerifyWithoutCheckpoint: a log that holds no signed checkpoint
// verifies, and says its end is unproven without one kept from earlier.
func TestVerifyWithoutCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := harness.Start(t, dir, "--checkpoint-interval", "0")
	id, _ := createInspector(t, r)
	r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/a", Host: r.AddressHost(id), Body: []byte("a")})
	harness.Eventually(t, 10*time.Second, "the row", func() bool { return len(history(t, r, id, 10)) == 1 })
	out, code := harness.RunCLI(t, "events", "verify", "--data", dir)
	if code != 0 || !strings.Contains(out, "no checkpoint") || !strings.Contains(out, "end unproven") || strings.Contains(out, "0 checkpoints") {
		t.Errorf("verify of a log without checkpoints exited %d, want 0 saying its end is unproven:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint.key")); err != nil {
		t.Logf("no checkpoint key: %v", err)
	}
}
