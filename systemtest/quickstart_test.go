package systemtest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// Bounds of the README's quick start: the commands from nothing to a
// forwarded webhook, and none of them may edit PATH.
const (
	maxTeamCommands      = 2 // joining a team's relay: npx … listen, and at most one more
	maxSelfHostCommands  = 4 // self-hosting from a clone
	quickStartSection    = "\n## Quick start"
	quickStartLocalReply = "ok from your server"
)

// quickStartBlocks returns the commands of the README's Quick start
// section, one slice per ```sh block: the team story, then the clone's.
func quickStartBlocks(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, quickStartSection)
	if start < 0 {
		t.Fatal("README.md has no ## Quick start section")
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var blocks [][]string
	in := false
	for _, line := range strings.Split(section, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case !in && l == "```sh":
			in = true
			blocks = append(blocks, nil)
		case in && l == "```":
			in = false
		case in && l != "" && !strings.HasPrefix(l, "#"):
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], l)
		}
	}
	if len(blocks) != 2 {
		t.Fatalf("README's Quick start has %d sh blocks, want 2 (a team's relay, then your own): %q", len(blocks), blocks)
	}
	return blocks
}

// checkQuickStart fails when a story takes more than max commands or
// edits PATH.
func checkQuickStart(t *testing.T, story string, cmds []string, max int) {
	t.Helper()
	if len(cmds) == 0 || len(cmds) > max {
		t.Errorf("%s takes %d commands, want 1 to %d: %q", story, len(cmds), max, cmds)
	}
	for _, c := range cmds {
		if strings.Contains(c, "PATH") {
			t.Errorf("%s edits PATH: %q", story, c)
		}
	}
}

// yourServer is the reader's server on a free port (instead of 3000:
// tests run side by side), answering every request.
func yourServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, quickStartLocalReply)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

var (
	port3000       = regexp.MustCompile(`\b3000\b`)
	quickPublicURL = regexp.MustCompile(`public URL (\S+) →`)
	quickServing   = regexp.MustCompile(`\brelay (serve|listen)\b`)
)

// TestQuickStartSelfHost runs the README's second story as written, in a
// fresh home and an empty folder: `go run ./cmd/relay` is the relay
// binary the tests built (the same program, compiled once), the relay
// listens on a free port (RELAY_LISTEN, and RELAY_SERVER for the client,
// instead of 8080) and port 3000 is a free port. Commands that serve
// (serve, listen) run in the background, as in terminals of their own.
func TestQuickStartSelfHost(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (Debian: apt-get install curl)")
	}
	cmds := quickStartBlocks(t)[1]
	checkQuickStart(t, "self-hosting from a clone", cmds, maxSelfHostCommands)

	home := t.TempDir()
	clone := filepath.Join(home, "relay")
	if err := os.Mkdir(clone, 0o755); err != nil {
		t.Fatal(err)
	}
	relayPort := harness.FreePort(t)
	local := yourServer(t)
	env := harness.Command{Bin: "/bin/sh", Dir: clone, Env: []string{
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"RELAY_LISTEN=127.0.0.1:" + strconv.Itoa(relayPort), "RELAY_SERVER=http://localhost:" + strconv.Itoa(relayPort),
		"RELAY_TOKEN=", "NO_COLOR=1",
	}}
	var listen *harness.Process
	for _, cmd := range cmds {
		run := strings.ReplaceAll(cmd, "go run ./cmd/relay", harness.Binary(t))
		run = port3000.ReplaceAllString(run, local)
		if strings.Contains(run, "<public URL>") {
			if listen == nil {
				t.Fatalf("%q needs a public URL, and no relay listen ran before it", cmd)
			}
			m := waitOutput(t, listen, quickPublicURL)
			run = strings.ReplaceAll(run, "<public URL>", m[1])
		}
		t.Logf("$ %s", run)
		// What the command runs, without its comment: serve and listen
		// stay, as in terminals of their own.
		verb := ""
		if m := quickServing.FindStringSubmatch(strings.SplitN(cmd, " #", 2)[0]); m != nil {
			verb = m[1]
		}
		switch verb {
		case "serve":
			serve := harness.StartWith(t, env, "-c", "exec "+run)
			harness.Eventually(t, 30*time.Second, "the relay to answer", func() bool {
				resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(relayPort) + "/readyz")
				if err == nil {
					resp.Body.Close()
				}
				return (err == nil && resp.StatusCode == http.StatusOK) || serve.Exited()
			})
			if serve.Exited() {
				t.Fatalf("`%s` ended:\n%s", cmd, serve.Output())
			}
		case "listen":
			listen = harness.StartWith(t, env, "-c", "exec "+run)
			waitOutput(t, listen, quickPublicURL)
		default:
			out, code := harness.RunWith(t, env, "-c", run)
			if code != 0 || !strings.Contains(out, quickStartLocalReply) {
				t.Fatalf("`%s` exited %d, want your server's answer %q:\n%s", cmd, code, quickStartLocalReply, out)
			}
			harness.Eventually(t, 15*time.Second, "relay listen to print the forwarded request", func() bool {
				return strings.Contains(listen.Output(), "POST / → 200")
			})
		}
	}
	if listen == nil || !strings.Contains(listen.Output(), "POST / → 200") {
		t.Fatal("the story forwarded no webhook")
	}
}

