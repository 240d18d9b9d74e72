package systemtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestSendersCannotDriveTheTerminal: a webhook's path, headers and body
// are anyone's bytes. `relay listen --print-headers --print-body`,
// `relay deliveries show --body` and `relay deliveries list` print them
// with escape sequences and other control characters escaped, so a sender
// cannot clear, retitle or rewrite the developer's terminal; the body still
// reaches the local server byte for byte.
func TestSendersCannotDriveTheTerminal(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	seen, port := recordingTarget(t)
	project := filepath.Join(h.dir, "shop")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	listen := h.startIn(t, project, "listen", port, "--print-headers", "--print-body")
	id := waitOutput(t, listen, publicURLLine)[1]
	waitAgent(t, r, acct.Token, id, true) // the relay registers the agent as it reads its subscription

	body := "{\"title\":\"\x1b]0;owned\x07\",\"clear\":\"\x1b[2J\"}"
	resp := send(t, r, id, "POST", "/hook?f=\u202egnp.exe", [][2]string{{"X-Note", "a\u202eb"}}, []byte(body))
	if resp.Status != 200 {
		t.Fatalf("sender got %d, want the local 200", resp.Status)
	}
	if got := seen.last(t); string(got.Body) != body {
		t.Fatalf("local server got %q, want the body as sent", got.Body)
	}
	out := waitOutput(t, listen, regexp.MustCompile(`(?s)POST /hook\?f=\\u202egnp\.exe → 200.*"clear":"\\x1b\[2J"\}`))[0]
	if !strings.Contains(out, `X-Note: a\u202eb`) {
		t.Errorf("listen printed %q, want the header with its bidi override escaped", out)
	}

	d := deliveryAt(t, r, acct.Token, id, "/hook?f=\u202egnp.exe")
	shown, code := h.run(t, "", "deliveries", "show", d.ID, "--body")
	if code != 0 || !strings.Contains(shown, `"title":"\x1b]0;owned\x07"`) {
		t.Fatalf("deliveries show exited %d:\n%q", code, shown)
	}
	listed, code := h.run(t, "", "deliveries", "list", id)
	if code != 0 || !strings.Contains(listed, `/hook?f=\u202egnp.exe`) {
		t.Fatalf("deliveries list exited %d:\n%q", code, listed)
	}
	for what, s := range map[string]string{"listen": listen.Output(), "deliveries show": shown, "deliveries list": listed} {
		if strings.ContainsAny(s, "\x1b\x07\u202e") {
			t.Errorf("%s printed a control character a sender sent:\n%q", what, s)
		}
	}
}
