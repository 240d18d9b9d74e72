package systemtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // to find a page of a table in a stopped relay's files

	"github.com/relayhq/relay/systemtest/harness"
)

// serveRefused runs `relay serve` on dir, which must exit by itself within
// 15 s (a refusal); it returns the output and the exit code. listen is
// where it asks to listen.
func serveRefused(t *testing.T, dir, listen string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, harness.Binary(t), "serve", "--listen", listen, "--data", dir).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("relay serve on %s was not refused: still running after 15 s\n%s", dir, out)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// getBare GETs a path of the bare domain and returns the status and body.
func getBare(t *testing.T, r *harness.Relay, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.BareURL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := harness.Client.Do(r.Route(req))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue reads one sample from /metrics by its series, labels
// included (-999 when absent).
func metricValue(t *testing.T, r *harness.Relay, series string) float64 {
	t.Helper()
	_, body := getBare(t, r, "/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -999
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// paths lists the paths of an inspector's history.
func paths(t *testing.T, r *harness.Relay, id string) []string {
	t.Helper()
	var out []string
	for _, d := range history(t, r, id, 100) {
		out = append(out, d.Path)
	}
	return out
}

func sendTo(t *testing.T, r *harness.Relay, id string, targets ...string) {
	t.Helper()
	for _, p := range targets {
		if resp := r.SendRaw(t, harness.RawRequest{Method: "POST", Target: p, Host: r.AddressHost(id), Body: []byte(`{}`)}); resp.Status != 204 {
			t.Fatalf("POST %s: %d %s", p, resp.Status, resp.Body)
		}
	}
}

// fillDisk writes a file into dir until its file system is full and
// returns the file's path: removing it gives the space back.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
}

// TestViewsOnAFullDiskRecoverByThemselves puts views.db on a small tmpfs
// (a symlink from the data folder; SQLite puts the WAL beside the real
// file) and fills it. Webhooks are still recorded and answered; the views'
// failure is logged once, /readyz answers 503 with the cause and the lag,
// /healthz names it, the metrics show it, and a mutation fails with
// UNAVAILABLE within --views-wait instead of hanging. Once space is back,
// the views catch up by themselves: no restart.
func TestViewsOnAFullDiskRecoverByThemselves(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(mnt, "views.db"), filepath.Join(dir, "views.db")); err != nil {
		t.Fatal(err)
	}
	r := harness.Start(t, dir, "--views-wait", "1s")
	id, _ := createInspector(t, r)
	sendTo(t, r, id, "/before")
	// The disk fills only once the views hold /before, so the lag below
	// counts exactly the deliveries sent while it is full.
	harness.Eventually(t, 10*time.Second, "/before in the history", func() bool { return len(paths(t, r, id)) == 1 })
	if code, body := getBare(t, r, "/readyz"); code != 200 || strings.TrimSpace(body) != "ready" {
		t.Fatalf("/readyz of a healthy relay: %d %q", code, body)
	}

	filler := fillDisk(t, mnt)
	sendTo(t, r, id, "/during-1", "/during-2") // recorded in the log, answered 204
	harness.Eventually(t, 10*time.Second, "/readyz to answer 503", func() bool {
		code, _ := getBare(t, r, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	_, body := getBare(t, r, "/readyz")
	if !strings.Contains(body, "disk is full") || !strings.Contains(body, "lag 2 positions") {
		t.Errorf("/readyz body %q: want the cause and the lag", body)
	}
	if code, body := getBare(t, r, "/healthz"); code != 200 || !strings.Contains(body, "degraded") {
		t.Errorf("/healthz while the views fail: %d %q, want 200 naming the fault", code, body)
	}
	if v := metricValue(t, r, "relay_views_failing"); v != 1 {
		t.Errorf("relay_views_failing %v, want 1", v)
	}
	if v := metricValue(t, r, "relay_views_lag_positions"); v != 2 {
		t.Errorf("relay_views_lag_positions %v, want 2", v)
	}
	// A mutation gives up after --views-wait (1s) rather than hang (the
	// harness client would wait a minute).
	if got := r.ErrorCode(t, "", `mutation{ createInspector{ id } }`, nil); got != "UNAVAILABLE" {
		t.Errorf("createInspector while the views fail: %q, want UNAVAILABLE", got)
	}
	// Several retries have failed by now (the first after 100 ms).
	harness.Eventually(t, 10*time.Second, "a few retries", func() bool {
		_, body := getBare(t, r, "/readyz")
		m := regexp.MustCompile(`\((\d+) tries\)`).FindStringSubmatch(body)
		if m == nil {
			return false
		}
		n, _ := strconv.Atoi(m[1])
		return n >= 3
	})
	if n := strings.Count(r.Output(), "projections stopped"); n != 1 {
		t.Errorf("the failure is logged %d times, want once:\n%s", n, r.Output())
	}
	if !strings.Contains(r.Output(), "disk is full") {
		t.Errorf("the log does not name the cause:\n%s", r.Output())
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 15*time.Second, "/readyz to answer 200 once space is back", func() bool {
		code, _ := getBare(t, r, "/readyz")
		return code == 200
	})
	if got := strings.Join(paths(t, r, id), ","); got != "/during-2,/during-1,/before" {
		t.Errorf("history after recovery: %s", got)
	}
	if v := metricValue(t, r, "relay_views_failing"); v != 0 {
		t.Errorf("relay_views_failing after recovery %v, want 0", v)
	}
	if !strings.Contains(r.Output(), "projections recovered") {
		t.Errorf("no recovery logged:\n%s", r.Output())
	}
}

// copyFile copies src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestViewsAheadOfARestoredLogAreRebuilt restores events.db from an older
// backup under newer views: at start the views' checkpoint is checked
// against the log, found ahead, and the views are rebuilt, so they show
// what the log holds and new deliveries appear.
func TestViewsAheadOfARestoredLogAreRebuilt(t *testing.T) {
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	sendTo(t, r, id, "/kept")
	r.Stop(t) // a clean stop leaves events.db whole, without a WAL
	backup := filepath.Join(t.TempDir(), "events.db")
	copyFile(t, filepath.Join(r.Data, "events.db"), backup)

	r.Restart(t)
	sendTo(t, r, id, "/lost-1", "/lost-2")
	harness.Eventually(t, 10*time.Second, "three rows", func() bool { return len(paths(t, r, id)) == 3 })
	r.Stop(t)

	copyFile(t, backup, filepath.Join(r.Data, "events.db"))
	r.Restart(t)
	if got := strings.Join(paths(t, r, id), ","); got != "/kept" {
		t.Errorf("history after restoring the log: %s, want what the log holds (/kept)", got)
	}
	sendTo(t, r, id, "/new")
	harness.Eventually(t, 10*time.Second, "the new delivery in the history", func() bool {
		return strings.Join(paths(t, r, id), ",") == "/new,/kept"
	})
	if !strings.Contains(r.Output(), "views do not match the event log") {
		t.Errorf("the rebuild is not logged:\n%s", r.Output())
	}
}

// pageOf returns the page size of a SQLite file and a page holding rows of
// table (a leaf of its b-tree), read from the stopped relay's file.
func pageOf(t *testing.T, path, table string) (pageSize, page int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow("PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	// The middle leaf: rows before it stay readable.
	if err := db.QueryRow(`SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY path
		LIMIT 1 OFFSET (SELECT COUNT(*) / 2 FROM dbstat WHERE name = ? AND pagetype = 'leaf')`, table, table).Scan(&page); err != nil {
		t.Fatalf("find a page of %s in %s: %v", table, path, err)
	}
	return pageSize, page
}

// scribble overwrites n bytes at off of a file with random bytes.
func scribble(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedViewsFileIsRebuilt damages views.db three ways. The views are
// derived: `relay serve` finds the damage at start (PRAGMA quick_check),
// says so and rebuilds them from the log; `relay events rebuild` recreates
// the file whatever state it is in.
func TestDamagedViewsFileIsRebuilt(t *testing.T) {
	damages := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"truncated", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"bad header", func(t *testing.T, path string) { scribble(t, path, 0, 100) }},
		{"one noisy page", func(t *testing.T, path string) {
			size, page := pageOf(t, path, "deliveries")
			scribble(t, path, (page-1)*size, int(size))
		}},
	}
	want := make([]string, 0, 40)
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	for i := range 40 {
		p := fmt.Sprintf("/d/%02d/%s", i, strings.Repeat("x", 100)) // rows over several pages
		sendTo(t, r, id, p)
		want = append([]string{p}, want...)
	}
	harness.Eventually(t, 10*time.Second, "40 rows", func() bool { return len(paths(t, r, id)) == 40 })
	r.Stop(t)
	views := filepath.Join(r.Data, "views.db")
	for _, d := range damages {
		for _, how := range []string{"serve", "rebuild"} {
			t.Run(d.name+"/"+how, func(t *testing.T) {
				d.damage(t, views)
				if how == "rebuild" {
					if out, code := harness.RunCLI(t, "events", "rebuild", "--data", r.Data); code != 0 {
						t.Fatalf("rebuild of a damaged views file: exit %d\n%s", code, out)
					}
				}
				r.Restart(t)
				defer r.Stop(t)
				if got := paths(t, r, id); strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("history after the damage: %d rows %.200v", len(got), got)
				}
				if how == "serve" && !strings.Contains(r.Output(), "views file damaged") {
					t.Errorf("the damage is not logged:\n%s", r.Output())
				}
			})
		}
	}
}

// TestDamagedEventLogIsRefused: the log is never repaired. With a bad
// header `relay serve` refuses to start and says what to do; with a bad
// page in the middle `relay events verify` names the first bad position,
// and serve refuses when it must read that page.
func TestDamagedEventLogIsRefused(t *testing.T) {
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	for i := range 60 {
		sendTo(t, r, id, fmt.Sprintf("/d/%02d/%s", i, strings.Repeat("x", 500)))
	}
	r.Stop(t)
	events := filepath.Join(r.Data, "events.db")
	intact := filepath.Join(t.TempDir(), "events.db")
	copyFile(t, events, intact)

	t.Run("noisy page", func(t *testing.T) {
		size, page := pageOf(t, events, "events")
		scribble(t, events, (page-1)*size, int(size))
		out, code := harness.RunCLI(t, "events", "verify", "--data", r.Data)
		m := regexp.MustCompile(`first bad event follows it \(position (\d+)`).FindStringSubmatch(out)
		if code == 0 || m == nil {
			t.Fatalf("verify of a damaged log: exit %d\n%s", code, out)
		}
		if n, _ := strconv.Atoi(m[1]); n < 2 || n > 61 {
			t.Errorf("first bad position %d out of the log's range", n)
		}
		// Without views to catch up from, serve must read the bad page.
		if err := os.Remove(filepath.Join(r.Data, "views.db")); err != nil {
			t.Fatal(err)
		}
		out, code = serveRefused(t, r.Data, "127.0.0.1:0")
		if code == 0 || !strings.Contains(out, "is damaged") || !strings.Contains(out, "relay events verify") {
			t.Errorf("serve on a damaged log: exit %d\n%s", code, out)
		}
	})
	t.Run("bad header", func(t *testing.T) {
		copyFile(t, intact, events)
		scribble(t, events, 0, 100)
		out, code := serveRefused(t, r.Data, "127.0.0.1:0")
		if code == 0 || !strings.Contains(out, "is damaged") || !strings.Contains(out, "never repaired") {
			t.Errorf("serve on a log with a bad header: exit %d\n%s", code, out)
		}
	})
}

// TestServeOnAnAddressInUse: relay serve on a port another program
// listens on exits 1 saying the address is in use and which flag picks
// another, not net's "listen tcp …: bind: …".
func TestServeOnAnAddressInUse(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	out, code := serveRefused(t, t.TempDir(), addr)
	if want := "--listen " + addr + ": the address is in use by another program"; code != 1 || !strings.Contains(out, want) ||
		!strings.Contains(out, "give another port, e.g. --listen 127.0.0.1:") || strings.Contains(out, "bind:") {
		t.Errorf("relay serve --listen %s (in use): exit %d, want 1 and %q with another port:\n%s", addr, code, want, out)
	}
}

// TestServeOnAFolderItMayNotWrite: relay serve on a data folder its user
// may not write (to create, or to lock) exits 1 saying so and what to do
// with --data. Run as root, the relay runs as nobody on root's folders.
func TestServeOnAFolderItMayNotWrite(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "relay-unwritable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700); _ = os.RemoveAll(dir) })
	b, err := os.ReadFile(harness.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "relay")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "existing")
	if err := os.Mkdir(existing, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, data string }{
		{"to create", filepath.Join(dir, "relay-data")},
		{"to lock", existing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data", tc.data)
			cmd.Env = []string{"HOME=" + dir}
			if os.Geteuid() == 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("relay serve --data %s: %v, want it refused:\n%s", tc.data, err, out)
			}
			if want := "data folder " + tc.data + ": this user may not write there; give --data a folder it may write"; exit.ExitCode() != 1 || !strings.Contains(string(out), want) {
				t.Errorf("relay serve --data %s: exit %d, want 1 and %q:\n%s", tc.data, exit.ExitCode(), want, out)
			}
		})
	}
}

