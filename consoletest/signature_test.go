package consoletest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestSignatureBadge: relay listen --verify checks each request's provider
// signature on the developer's machine; the verdict it reports shows on
// the attempt in the console, a valid one as such and a forged one as a
// warning with its reason.
func TestSignatureBadge(t *testing.T) {
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(local.Close)
	_, port, _ := strings.Cut(strings.TrimPrefix(local.URL, "http://"), ":")
	token := signUp(t, "Verify")
	id := proxyEndpoint(t, token, "gh", "localhost:"+port)

	home := t.TempDir()
	harness.StartWith(t, harness.Command{Dir: home, Env: []string{
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "NO_COLOR=1",
		"RELAY_SERVER=", "RELAY_TOKEN=" + token, "RELAY_VERIFY_SECRET=s3cret",
	}}, "listen", port, id, "--server", srv.BareURL(), "--verify", "github")
	waitAgent(t, token, id)

	body := []byte(`{"action":"opened"}`)
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write(body)
	send(t, id, http.MethodPost, "/signed", http.Header{"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(m.Sum(nil))}}, body)
	send(t, id, http.MethodPost, "/forged", http.Header{"X-Hub-Signature-256": {"sha256=" + strings.Repeat("0", 64)}}, body)

	p := newPage(t, 1280, 800)
	p.openEndpoint(token, id)
	for _, tt := range []struct{ path, text, class string }{
		{"/signed", "signature github valid", "badge-ok"},
		{"/forged", "signature github invalid (the signature does not match)", "badge-warn"},
	} {
		p.openRow(tt.path)
		// The verdict follows the answer: the pane shows it once recorded.
		p.waitFor("the verdict of "+tt.path, `document.querySelector('.detail [data-testid=attempt-signature]')`)
		if got := strings.TrimSpace(p.text(`.detail [data-testid=attempt-signature]`)); got != tt.text {
			t.Errorf("%s: badge %q, want %q", tt.path, got, tt.text)
		}
		if !eval[bool](p, `document.querySelector('.detail [data-testid=attempt-signature]').classList.contains('`+tt.class+`')`) {
			t.Errorf("%s: the badge is not %s", tt.path, tt.class)
		}
	}
}
