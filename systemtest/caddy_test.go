package systemtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// senderIP is where the test's senders connect to Caddy from: another
// loopback address than Caddy's own 127.0.0.1, so the sender's address
// the relay records can only have come from Caddy's X-Forwarded-For.
const senderIP = "127.0.0.2"

// caddyFront is Debian's caddy in front of a relay: https (tls internal)
// on httpsPort, plain http on httpPort, both proxying to the relay.
type caddyFront struct {
	httpsPort, httpPort int
	root                string // Caddy's local CA certificate
}

func startCaddyOn(t *testing.T, relayPort, httpsPort int) caddyFront {
	t.Helper()
	dir := t.TempDir()
	c := caddyFront{httpsPort: httpsPort, httpPort: harness.FreePort(t),
		root: filepath.Join(dir, "data", "pki", "authorities", "local", "root.crt")}
	// The http site stands for a proxy that also serves plain HTTP: it
	// tells the relay so in X-Forwarded-Proto.
	caddyfile := fmt.Sprintf(`{
	admin off
	local_certs
	skip_install_trust
	default_bind 127.0.0.1
	http_port %[2]d
	https_port %[1]d
	auto_https disable_redirects
	storage file_system %[3]s
}

*.localhost, localhost {
	tls internal
	reverse_proxy 127.0.0.1:%[4]d
}

http://*.localhost:%[2]d, http://localhost:%[2]d {
	reverse_proxy 127.0.0.1:%[4]d
}
`, c.httpsPort, c.httpPort, filepath.Join(dir, "data"), relayPort)
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	p := harness.StartWith(t, harness.Command{Bin: "caddy", Dir: dir, Env: []string{
		"HOME=" + dir, "XDG_DATA_HOME=" + filepath.Join(dir, "xdg"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "xdg-config"),
	}}, "run", "--config", path, "--adapter", "caddyfile")
	harness.Eventually(t, 30*time.Second, "Caddy to serve the relay over https", func() bool {
		if p.Exited() {
			t.Fatalf("caddy exited:\n%s", p.Output())
		}
		if pem, err := os.ReadFile(c.root); err != nil || !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return false // not written yet, or not in full
		}
		resp, err := c.client(t, true).Get(fmt.Sprintf("https://localhost:%d/healthz", c.httpsPort))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return c
}

// client connects to Caddy from senderIP, trusting Caddy's local CA.
func (c caddyFront) client(t *testing.T, h2 bool) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(c.root)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("Caddy's root certificate %s: %v", c.root, err)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(senderIP)}}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				_, port, _ := net.SplitHostPort(addr)
				return d.DialContext(ctx, network, "127.0.0.1:"+port)
			},
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			ForceAttemptHTTP2: h2,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// TestBehindCaddy: the relay behind Caddy (tls internal) with --public-url
// and --trusted-proxies: public URLs name Caddy's https origin, the
// sender's address Caddy forwards is recorded, a request Caddy marks as
// plain http gets the wrong-protocol 503, the agent connects through
// Caddy over wss://, and signed webhooks verify in the local process.
func TestBehindCaddy(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("caddy"); err != nil {
		t.Skip("caddy is not on PATH: apt-get install caddy (.ci/run does)")
	}
	httpsPort := harness.FreePort(t)
	public := "https://localhost:" + strconv.Itoa(httpsPort)
	// Per-client limits count the senders Caddy names, not Caddy: its
	// connections are not held to --max-conns-per-ip, and the anonymous
	// rate is per sender.
	r := harness.Start(t, "", "--public-url", public, "--trusted-proxies", "127.0.0.1/32",
		"--max-conns-per-ip", "2", "--anonymous-rate", "3/h,burst=3")
	c := startCaddyOn(t, r.Port, httpsPort)
	via := c.client(t, true)

	id, url := createInspector(t, r)
	if want := "https://" + id + ".localhost:" + strconv.Itoa(httpsPort) + "/"; url != want {
		t.Fatalf("inspector url %q, want %q", url, want)
	}
	resp, err := via.Post(url+"caddy?x=1", "application/json", strings.NewReader(`{"via":"caddy"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.ProtoMajor != 2 {
		t.Fatalf("through Caddy: %s %s", resp.Proto, resp.Status)
	}
	// Caddy's plain http site: Caddy says X-Forwarded-Proto: http.
	plainURL := fmt.Sprintf("http://%s.localhost:%d/caddy-plain", id, c.httpPort)
	resp, err = via.Post(plainURL, "text/plain", strings.NewReader("plain"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkWrongProtocol(t, "plain http through Caddy", resp.StatusCode, string(body), url)

	got := waitSent(t, 2, func() []sentDelivery { return inspectorSent(t, r, id) })
	for _, d := range got {
		if d.RemoteAddress == nil || *d.RemoteAddress != senderIP {
			t.Errorf("%s %s recorded from %v, want the sender %s that Caddy forwarded for", d.Method, d.Path, d.RemoteAddress, senderIP)
		}
	}
	if got[0].Path != "/caddy-plain" || got[0].ResponseStatus == nil || *got[0].ResponseStatus != http.StatusServiceUnavailable {
		t.Errorf("plain request recorded as %+v", got[0])
	}

	// The anonymous rate counts each sender behind Caddy on its own.
	for i, want := range []string{"", "", "", "RATE_LIMITED"} {
		if code := createInspectorVia(t, via, public); code != want {
			t.Fatalf("createInspector %d from %s through Caddy: %q, want %q", i+1, senderIP, code, want)
		}
	}
	other := c.client(t, true)
	other.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
		return d.DialContext(ctx, network, "127.0.0.1:"+port)
	}
	if code := createInspectorVia(t, other, public); code != "" {
		t.Errorf("createInspector from another sender through Caddy: %q", code)
	}

	// The agent through Caddy (WebSocket over TLS, Caddy's CA as
	// --ca-file), and provider signatures verified behind it.
	verifier := signatureVerifier(t)
	tn := signUpTenant(t, r, "caddy")
	ep := proxyEndpoint(t, r, tn.Token, verifier, true)
	if !strings.HasPrefix(ep.URL, "https://"+ep.ID+".localhost:"+strconv.Itoa(httpsPort)) {
		t.Errorf("endpoint url %q", ep.URL)
	}
	harness.StartWith(t, harness.Command{Env: []string{"RELAY_TOKEN=" + tn.Token}}, "agent", "--server", public,
		"--endpoint", ep.ID, "--target", verifier, "--ca-file", c.root)
	waitAgent(t, r, tn.Token, ep.ID, true)
	checkSignedWebhooks(t, via, ep.URL)
}

// createInspectorVia runs createInspector through c at base and returns
// the error code ("" when it succeeded).
func createInspectorVia(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	resp, err := c.Post(base+"/graphql", "application/json", strings.NewReader(`{"query":"mutation{ createInspector{ id } }"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out harness.GQLResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("createInspector answered %s: %v", resp.Status, err)
	}
	if len(out.Errors) > 0 {
		return out.Errors[0].Code()
	}
	return ""
}