// TestSecondProcessOnTheDataFolderIsRefused: a second `relay serve`, `relay
// accounts create --data` and `relay events rebuild` on a folder a relay
// uses each exit non-zero naming the holder's PID, and the first relay's
// agent stays connected.
func TestSecondProcessOnTheDataFolderIsRefused(t *testing.T) {
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
	defer local.Close()
	rig := startProxyRig(t, local.Config.Handler, false)
	r := rig.r
	pid := strconv.Itoa(r.PID())
	for _, args := range [][]string{
		{"serve", "127.0.0.1:0"},
		{"serve", "127.0.0.1:" + strconv.Itoa(r.Port)}, // its port too: the lock is checked first
		{"accounts", "create", "--name", "x", "--data", r.Data},
		{"events", "rebuild", "--data", r.Data},
	} {
		var (
			out  string
			code int
		)
		if args[0] == "serve" {
			out, code = serveRefused(t, r.Data, args[1])
		} else {
			out, code = harness.RunCLI(t, args...)
		}
		if code != 2 || !strings.Contains(out, "in use by process "+pid) {
			t.Errorf("relay %s on a folder in use: exit %d, want 2 naming PID %s:\n%s", args[0], code, pid, out)
		}
	}
	if ep := endpointByID(t, r, rig.acct.Token, rig.ep.ID); ep == nil || !ep.AgentConnected {
		t.Errorf("the first relay's agent reads as disconnected: %+v", ep)
	}
	if got := rig.send(t, "POST", "/still", nil, nil); got.Status != 200 {
		t.Errorf("forward after the refusals: %d %s", got.Status, got.Body)
	}
}

