package systemtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/relayhq/relay/systemtest/harness"
)

// desktopTags are the build tags of the desktop agent's window on Linux
// (docs/desktop.md).
const desktopTags = "desktop,production,webkit2_41"

// TestDesktopAgent drives the desktop agent as a person would: the real
// window (WebKitGTK under Xvfb) of the real binary, read and clicked
// through its test hook, against a real relay and a local handler. It
// signs in through the window, creates two Endpoints and switches both on
// (one connection), sends deliveries to their public addresses, reads the
// rows and the detail pane, retries from the window, watches the
// connection state through a relay restart, gets a notice for a failed
// delivery while hidden, quits cleanly, and starts again signed in from
// what `relay login` stored. It fails on every error the window's page
// reports (console.error, an uncaught exception, an unhandled rejection, a
// file that failed to load), read at its steps and before each window ends
// (checkPageErrors).
func TestDesktopAgent(t *testing.T) {
	t.Parallel()
	bin := buildDesktop(t)
	r := harness.Start(t, "")
	acct := signUpTenant(t, r, "desk")

	var served atomic.Int64
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := served.Add(1)
		body, _ := io.ReadAll(req.Body)
		if strings.HasPrefix(req.URL.Path, "/fail") {
			http.Error(w, "local failure", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Local", "yes")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"got":%q,"bytes":%d,"n":%d}`, req.URL.RequestURI(), len(body), n)
	}))
	t.Cleanup(local.Close)
	target := strings.TrimPrefix(local.URL, "http://")

	began := time.Now()
	step := func(what string) { t.Logf("%5.1fs %s", time.Since(began).Seconds(), what) }
	home := t.TempDir()
	display := startXvfb(t)
	bus := startSessionBus(t)
	notes := serveNotifications(t, bus)
	tray := serveTrayWatcher(t, bus)
	app := startDesktop(t, bin, display, home, bus)
	icon := tray.item(t, app)

	step("window up")
	app.checkPageErrors(t, "window up")
	t.Run("page errors are caught", func(t *testing.T) { testPageErrorsCaught(t, app) })
	// Signed out: the window asks for the relay and a token.
	app.waitFor(t, `!!document.querySelector('[data-testid=signin]')`)
	app.screenshot(t, "desktop-signin")
	app.run(t, `(() => {
		const f = document.querySelector('[data-testid=signin]');
		f.querySelector('input[name=server]').value = `+strconv.Quote(r.BareURL())+`;
		f.querySelector('input[name=token]').value = `+strconv.Quote(acct.Token)+`;
		f.requestSubmit();
		return true; })()`)
	app.waitFor(t, `!!document.querySelector('[data-testid=create-endpoint]')`)

	// The test's session bus has no keyring (Secret Service): the token is
	// in the file `relay login` uses, readable by its owner only.
	cfgPath := filepath.Join(home, ".config", "relay", "config.json")
	st, err := os.Stat(cfgPath)
	if err != nil {
		t.Fatalf("sign-in stored nothing: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", cfgPath, st.Mode().Perm())
	}
	if b, _ := os.ReadFile(cfgPath); !bytes.Contains(b, []byte(acct.Token)) || !bytes.Contains(b, []byte(r.BareURL())) {
		t.Errorf("stored login %s lacks the relay or token", b)
	}
	if s := app.state(t); !s.SignedIn || s.Stored != "file" || s.Account.Name != "desk" {
		t.Errorf("after sign-in: signedIn=%v stored=%q account=%q", s.SignedIn, s.Stored, s.Account.Name)
	}

	// The window loads only its own embedded files, and its policy
	// forbids any other origin.
	if got := app.str(t, `JSON.stringify([...document.querySelectorAll('[src],[href]')]
		.map((e) => new URL(e.getAttribute('src') || e.getAttribute('href'), location.href))
		.filter((u) => u.origin !== location.origin).map(String))`); got != "[]" {
		t.Errorf("the window refers to other origins: %s", got)
	}
	if got := app.str(t, `document.querySelector('meta[http-equiv=Content-Security-Policy]').content`); !strings.HasPrefix(got, "default-src 'self';") {
		t.Errorf("content security policy %q, want default-src 'self'", got)
	}

	step("signed in")
	app.checkPageErrors(t, "signed in")
	// Two Endpoints, created in the window, each forwarding to the handler.
	for _, name := range []string{"payments", "github"} {
		app.run(t, `(() => {
			const f = document.querySelector('[data-testid=create-endpoint]');
			f.querySelector('input[name=name]').value = `+strconv.Quote(name)+`;
			f.querySelector('input[name=target]').value = `+strconv.Quote(target)+`;
			f.requestSubmit();
			return true; })()`)
		app.waitFor(t, `[...document.querySelectorAll('.endpoint-card h3')].some((h) => h.textContent.startsWith(`+strconv.Quote(name)+`))`)
	}
	ids := map[string]string{}
	for _, e := range listEndpoints(t, r, acct.Token) {
		ids[e.Name] = e.ID
		if e.Mode != "PROXY" || e.Target == nil || *e.Target != target {
			t.Errorf("endpoint %s: mode %s target %v, want PROXY to %s", e.Name, e.Mode, e.Target, target)
		}
	}
	pay, gh := ids["payments"], ids["github"]
	if pay == "" || gh == "" {
		t.Fatalf("endpoints after creating two in the window: %v", ids)
	}
	// The public URL is shown with a copy button.
	if got := app.str(t, `document.querySelector('[data-endpoint-id="`+pay+`"] [data-testid=public-url]').textContent`); !strings.Contains(got, pay) {
		t.Errorf("public URL shown for %s: %q", pay, got)
	}

	step("endpoints created")
	// Both switched on: one connection serves both.
	for _, id := range []string{pay, gh} {
		app.run(t, `(() => { document.querySelector('[data-endpoint-id="`+id+`"] [data-testid=switch]').click(); return true; })()`)
	}
	app.waitFor(t, `document.querySelector('[data-testid=conn-state]').textContent === 'Connected'`)
	waitAgent(t, r, acct.Token, pay, true)
	waitAgent(t, r, acct.Token, gh, true)
	app.waitFor(t, `[...document.querySelectorAll('[data-testid=agent-state]')].filter((b) => b.textContent === 'Agent connected').length === 2`)
	// The only listener of each is its primary, and the window says so.
	app.waitFor(t, `document.querySelectorAll('[data-testid=role][data-primary=true]').length === 2`)
	sessions := agentSessions(t, r, acct.Token)
	conn := func(id string) string { c, _, _ := strings.Cut(sessions["agent-"+id], "/"); return c }
	if conn(pay) == "" || conn(pay) != conn(gh) {
		t.Errorf("agent sessions %v: want both Endpoints on one connection", sessions)
	}
	step("connected")
	app.checkPageErrors(t, "connected")
	app.screenshot(t, "desktop-connected")
	// The tray icon says so too: its title and its menu's first entry.
	harness.Eventually(t, 10*time.Second, "the tray's title says Connected", func() bool { return icon.title(t) == "Relay: Connected" })
	if labels, _ := icon.entries(t); strings.Join(labels, "|") != "Connected|—|Show window|Quit" {
		t.Errorf("tray menu %q, want the state, a separator, Show window and Quit", labels)
	}

	// The card shows the routing the relay applies before the app sees a
	// delivery: filters, handshakes and the answer given to what they
	// refuse; removing them clears the lines.
	setRouting := func(in map[string]any) {
		t.Helper()
		r.MustGraphQL(t, acct.Token, `mutation($id: ID!, $in: UpdateEndpointInput!){ updateEndpoint(id: $id, input: $in){ id } }`,
			map[string]any{"id": gh, "in": in}, nil)
	}
	setRouting(map[string]any{"filterTexts": []string{"header:X-GitHub-Event=push"}, "answer": map[string]any{"status": 202}, "handshakes": map[string]any{"enabled": []string{"SLACK"}}})
	card := `document.querySelector('[data-endpoint-id="` + gh + `"]')`
	app.waitFor(t, card+`.querySelector('[data-testid=filters]')?.textContent.includes('header:X-GitHub-Event=push')`)
	if got := app.str(t, card+`.querySelector('[data-testid=filters]').textContent`); !strings.Contains(got, "answered 202") {
		t.Errorf("the filters line says %q, want the answer given to what they refuse", got)
	}
	if got := app.str(t, card+`.querySelector('[data-testid=handshakes]')?.textContent || ''`); !strings.Contains(got, "slack") {
		t.Errorf("the handshakes line says %q", got)
	}
	setRouting(map[string]any{"filterTexts": []string{}, "answer": map[string]any{"status": 204}, "handshakes": map[string]any{"enabled": []string{}}})
	app.waitFor(t, `!`+card+`.querySelector('[data-testid=filters]') && !`+card+`.querySelector('[data-testid=handshakes]')`)

	// Deliveries to the public addresses get the local answer.
	send := func(id, method, path, ctype string, body []byte) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+r.AddressHost(id)+path, bytes.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(r.Route(req))
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	code, body, hdr := send(pay, "POST", "/hooks/pay?x=1", "application/json", []byte(`{"amount":42,"currency":"EUR"}`))
	if code != 201 || !strings.Contains(body, `"got":"/hooks/pay?x=1"`) || hdr.Get("X-Local") != "yes" {
		t.Fatalf("sender got %d %q (X-Local %q), want the local 201", code, body, hdr.Get("X-Local"))
	}
	if code, body, _ = send(gh, "GET", "/ping", "", nil); code != 201 || !strings.Contains(body, `"got":"/ping"`) {
		t.Fatalf("sender got %d %q from the second Endpoint, want the local 201", code, body)
	}
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	if code, _, _ = send(pay, "PUT", "/bin", "application/octet-stream", binary); code != 201 {
		t.Fatalf("binary delivery: sender got %d", code)
	}

	step("deliveries sent")
	// The window shows the rows: time, method, path, status, duration.
	app.waitFor(t, `document.querySelectorAll('tr.row').length === 3`)
	rows := app.str(t, `[...document.querySelectorAll('tr.row')].map((r) => [...r.cells].map((c) => c.textContent).join(' | ')).join('\n')`)
	for _, want := range []string{"payments | POST | /hooks/pay?x=1 | 201 | ", "github | GET | /ping | 201 | ", "payments | PUT | /bin | 201 | "} {
		if !strings.Contains(rows, want) {
			t.Errorf("rows lack %q:\n%s", want, rows)
		}
	}
	if !strings.Contains(rows, " ms") {
		t.Errorf("rows show no duration:\n%s", rows)
	}

	step("rows shown")
	app.checkPageErrors(t, "rows shown")
	// Each card charts its Endpoint's last hour as the relay counts it
	// (Endpoint.stats), with the figures in a table for screen readers.
	statsOf := func(id string) string {
		return `document.querySelector('[data-endpoint-id="` + id + `"] [data-testid=card-stats-table] td')?.textContent`
	}
	app.waitFor(t, statsOf(pay)+` === '2' && `+statsOf(gh)+` === '1' && !!document.querySelector('[data-endpoint-id="`+pay+`"] .card-chart canvas')`)
	// The detail pane: pretty JSON, the local response; then Retry.
	clickRow := func(path string) string {
		t.Helper()
		return app.str(t, `(() => {
			const row = [...document.querySelectorAll('tr.row')].find((r) => r.querySelector('code').textContent === `+strconv.Quote(path)+`);
			row.click();
			return row.dataset.deliveryId; })()`)
	}
	payID := clickRow("/hooks/pay?x=1")
	app.waitFor(t, `!!document.querySelector('[data-testid=body-json]')`)
	if got := app.str(t, `document.querySelector('[data-testid=body-json]').textContent`); !strings.Contains(got, `"amount": 42`) {
		t.Errorf("request body not pretty-printed: %q", got)
	}
	if got := app.str(t, `document.querySelector('.detail').textContent`); !strings.Contains(got, "x-local") && !strings.Contains(got, "X-Local") {
		t.Errorf("detail pane lacks the local response's headers:\n%s", got)
	}
	// The pane the console shares says why the sender got 201.
	if got := app.str(t, `document.querySelector('.detail [data-testid=why-summary]')?.textContent || ''`); !strings.HasPrefix(got, "Answered 201 by your local process at ") {
		t.Errorf("detail pane's why line = %q, want the local 201", got)
	}
	app.screenshot(t, "desktop-detail")
	app.run(t, `(() => { document.querySelector('[data-testid=retry]').click(); return true; })()`)
	app.waitFor(t, `document.querySelectorAll('[data-testid=attempts] tbody tr').length === 2`)
	d := deliveryByID(t, r, acct.Token, payID)
	if d == nil || len(d.Attempts) != 2 || !d.Attempts[1].Retry || d.Attempts[1].Status == nil || *d.Attempts[1].Status != 201 {
		t.Fatalf("after Retry in the window the API shows %+v, want a second attempt, a retry answered 201", d)
	}
	app.waitFor(t, `document.querySelectorAll('tr.row').length === 4`)

	step("retried")
	app.checkPageErrors(t, "retried")
	// A binary body is shown as hex.
	clickRow("/bin")
	app.waitFor(t, `!!document.querySelector('[data-testid=body-hex]')`)
	if got := app.str(t, `document.querySelector('[data-testid=body-hex]').textContent`); !strings.Contains(got, "00 01 02 03") {
		t.Errorf("hex view: %q", got)
	}

	step("hex shown")
	// The relay goes away: the window says so, with the reason and the
	// next try, and connects again when it is back.
	r.Stop(t)
	app.waitFor(t, `document.querySelector('[data-testid=conn-state]').textContent === 'Reconnecting'`)
	app.waitFor(t, `/next try in \d+ s/.test(document.querySelector('[data-testid=conn-reason]').textContent)`)
	app.screenshot(t, "desktop-reconnecting")
	r.RestartSamePort(t)
	app.waitFor(t, `document.querySelector('[data-testid=conn-state]').textContent === 'Connected'`)
	waitAgent(t, r, acct.Token, pay, true)

	step("reconnected")
	app.checkPageErrors(t, "relay restarted, reconnected")
	// Visible, a failure is a row, not a notification.
	if code, _, _ = send(pay, "POST", "/fail-visible", "text/plain", []byte("x")); code != 500 {
		t.Fatalf("failing delivery: sender got %d, want the local 500", code)
	}
	app.waitFor(t, `[...document.querySelectorAll('tr.row code')].some((c) => c.textContent === '/fail-visible')`)

	// Hidden, the agent keeps forwarding and notifies of a failure through
	// the session's notification service.
	app.post(t, "/close")
	if code, _, _ = send(pay, "POST", "/fail", "text/plain", []byte("x")); code != 500 {
		t.Fatalf("failing delivery while hidden: sender got %d, want the local 500", code)
	}
	select {
	case n := <-notes:
		if strings.Contains(n.body, "/fail-visible") {
			t.Fatalf("notified of a failure while the window was shown: %+v", n)
		}
		if n.summary != "Delivery failed" || !strings.Contains(n.body, "POST /fail") || !strings.Contains(n.body, "500") {
			t.Errorf("notification %+v, want the failed POST /fail and its 500", n)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no notification of the failed delivery; app state %+v", app.state(t))
	}
	harness.Eventually(t, 10*time.Second, "the notice recorded as shown", func() bool {
		s := app.state(t)
		return s.Hidden && len(s.Notices) == 1 && s.Notices[0].Error == ""
	})
	// The tray counts the failures the hidden window has not shown.
	harness.Eventually(t, 10*time.Second, "the tray's title counts the failure", func() bool {
		return icon.title(t) == "Relay: Connected, 1 failed delivery"
	})
	// Success while hidden is no news.
	if code, _, _ = send(pay, "GET", "/fine", "", nil); code != 201 {
		t.Fatalf("delivery while hidden: sender got %d", code)
	}
	app.waitFor(t, `[...document.querySelectorAll('tr.row code')].some((c) => c.textContent === '/fine')`)
	select {
	case n := <-notes:
		t.Errorf("notified of a successful delivery: %+v", n)
	default:
	}

	// Starting the program again shows the running window rather than a
	// second agent.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, bin)
	second.Env = desktopEnv(display, home, bus)
	if out, err := second.CombinedOutput(); ctx.Err() != nil || second.ProcessState == nil {
		t.Fatalf("a second start did not hand over to the running window and end: %v\n%s", err, out)
	}
	harness.Eventually(t, 10*time.Second, "the window shown again", func() bool { return !app.state(t).Hidden })
	// The second start ended before its window: it put up no tray icon.
	select {
	case s := <-tray.reg:
		t.Errorf("a second start registered a tray icon (%s)", s)
	default:
	}

	step("notified")
	app.checkPageErrors(t, "notified")
	// The tray's menu: "Show window" brings the hidden window back (and
	// the failures are seen), "Quit" quits as the Quit button does: the
	// session is closed and the relay records the disconnect.
	app.post(t, "/close")
	app.waitFor(t, `document.hidden`)
	icon.click(t, "Show window")
	harness.Eventually(t, 10*time.Second, "the window shown from the tray", func() bool { return !app.state(t).Hidden })
	app.waitFor(t, `!document.hidden`)
	harness.Eventually(t, 10*time.Second, "the tray's count reset", func() bool { return icon.title(t) == "Relay: Connected" })
	app.checkPageErrors(t, "before quitting from the tray")
	icon.click(t, "Quit")
	app.wait(t)
	waitAgent(t, r, acct.Token, pay, false)
	waitAgent(t, r, acct.Token, gh, false)

	step("quit from the tray")
	// `relay login` stores a sign-in; the window starts with it.
	out, exit := harness.RunWith(t, harness.Command{
		Env:   []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")},
		Stdin: strings.NewReader(acct.Token + "\n"),
	}, "login", "--server", r.BareURL())
	if exit != 0 {
		t.Fatalf("relay login: exit %d\n%s", exit, out)
	}
	// This time the desktop has no tray host (GNOME without the
	// AppIndicator extension): the window works as well, the log says why
	// there is no icon, once, and the icon comes when a tray host starts.
	tray.stop(t)
	again := startDesktop(t, bin, display, home, bus)
	again.waitFor(t, `!!document.querySelector('[data-testid=create-endpoint]')`)
	if s := again.state(t); !s.SignedIn || s.Account.Name != "desk" || s.Stored != "file" {
		t.Errorf("second start: signedIn=%v account=%q stored=%q, want signed in from relay login's file", s.SignedIn, s.Account.Name, s.Stored)
	}
	if n := strings.Count(again.out.String(), "no tray host yet"); n != 1 {
		t.Errorf("without a tray host the log says so %d times, want once:\n%s", n, again.out.String())
	}
	tray.start(t)
	tray.item(t, again)
	step("second start signed in")
	again.checkPageErrors(t, "second start signed in")
	// The switches are as they were: forwarding resumes.
	again.waitFor(t, `[...document.querySelectorAll('[data-testid=switch]')].filter((s) => s.checked).length === 2`)
	waitAgent(t, r, acct.Token, pay, true)
	waitAgent(t, r, acct.Token, gh, true)
	step("switches restored")
	// An Endpoint deleted elsewhere (the console, the CLI) is dropped from
	// the window and its switch with it; the others keep forwarding.
	r.MustGraphQL(t, acct.Token, `mutation($id: ID!){ deleteEndpoint(id: $id) }`, map[string]any{"id": gh}, nil)
	again.waitFor(t, `document.querySelectorAll('.endpoint-card').length === 1 && document.querySelector('[data-testid=conn-state]').textContent === 'Connected'`)
	waitAgent(t, r, acct.Token, pay, true)
	if code, body, _ = send(pay, "GET", "/still", "", nil); code != 201 || !strings.Contains(body, `"got":"/still"`) {
		t.Fatalf("after deleting the other Endpoint: sender got %d %q", code, body)
	}

	step("deleted Endpoint dropped")
	again.checkPageErrors(t, "before SIGTERM")
	// SIGTERM (a logout, `kill`) quits as cleanly as the Quit button.
	if err := again.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	again.wait(t)
	waitAgent(t, r, acct.Token, pay, false)
	step("stopped by SIGTERM")
}

