package systemtest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// walkthroughCommands returns the commands of the README's Walkthrough
// section: every line of its ```sh blocks, in order.
func walkthroughCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Walkthrough\n")
	if start < 0 {
		t.Fatal("README.md has no ## Walkthrough section")
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var cmds []string
	in := false
	for _, line := range strings.Split(section, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in = true
		case in && strings.TrimSpace(line) == "```":
			in = false
		case in && strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "#"):
			cmds = append(cmds, strings.TrimSpace(line))
		}
	}
	return cmds
}

// walkthroughStep is what the test expects of a README command, found by
// its start: the output it prints (background commands: their first
// output), and what a later command reads from it for a <placeholder>.
type walkthroughStep struct {
	prefix string
	want   string // in the output; for a background command, waited for
	// after: waited for in all output once the command ran (the line the
	// listening agent prints for a request).
	after string
}

var walkthroughSteps = []walkthroughStep{
	{prefix: "relay login --server", want: "logged in to"},
	{prefix: "node -e", want: "listening on"},
	{prefix: "relay listen", want: "public URL"},
	{prefix: `curl -d '{"type":"charge.succeeded"}'`, want: "ok", after: "POST / → 200"},
	{prefix: "relay retry <delivery id> --set-header", want: "edited: set X-Debug, body (24 bytes)"},
	{prefix: "relay retry", want: "attempt 2: 200"},
	{prefix: "relay deliveries show", want: "replay with:"},
	{prefix: "relay inspector create", want: ".localhost:"},
	{prefix: "curl -d 'hello'", want: ""},
	{prefix: "relay deliveries list <endpoint> --status 5xx", want: "no deliveries"},
	{prefix: "relay deliveries list", want: "POST"},
}

// walkthroughValues are the README's <placeholders>: values the reader
// copies from what an earlier command printed.
var walkthroughValues = map[string]*regexp.Regexp{
	"<public URL>":    regexp.MustCompile(`public URL (\S+) →`),
	"<delivery id>":   regexp.MustCompile(`→ 200 \(\d+ ms\)  delivery (\S+)`),
	"<endpoint>":      regexp.MustCompile(`endpoint (\S+) \(\S+\): public URL`),
	"<inspector URL>": regexp.MustCompile(`(?m)^(http://\S+)$`),
	"<inspector id>":  regexp.MustCompile(`inspector (\S+), expires`),
}

// TestREADMEWalkthrough runs the README's Walkthrough as a new user would:
// exactly its commands, with the relay binary on PATH as `relay`, a fresh
// home folder, in a project folder, against a real relay. Two
// substitutions: the relay listens on a free port instead of 8080 (tests
// run side by side), and port 3000 becomes a free port when something
// already listens there. Commands ending in & run in the background and
// are waited for until they print their first line; <placeholders> are
// filled with what the earlier commands printed, as the reader would.
func TestREADMEWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed (apt-get install nodejs)")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (Debian: apt-get install curl)")
	}
	cmds := walkthroughCommands(t)
	if len(cmds) < 5 {
		t.Fatalf("README walkthrough has %d commands: %q", len(cmds), cmds)
	}
	r := harness.Start(t, "")
	home := t.TempDir()
	project := filepath.Join(home, "myapp")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"PATH=" + filepath.Dir(harness.Binary(t)) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"RELAY_SERVER=", "RELAY_TOKEN=", "NO_COLOR=1",
	}
	cmdEnv := harness.Command{Bin: "/bin/sh", Env: env, Dir: project}
	localPort := "3000"
	if ln, err := net.Listen("tcp", ":3000"); err != nil {
		localPort = strconv.Itoa(harness.FreePort(t))
		t.Logf("port 3000 is taken: the walkthrough's server uses %s", localPort)
	} else {
		ln.Close()
	}
	port3000 := regexp.MustCompile(`\b3000\b`)

	var output strings.Builder // everything foreground commands printed
	var background []*harness.Process
	all := func() string {
		s := output.String()
		for _, p := range background {
			s += p.Output()
		}
		return s
	}
	for _, cmd := range cmds {
		step, ok := findStep(cmd)
		if !ok {
			t.Fatalf("README walkthrough command %q has no expectation in this test: add one to walkthroughSteps", cmd)
		}
		run := strings.ReplaceAll(cmd, "localhost:8080", "localhost:"+strconv.Itoa(r.Port))
		run = port3000.ReplaceAllString(run, localPort)
		for name, re := range walkthroughValues {
			if !strings.Contains(run, name) {
				continue
			}
			var value string
			harness.Eventually(t, 15*time.Second, "a value for "+name, func() bool {
				m := re.FindStringSubmatch(all())
				if m != nil {
					value = m[1]
				}
				return m != nil
			})
			run = strings.ReplaceAll(run, name, value)
		}
		t.Logf("$ %s", run)
		if bg, ok := strings.CutSuffix(run, "&"); ok {
			p := harness.StartWith(t, cmdEnv, "-c", "exec "+strings.TrimSpace(bg))
			background = append(background, p)
			harness.Eventually(t, 20*time.Second, "`"+cmd+"` to print "+step.want, func() bool {
				return strings.Contains(p.Output(), step.want) || p.Exited()
			})
			if p.Exited() {
				t.Fatalf("`%s` ended:\n%s", cmd, p.Output())
			}
			continue
		}
		out, code := harness.RunWith(t, cmdEnv, "-c", run)
		output.WriteString(out)
		if code != 0 || !strings.Contains(out, step.want) {
			t.Fatalf("`%s` (run as %q) exited %d, want 0 and output containing %q:\n%s\nbackground output:\n%s", cmd, run, code, step.want, out, all())
		}
		if step.after != "" {
			harness.Eventually(t, 15*time.Second, "`"+step.after+"` after `"+cmd+"`", func() bool {
				return strings.Contains(all(), step.after)
			})
		}
	}
}

func findStep(cmd string) (walkthroughStep, bool) {
	for _, s := range walkthroughSteps {
		if strings.HasPrefix(cmd, s.prefix) {
			return s, true
		}
	}
	return walkthroughStep{}, false
}