// TestForwardsLeftOpenByACrashAreFailed kills the relay while a forward
// waits for the local process: after the restart, that attempt is recorded
// as failed instead of pending forever.
func TestForwardsLeftOpenByACrashAreFailed(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
	}))
	defer local.Close()
	defer close(release)
	rig := startProxyRig(t, local.Config.Handler, false)
	r := rig.r
	go func() {
		_, _ = r.TrySendRaw(harness.RawRequest{Method: "POST", Target: "/slow", Host: r.AddressHost(rig.ep.ID)})
	}()
	select {
	case <-arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("the forward never reached the local process")
	}
	// The forward may reach the agent while the delivery's record is still
	// on its way to disk (the sender is answered only once it is there):
	// killed before, the relay rightly loses a request it never answered.
	// What this test is about is an attempt the log holds open, so it
	// waits for the views to show one before the kill.
	slow := func() (d proxied) {
		for _, h := range endpointHistory(t, r, rig.acct.Token, rig.ep.ID) {
			if h.Path == "/slow" {
				d = h
			}
		}
		return d
	}
	harness.Eventually(t, 15*time.Second, "the open attempt in the history", func() bool {
		d := slow()
		return len(d.Attempts) == 1 && d.Attempts[0].Status == nil
	})
	r.Kill(t)
	r.Restart(t)
	// The restart appends the failure; the views show it once they reach it.
	var d proxied
	harness.Eventually(t, 15*time.Second, "the attempt's outcome after the restart", func() bool {
		d = slow()
		return len(d.Attempts) == 1 && d.Attempts[0].Status != nil
	})
	if len(d.Attempts) != 1 || d.Attempts[0].Status == nil || *d.Attempts[0].Status != 503 ||
		d.Attempts[0].Error == nil || *d.Attempts[0].Error != "relay restarted before the local answer" {
		t.Fatalf("attempt after the crash: %+v (status %s, error %s)", d.Attempts, statusOf(d), errOf(d))
	}
	if d.ResponseStatus == nil || *d.ResponseStatus != 503 {
		t.Errorf("responseStatus %v, want 503", d.ResponseStatus)
	}
	explained(t, r, rig.acct.Token, d.ID, 503, []string{"Recorded 503 by the relay", "the relay stopped while attempt 1 waited for the local answer",
		"the sender got no answer from it"}, []string{"failed with 503", "relay restarted before the local answer"})
}

func statusOf(d proxied) string {
	if len(d.Attempts) == 0 {
		return "none"
	}
	return intp(d.Attempts[0].Status)
}

func errOf(d proxied) string {
	if len(d.Attempts) == 0 {
		return "none"
	}
	return strp(d.Attempts[0].Error)
}