// agentSessions maps each agent stream to the agent_id of its last
// agent.connected.v1 event.
func agentSessions(t *testing.T, r *harness.Relay, token string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range logEvents(t, r, token) {
		if e.Type != "agent.connected.v1" {
			continue
		}
		var d struct {
			AgentID string `json:"agent_id"`
		}
		_ = json.Unmarshal([]byte(e.Data), &d)
		out[e.Stream] = d.AgentID
	}
	return out
}

func listEndpoints(t *testing.T, r *harness.Relay, token string) []endpointInfo {
	t.Helper()
	var out struct{ Endpoints []endpointInfo }
	r.MustGraphQL(t, token, `{ endpoints{ `+endpointFields+` } }`, nil, &out)
	return out.Endpoints
}

// buildDesktop builds the desktop agent with its window (cgo, WebKitGTK)
// once for the test, or skips when the machine cannot.
func buildDesktop(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("Xvfb"); err != nil {
		t.Skip("Xvfb is not installed (Debian: apt-get install xvfb)")
	}
	if err := exec.Command("pkg-config", "--exists", "webkit2gtk-4.1", "gtk+-3.0").Run(); err != nil {
		t.Skip("WebKitGTK 4.1 is not installed (Debian: apt-get install libgtk-3-dev libwebkit2gtk-4.1-dev)")
	}
	bin := filepath.Join(t.TempDir(), "relay-desktop")
	start := time.Now()
	cmd := exec.Command("go", "build", "-trimpath", "-tags", desktopTags, "-o", bin, "./cmd/relay-desktop")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	cmd.Dir = harness.ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build relay-desktop: %v\n%s", err, out)
	}
	t.Logf("built relay-desktop in %s", time.Since(start).Round(time.Second))
	return bin
}