// TestQuickStartTeam runs the README's first story as far as a test can:
// the team's relay (sign-up closed: the operator made the account), the
// command as written with the relay binary for `npx @relayhq/relay` (the
// npm package's own test, npm_test.go, runs that binary through npx) and
// the test relay's URL for https://relay.example.com, on a terminal
// (script(1)) where the reader answers yes to logging in through the
// browser; the approval is the team member's, through the API the
// console's /device page calls.
func TestQuickStartTeam(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) is not installed (Debian: apt-get install bsdutils)")
	}
	cmds := quickStartBlocks(t)[0]
	checkQuickStart(t, "joining a team's relay", cmds, maxTeamCommands)

	r := harness.Start(t, "", "--signup", "closed", "--admin-token", "ops-secret")
	out, code := harness.RunCLI(t, "accounts", "create", "--name", "team", "--server", r.BareURL(), "--admin-token", "ops-secret")
	m := regexp.MustCompile(`(?m)^token (\S+)$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("relay accounts create exited %d:\n%s", code, out)
	}
	teamToken := m[1]
	local := yourServer(t)
	home := t.TempDir()

	run := strings.ReplaceAll(cmds[0], "npx @relayhq/relay", harness.Binary(t))
	run = strings.ReplaceAll(run, "https://relay.example.com", r.BareURL())
	run = port3000.ReplaceAllString(run, local)
	t.Logf("$ %s", run)
	c := exec.Command(script, "-qfec", run, "/dev/null")
	c.Dir = home
	c.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "RELAY_SERVER=", "RELAY_TOKEN=", "NO_COLOR=1")
	c.Stdin = strings.NewReader("y\n")
	var buf syncBuf
	c.Stdout, c.Stderr = &buf, &buf
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // script and the relay under it: one group to stop
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	waitFor := func(what string, re *regexp.Regexp) []string {
		t.Helper()
		var got []string
		harness.Eventually(t, 30*time.Second, what, func() bool {
			got = re.FindStringSubmatch(buf.String())
			return got != nil || exited()
		})
		if got == nil {
			t.Fatalf("`%s` ended before %s:\n%s", cmds[0], what, buf.String())
		}
		return got
	}
	waitFor("the offer to log in", regexp.MustCompile(`Log in through the browser\?`))
	code2 := waitFor("the device code", regexp.MustCompile(`shows the code ([A-Z]{4}-[A-Z]{4})`))[1]
	var ok struct{ ApproveDevice struct{ Status string } }
	r.MustGraphQL(t, teamToken, `mutation($c: String!){ approveDevice(userCode: $c){ status } }`, map[string]any{"c": code2}, &ok)
	pub := waitFor("the public URL", regexp.MustCompile(`endpoint \S+ \((\S+)\): public URL`))[1]
	resp := send(t, r, pub, "POST", "/", nil, []byte(`{"type":"charge.succeeded"}`))
	if resp.Status != http.StatusOK || string(resp.Body) != quickStartLocalReply {
		t.Fatalf("the webhook got %d %q, want your server's answer:\n%s", resp.Status, resp.Body, buf.String())
	}
	if !strings.Contains(buf.String(), "token stored in") {
		t.Errorf("the login was not stored:\n%s", buf.String())
	}
}

// syncBuf is a bytes.Buffer safe for a process's writes and the test's reads.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
