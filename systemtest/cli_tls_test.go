package systemtest

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestClientCommandsOverTLS: against an https relay whose certificate a
// private CA signed, the client commands take that CA with --ca-file (or
// RELAY_CA_FILE): login signs up, listen's agent connects over wss:// and
// forwards, and the local process is told the request came over https.
// Without the CA, login fails naming the certificate.
func TestClientCommandsOverTLS(t *testing.T) {
	t.Parallel()
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "*.localhost", "localhost")
	r := harness.StartTLS(t, "", ca, cert, key)
	server := "https://localhost:" + strconv.Itoa(r.Port)
	h := newCLIHome(t)

	out, code := h.run(t, "", "login", "--server", server, "--signup", "tls-user")
	if code != 1 || !strings.Contains(out, "certificate") {
		t.Fatalf("login without the CA exited %d, want 1 and the certificate named:\n%s", code, out)
	}
	if out, code := h.run(t, "", "login", "--server", server, "--signup", "tls-user", "--ca-file", ca.File); code != 0 {
		t.Fatalf("login --ca-file exited %d:\n%s", code, out)
	}

	seen, port := recordingTarget(t)
	project := filepath.Join(h.dir, "shop")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	c := h.command("")
	c.Dir = project
	c.Env = append(c.Env, "NO_COLOR=1", "RELAY_CA_FILE="+ca.File)
	listen := harness.StartWith(t, c, "listen", port)
	url := waitOutput(t, listen, regexp.MustCompile(`public URL (https://[a-z0-9-]+\.localhost:\d+/) →`))[1]

	resp := post(t, r.TLSClient(true), url+"hook", `{"n":1}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sender over https got %s, want the local 200", resp.Status)
	}
	got := seen.last(t)
	if proto, host := got.Header.Get("X-Forwarded-Proto"), got.Header.Get("X-Forwarded-Host"); proto != "https" || !strings.HasSuffix(url, host+"/") {
		t.Errorf("local process told X-Forwarded-Proto %q and X-Forwarded-Host %q, want https and the host of %s", proto, host, url)
	}
	waitOutput(t, listen, regexp.MustCompile(`POST /hook → 200`))
}