// startXvfb starts a virtual X server for the test and returns its display.
func startXvfb(t *testing.T) string {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "1280x800x24", "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{pw}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Xvfb: %v", err)
	}
	pw.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(pr).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case n := <-line:
		if n == "" {
			t.Fatal("Xvfb did not report a display")
		}
		return ":" + n
	case <-time.After(20 * time.Second):
		t.Fatal("Xvfb did not start within 20 s")
	}
	return ""
}

// startSessionBus starts a private D-Bus session bus for the test (no
// keyring or notification daemon on it, and none started on demand) and
// returns its address.
func startSessionBus(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Skip("dbus-daemon is not installed (Debian: apt-get install dbus)")
	}
	// A session bus that starts no service on demand: the machine's
	// keyring or notification daemon must not answer in the test.
	config := filepath.Join(t.TempDir(), "session.conf")
	if err := os.WriteFile(config, []byte(sessionBusConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dbus-daemon", "--config-file="+config, "--nofork", "--nopidfile", "--print-address=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dbus-daemon: %v", err)
	}
	done := make(chan struct{})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	select {
	case addr := <-line:
		if addr == "" {
			t.Fatal("dbus-daemon printed no address")
		}
		return addr
	case <-time.After(20 * time.Second):
		t.Fatal("dbus-daemon did not start within 20 s")
	}
	return ""
}

const sessionBusConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=/tmp</listen>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// notification is one org.freedesktop.Notifications.Notify call.
type notification struct{ app, summary, body string }

type notificationServer struct{ ch chan notification }

func (n notificationServer) Notify(app string, replaces uint32, icon, summary, body string,
	actions []string, hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	n.ch <- notification{app: app, summary: summary, body: body}
	return 1, nil
}

// serveNotifications is the session's notification daemon: it hands each
// notification to the test.
func serveNotifications(t *testing.T, bus string) <-chan notification {
	t.Helper()
	conn, err := dbus.Connect(bus)
	if err != nil {
		t.Fatalf("connect to the test's session bus: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	srv := notificationServer{ch: make(chan notification, 16)}
	const path, name = "/org/freedesktop/Notifications", "org.freedesktop.Notifications"
	if err := conn.Export(srv, path, name); err != nil {
		t.Fatal(err)
	}
	if reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: %v (reply %v)", name, err, reply)
	}
	return srv.ch
}

// desktopApp is a running relay-desktop and its test hook.
type desktopApp struct {
	cmd     *exec.Cmd
	out     *lockedBuffer
	done    chan struct{}
	display string
	addr    string
	secret  string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// desktopEnv is the environment of the binary: display, home as its HOME
// and config folder, and the session bus.
func desktopEnv(display, home, bus string) []string {
	return append(os.Environ(),
		"DISPLAY="+display,
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_RUNTIME_DIR="+filepath.Join(home, "run"),
		"DBUS_SESSION_BUS_ADDRESS="+bus,
		"NO_AT_BRIDGE=1",
	)
}

// startDesktop runs the binary (desktopEnv) with the test hook on.
func startDesktop(t *testing.T, bin, display, home, bus string) *desktopApp {
	t.Helper()
	hookFile := filepath.Join(home, "hook")
	_ = os.Remove(hookFile)
	if err := os.MkdirAll(filepath.Join(home, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	a := &desktopApp{out: &lockedBuffer{}, done: make(chan struct{}), display: display}
	a.cmd = exec.Command(bin)
	a.cmd.Env = append(desktopEnv(display, home, bus), "RELAY_DESKTOP_TEST_HOOK="+hookFile)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start relay-desktop: %v", err)
	}
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		select {
		case <-a.done:
		default:
			_ = a.cmd.Process.Kill()
			<-a.done
		}
		if t.Failed() {
			t.Logf("relay-desktop output:\n%s", a.out.String())
		}
	})
	// Run before the one above: a window the test did not end (it failed
	// on the way) has its errors read before it is killed. A window ended
	// by the test had them read just before (checkPageErrors).
	t.Cleanup(func() {
		select {
		case <-a.done:
		default:
			a.checkPageErrors(t, "at the end of the test")
		}
	})
	harness.Eventually(t, 20*time.Second, "the desktop test hook", func() bool {
		b, err := os.ReadFile(hookFile)
		if err != nil {
			return false
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			return false
		}
		a.addr, a.secret = f[0], f[1]
		return true
	})
	a.waitFor(t, `document.querySelector('#main').children.length > 0`)
	return a
}

func (a *desktopApp) post(t *testing.T, path string) ([]byte, int) {
	t.Helper()
	return a.request(t, "POST", path, "")
}

func (a *desktopApp) request(t *testing.T, method, path, body string) ([]byte, int) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+a.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("test hook %s: %v\n%s", path, err, a.out.String())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b, resp.StatusCode
}

// eval runs a JavaScript expression in the window and returns its value.
func (a *desktopApp) eval(t *testing.T, js string) (json.RawMessage, error) {
	t.Helper()
	b, code := a.request(t, "POST", "/eval", js)
	if code != http.StatusOK {
		return nil, fmt.Errorf("eval: %d %s", code, b)
	}
	var res struct {
		Value json.RawMessage
		Error string
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("eval answer %s: %w", b, err)
	}
	if res.Error != "" {
		return nil, fmt.Errorf("script failed: %s", res.Error)
	}
	return res.Value, nil
}

func (a *desktopApp) run(t *testing.T, js string) {
	t.Helper()
	if _, err := a.eval(t, js); err != nil {
		t.Fatalf("%v\nscript: %s", err, js)
	}
}

func (a *desktopApp) str(t *testing.T, js string) string {
	t.Helper()
	v, err := a.eval(t, js)
	if err != nil {
		t.Fatalf("%v\nscript: %s", err, js)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		t.Fatalf("script gave %s, want a string\nscript: %s", v, js)
	}
	return s
}

// waitFor polls a JavaScript condition in the window.
func (a *desktopApp) waitFor(t *testing.T, cond string) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, "window: "+cond, func() bool {
		v, err := a.eval(t, `(() => { try { return !!(`+cond+`); } catch (e) { return false; } })()`)
		return err == nil && string(v) == "true"
	})
}

// takePageErrors returns what the window's page reported as an error since
// the last read, as the hook's collector kept it from the page's first
// script on (desktop.pageErrorsScript: at most 50 entries of 500
// characters between reads), and how many more it dropped.
func (a *desktopApp) takePageErrors(t *testing.T) (errs []string, dropped int, err error) {
	t.Helper()
	v, err := a.eval(t, `window.__pageErrors ? window.__pageErrors.take() : null`)
	if err != nil {
		return nil, 0, err
	}
	if string(v) == "null" {
		return nil, 0, errors.New("the page has no error collector (window.__pageErrors): the hook's script did not load first")
	}
	var got struct {
		Errors  []string
		Dropped int
	}
	if err := json.Unmarshal(v, &got); err != nil {
		return nil, 0, fmt.Errorf("the collector answered %s: %w", v, err)
	}
	return got.Errors, got.Dropped, nil
}

// checkPageErrors fails the test on each error the window's page reported
// since the last check, naming it and when it was read. Nothing is
// tolerated: the test's relay restart leaves the page nothing to report
// (the window shows the state; the agent's reconnecting is no error).
func (a *desktopApp) checkPageErrors(t *testing.T, when string) {
	t.Helper()
	errs, dropped, err := a.takePageErrors(t)
	if err != nil {
		t.Errorf("the window's errors (%s): %v", when, err)
		return
	}
	// A page erroring on every refresh repeats itself: each error once,
	// with how often.
	times := map[string]int{}
	var order []string
	for _, e := range errs {
		if times[e] == 0 {
			order = append(order, e)
		}
		times[e]++
	}
	for _, e := range order {
		if n := times[e]; n > 1 {
			t.Errorf("the window's page reported an error %d times (%s): %s", n, when, e)
		} else {
			t.Errorf("the window's page reported an error (%s): %s", when, e)
		}
	}
	if dropped > 0 {
		t.Errorf("the window's page reported %d more errors (%s), not kept", dropped, when)
	}
}

// testPageErrorsCaught checks the check: an exception thrown in a timer,
// a rejection nobody handles, a console.error and an image that does not
// load, each seen with its message; and a page erroring in a loop keeps 50 entries of 500
// characters. It reads what it caused, so the rest of the test sees none
// of it.
func testPageErrorsCaught(t *testing.T, app *desktopApp) {
	app.run(t, `(() => {
		setTimeout(() => { throw new Error("boom") });
		Promise.reject(new Error("nobody waits"));
		console.error("logged", {n: 1});
		const img = document.createElement("img");
		img.src = "/no-such-file.png";
		document.body.append(img);
		img.addEventListener("error", () => img.remove());
		return true; })()`)
	want := []string{"Uncaught Error: boom", "Unhandled rejection: Error: nobody waits", `console.error: logged {"n":1}`, "failed to load <img> /no-such-file.png"}
	var got []string
	seen := func() bool {
		for _, w := range want {
			if !slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, w) }) {
				return false
			}
		}
		return true
	}
	harness.Eventually(t, 10*time.Second, "the collector sees the four errors", func() bool {
		errs, _, err := app.takePageErrors(t)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, errs...)
		return seen()
	})
	if len(got) != len(want) {
		t.Errorf("the collector saw %q, want only the four caused", got)
	}

	app.run(t, `(() => { for (let i = 0; i < 60; i++) console.error(i + ' ' + 'x'.repeat(600)); return true; })()`)
	errs, dropped, err := app.takePageErrors(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 50 || dropped != 10 || !strings.HasPrefix(errs[0], "console.error: 0 xxx") || !strings.HasPrefix(errs[49], "console.error: 49 xxx") {
		t.Errorf("60 errors in a loop: kept %d, dropped %d; want the first 50 and 10 dropped", len(errs), dropped)
	}
	for _, e := range errs {
		if len(e) != 500 {
			t.Errorf("an entry of %d characters, want it cut at 500", len(e))
			break
		}
	}
}

type desktopState struct {
	SignedIn bool
	Stored   string
	Account  struct{ Name string }
	Hidden   bool
	Notices  []struct{ Title, Body, Error string }
}

func (a *desktopApp) state(t *testing.T) desktopState {
	t.Helper()
	b, code := a.request(t, "GET", "/state", "")
	var s desktopState
	if code != http.StatusOK || json.Unmarshal(b, &s) != nil {
		t.Fatalf("test hook state: %d %s", code, b)
	}
	return s
}

// wait waits for a clean exit.
func (a *desktopApp) wait(t *testing.T) {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("relay-desktop did not quit within 20 s:\n%s", a.out.String())
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("relay-desktop exit code %d:\n%s", code, a.out.String())
	}
}

// screenshot saves the screen to $RELAY_DESKTOP_SCREENSHOTS/name.png when
// that is set (how docs/screenshots/desktop-*.png are made).
func (a *desktopApp) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("RELAY_DESKTOP_SCREENSHOTS")
	if dir == "" {
		return
	}
	// Two animation frames: what the DOM shows has been painted.
	a.run(t, `new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))`)
	out := filepath.Join(dir, name+".png")
	cmd := exec.Command("import", "-display", a.display, "-window", "root", "-trim", "+repage", "+dither", "-colors", "64", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("screenshot %s: %v\n%s", name, err, b)
	}
}

// trayWatcher stands in for the desktop's tray host: the
// org.kde.StatusNotifierWatcher an item registers with (KDE, most panels,
// GNOME's AppIndicator extension). It hands each registration's sender to
// the test.
type trayWatcher struct {
	conn *dbus.Conn
	reg  chan string
}

func (w *trayWatcher) RegisterStatusNotifierItem(sender dbus.Sender, service string) *dbus.Error {
	select {
	case w.reg <- string(sender):
	default:
	}
	return nil
}

func serveTrayWatcher(t *testing.T, bus string) *trayWatcher {
	t.Helper()
	conn, err := dbus.Connect(bus)
	if err != nil {
		t.Fatalf("connect to the test's session bus: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	w := &trayWatcher{conn: conn, reg: make(chan string, 8)}
	if err := conn.Export(w, "/StatusNotifierWatcher", trayWatcherName); err != nil {
		t.Fatal(err)
	}
	w.start(t)
	return w
}

const trayWatcherName = "org.kde.StatusNotifierWatcher"

// start and stop start and stop the tray host (as a desktop session, or
// GNOME's AppIndicator extension, does).
func (w *trayWatcher) start(t *testing.T) {
	t.Helper()
	if reply, err := w.conn.RequestName(trayWatcherName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: %v (reply %v)", trayWatcherName, err, reply)
	}
}

func (w *trayWatcher) stop(t *testing.T) {
	t.Helper()
	if reply, err := w.conn.ReleaseName(trayWatcherName); err != nil || reply != dbus.ReleaseNameReplyReleased {
		t.Fatalf("release %s: %v (reply %v)", trayWatcherName, err, reply)
	}
}

// trayItem is a running app's StatusNotifierItem and its menu
// (com.canonical.dbusmenu), as the tray host sees them.
type trayItem struct{ item, menu dbus.BusObject }

// item waits for app's tray icon to register and returns it.
func (w *trayWatcher) item(t *testing.T, app *desktopApp) trayItem {
	t.Helper()
	var sender string
	select {
	case sender = <-w.reg:
	case <-time.After(20 * time.Second):
		t.Fatalf("no tray icon registered with the StatusNotifierWatcher within 20 s\n%s", app.out.String())
	}
	// The item is the app's: it owns the name the protocol gives it.
	name := fmt.Sprintf("org.kde.StatusNotifierItem-%d-1", app.cmd.Process.Pid)
	var owner string
	if err := w.conn.BusObject().Call("org.freedesktop.DBus.GetNameOwner", 0, name).Store(&owner); err != nil || owner != sender {
		t.Fatalf("tray item registered by %s; %s is owned by %q (%v)", sender, name, owner, err)
	}
	ti := trayItem{item: w.conn.Object(sender, "/StatusNotifierItem")}
	v, err := ti.item.GetProperty("org.kde.StatusNotifierItem.Menu")
	if err != nil {
		t.Fatalf("tray item's menu: %v", err)
	}
	menuPath, _ := v.Value().(dbus.ObjectPath)
	// Panels remember an item by its Id: it stays the same whatever the
	// state.
	if id, err := ti.item.GetProperty("org.kde.StatusNotifierItem.Id"); err != nil || id.Value() != "Relay" {
		t.Errorf("tray item's Id %v (%v), want Relay", id, err)
	}
	ti.menu = w.conn.Object(sender, menuPath)
	return ti
}

// title is the item's title (the app puts its state there and in the
// tooltip).
func (ti trayItem) title(t *testing.T) string {
	t.Helper()
	v, err := ti.item.GetProperty("org.kde.StatusNotifierItem.Title")
	if err != nil {
		t.Fatalf("tray item's title: %v", err)
	}
	s, _ := v.Value().(string)
	return s
}

// entries are the menu's top-level labels and their IDs, in order.
func (ti trayItem) entries(t *testing.T) (labels []string, ids map[string]int32) {
	t.Helper()
	call := ti.menu.Call("com.canonical.dbusmenu.GetLayout", 0, int32(0), int32(-1), []string{})
	if call.Err != nil || len(call.Body) != 2 {
		t.Fatalf("tray menu GetLayout: %v %v", call.Err, call.Body)
	}
	root, _ := call.Body[1].([]any)
	if len(root) != 3 {
		t.Fatalf("tray menu layout %#v", call.Body[1])
	}
	children, _ := root[2].([]dbus.Variant)
	ids = map[string]int32{}
	for _, c := range children {
		node, _ := c.Value().([]any)
		if len(node) != 3 {
			continue
		}
		id, _ := node[0].(int32)
		props, _ := node[1].(map[string]dbus.Variant)
		if props["visible"].Value() == false {
			continue
		}
		label, _ := props["label"].Value().(string)
		if typ, _ := props["type"].Value().(string); typ == "separator" {
			label = "—"
		}
		labels = append(labels, label)
		ids[label] = id
	}
	return labels, ids
}

// click clicks the menu's entry labelled label, as the tray host does.
func (ti trayItem) click(t *testing.T, label string) {
	t.Helper()
	labels, ids := ti.entries(t)
	id, ok := ids[label]
	if !ok {
		t.Fatalf("tray menu has no %q: %q", label, labels)
	}
	call := ti.menu.Call("com.canonical.dbusmenu.Event", 0, id, "clicked", dbus.MakeVariant(""), uint32(0))
	if call.Err != nil {
		t.Fatalf("tray menu: click %q: %v", label, call.Err)
	}
}
