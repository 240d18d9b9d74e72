package systemtest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// localSeen is what a local process behind the agent saw.
type localSeen struct {
	Host   string
	Header http.Header
	Body   string
}

// localRecorder is a local process that answers 200 and keeps what it saw.
func localRecorder(t *testing.T) (target string, seen func() []localSeen) {
	t.Helper()
	var mu sync.Mutex
	var all []localSeen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		all = append(all, localSeen{Host: r.Host, Header: r.Header.Clone(), Body: string(b)})
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), func() []localSeen {
		mu.Lock()
		defer mu.Unlock()
		return append([]localSeen(nil), all...)
	}
}

// sentDelivery is a recorded delivery with the sender's address.
type sentDelivery struct {
	Method         string
	Path           string
	Headers        []header
	Body           *string
	ResponseStatus *int
	RemoteAddress  *string
}

const sentFields = `method path headers{name value} body responseStatus remoteAddress`

func inspectorSent(t *testing.T, r *harness.Relay, id string) []sentDelivery {
	t.Helper()
	var out struct {
		Inspector struct {
			Deliveries struct{ Nodes []sentDelivery }
		}
	}
	r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ deliveries(first: 10){ nodes{ `+sentFields+` } } } }`, map[string]any{"id": id}, &out)
	return out.Inspector.Deliveries.Nodes
}

func endpointSent(t *testing.T, r *harness.Relay, token, id string) []sentDelivery {
	t.Helper()
	var out struct {
		Endpoint struct {
			Deliveries struct{ Nodes []sentDelivery }
		}
	}
	r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ deliveries(first: 10){ nodes{ `+sentFields+` } } } }`, map[string]any{"id": id}, &out)
	return out.Endpoint.Deliveries.Nodes
}

// waitSent polls read until it lists want deliveries: the history is a
// view, which shows a delivery a moment after its answer.
func waitSent(t *testing.T, want int, read func() []sentDelivery) []sentDelivery {
	t.Helper()
	var got []sentDelivery
	harness.Eventually(t, 10*time.Second, fmt.Sprintf("%d deliveries in the history", want), func() bool {
		got = read()
		return len(got) >= want
	})
	if len(got) != want {
		t.Fatalf("%d deliveries recorded, want %d: %+v", len(got), want, got)
	}
	return got
}

// startTLSAgent runs the real agent against the relay's https URL,
// trusting the test's CA through --ca-file.
func startTLSAgent(t *testing.T, r *harness.Relay, ca *harness.CA, token, endpointID, target string, extra ...string) *harness.Agent {
	t.Helper()
	args := append([]string{"agent", "--server", r.BareURL(), "--endpoint", endpointID, "--target", target, "--ca-file", ca.File}, extra...)
	a := harness.StartWith(t, harness.Command{Env: []string{"RELAY_TOKEN=" + token}}, args...)
	waitAgent(t, r, token, endpointID, true)
	return a
}

func post(t *testing.T, c *http.Client, url, body string, headers ...[2]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	resp.Body.Close()
	return resp
}

// TestTLS: `relay serve --tls-cert --tls-key` with a wildcard certificate
// for *.localhost and localhost: https addresses over HTTP/1.1 and h2
// recorded alike, plain HTTP on the TLS port and on --http-listen
// recorded and answered with the wrong-protocol 503, the console
// redirected to https, the agent over wss:// with --ca-file, and the local
// process told the public host and scheme.
func TestTLS(t *testing.T) {
	t.Parallel()
	ca := harness.NewCA(t)
	certDir := t.TempDir()
	cert, key := ca.Issue(t, certDir, 1, "*.localhost", "localhost")
	plainPort := harness.FreePort(t)
	r := harness.StartTLS(t, "", ca, cert, key, "--http-listen", "127.0.0.1:"+strconv.Itoa(plainPort), "--max-header-bytes", "8KiB")
	port := strconv.Itoa(r.Port)

	id, url := createInspector(t, r)
	if want := "https://" + id + ".localhost:" + port + "/"; url != want {
		t.Fatalf("inspector url %q, want %q", url, want)
	}

	// The same request over HTTP/1.1 and h2.
	h1, h2 := r.TLSClient(false), r.TLSClient(true)
	for _, c := range []struct {
		client *http.Client
		proto  int
	}{{h1, 1}, {h2, 2}} {
		resp := post(t, c.client, url+"hook?x=1", `{"n":1}`, [2]string{"Content-Type", "application/json"}, [2]string{"User-Agent", "sender/1"}, [2]string{"X-Sig", "abc"})
		if resp.StatusCode != http.StatusNoContent || resp.ProtoMajor != c.proto {
			t.Fatalf("HTTP/%d sender: %s over %s", c.proto, resp.Status, resp.Proto)
		}
	}
	// --max-header-bytes holds over TLS, on HTTP/1.1 and h2 (where the
	// relay advertises it, and Go's client refuses to send more).
	for _, c := range []*http.Client{h1, h2} {
		req, _ := http.NewRequest(http.MethodPost, url+"big-header", nil)
		req.Header.Set("X-Big", strings.Repeat("b", 20<<10))
		resp, err := c.Do(req)
		if err != nil && strings.Contains(err.Error(), "larger than peer's advertised limit") {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("a 20 KiB header over %s: %s, want 431", resp.Proto, resp.Status)
		}
	}
	// Plain HTTP on the TLS port, and on --http-listen.
	plain := r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/hook?x=1", Host: id + ".localhost:" + port, Body: []byte(`{"n":1}`),
		Headers: [][2]string{{"Content-Type", "application/json"}}})
	checkWrongProtocol(t, "plain HTTP on the TLS port", plain.Status, string(plain.Body), url)
	req, _ := http.NewRequest(http.MethodPut, "http://"+id+".localhost:"+strconv.Itoa(plainPort)+"/other", strings.NewReader("z"))
	req.URL.Host = "127.0.0.1:" + strconv.Itoa(plainPort)
	req.Host = id + ".localhost:" + strconv.Itoa(plainPort)
	resp, err := harness.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkWrongProtocol(t, "--http-listen", resp.StatusCode, string(b), url)

	got := waitSent(t, 4, func() []sentDelivery { return inspectorSent(t, r, id) })
	overH1, overH2, overPlain := got[3], got[2], got[1]
	for _, d := range got {
		if d.RemoteAddress == nil || !strings.HasPrefix(*d.RemoteAddress, "127.0.0.1:") {
			t.Errorf("remoteAddress %v, want the sender's 127.0.0.1:port", d.RemoteAddress)
		}
	}
	overH1.RemoteAddress, overH2.RemoteAddress = nil, nil // the sender's port differs
	if !reflect.DeepEqual(overH1, overH2) {
		t.Errorf("recorded over h2:\n%+v\nover HTTP/1.1:\n%+v", overH2, overH1)
	}
	if overH1.Method != "POST" || overH1.Path != "/hook?x=1" || overH1.Body == nil || *overH1.Body != `{"n":1}` {
		t.Errorf("recorded %+v", overH1)
	}
	if overPlain.ResponseStatus == nil || *overPlain.ResponseStatus != 503 || overPlain.Path != "/hook?x=1" || *overPlain.Body != `{"n":1}` {
		t.Errorf("plain request recorded as %+v, want it with its 503", overPlain)
	}
	if got[0].ResponseStatus == nil || *got[0].ResponseStatus != 503 || got[0].Method != "PUT" {
		t.Errorf("--http-listen request recorded as %+v", got[0])
	}
	// Why: through the API, and the command line over https.
	explainedPlain := 0
	for _, d := range history(t, r, id, 10) {
		if d.ResponseStatus != nil && *d.ResponseStatus == 503 {
			explained(t, r, "", d.ID, 503, []string{"Answered 503 by the relay", "came over plain HTTP to an address served over https only"},
				[]string{`recorded reason: "wrong protocol: plain HTTP"`}, "--ca-file", ca.File)
			explainedPlain++
		}
	}
	if explainedPlain != 2 {
		t.Errorf("explained %d plain-HTTP deliveries, want 2", explainedPlain)
	}

	// The console and API over plain HTTP are sent to https; health
	// probes answer there.
	req, _ = http.NewRequest(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(plainPort)+"/i/"+id, nil)
	req.Host = "localhost:" + strconv.Itoa(plainPort)
	resp, err = harness.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := "https://localhost:" + port + "/i/" + id; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Errorf("console over plain HTTP: %s to %q, want 308 to %q", resp.Status, resp.Header.Get("Location"), want)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(plainPort)+"/healthz", nil)
	req.Host = "localhost"
	if resp, err = harness.Client.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("healthz over plain HTTP: %v %v", resp, err)
	}
	resp.Body.Close()

	// The agent over wss:// with --ca-file, a PROXY Endpoint, an h2 sender.
	tn := signUpTenant(t, r, "tls")
	target, seen := localRecorder(t)
	ep := proxyEndpoint(t, r, tn.Token, target, false)
	if want := "https://" + ep.ID + ".localhost:" + port + "/"; ep.URL != want {
		t.Errorf("endpoint url %q, want %q", ep.URL, want)
	}
	startTLSAgent(t, r, ca, tn.Token, ep.ID, target)
	resp = post(t, h2, ep.URL+"hook", "payload", [2]string{"X-Forwarded-For", "10.9.8.7"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("proxied over h2: %s", resp.Status)
	}
	local := seen()
	if len(local) != 1 {
		t.Fatalf("local process saw %d requests", len(local))
	}
	h := local[0].Header
	publicHost := ep.ID + ".localhost:" + port
	if h.Get("X-Forwarded-Proto") != "https" || h.Get("X-Forwarded-Host") != publicHost || local[0].Host != target ||
		!strings.HasPrefix(h.Get("X-Forwarded-For"), "10.9.8.7, 127.0.0.1") ||
		h.Get("Forwarded") != "for=127.0.0.1;host=\""+publicHost+"\";proto=https" || local[0].Body != "payload" {
		t.Errorf("local process saw Host %q and %v", local[0].Host, h)
	}
	// --host-header preserve: the public host as Host.
	target2, seen2 := localRecorder(t)
	ep2 := proxyEndpoint(t, r, tn.Token, target2, false)
	startTLSAgent(t, r, ca, tn.Token, ep2.ID, target2, "--host-header", "preserve")
	if resp := post(t, h1, ep2.URL+"preserved", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("proxied with --host-header preserve: %s", resp.Status)
	}
	if local := seen2(); len(local) != 1 || local[0].Host != ep2.ID+".localhost:"+port {
		t.Errorf("with --host-header preserve the local process saw %+v, want Host %s.localhost:%s", local, ep2.ID, port)
	}

	recorded := waitSent(t, 1, func() []sentDelivery { return endpointSent(t, r, tn.Token, ep.ID) })
	for _, hd := range recorded[0].Headers {
		if strings.EqualFold(hd.Name, "X-Forwarded-For") && hd.Value != "10.9.8.7" || strings.EqualFold(hd.Name, "X-Forwarded-Proto") ||
			strings.EqualFold(hd.Name, "X-Forwarded-Host") || strings.EqualFold(hd.Name, "Forwarded") {
			t.Errorf("the recorded delivery has %s: %s, which only the agent adds", hd.Name, hd.Value)
		}
	}
}

func checkWrongProtocol(t *testing.T, what string, status int, body, url string) {
	t.Helper()
	lines := strings.Split(body, "\n")
	if status != http.StatusServiceUnavailable || lines[0] != "No agent for client" || len(lines) < 2 ||
		!strings.Contains(lines[1], "needs https") || !strings.Contains(lines[1], url) {
		t.Errorf("%s: %d %q, want 503 with the wrong-protocol lines", what, status, body)
	}
}

// serial is the serial number of the certificate a new TLS client gets.
func serial(t *testing.T, r *harness.Relay) string {
	t.Helper()
	c, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), &tls.Config{RootCAs: r.ClientTLS().RootCAs, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestTLSCertificateReload: a renewed certificate reaches new clients
// without a restart, when its files change and on SIGHUP, while a
// connection opened before keeps working with the old one.
func TestTLSCertificateReload(t *testing.T) {
	t.Parallel()
	ca := harness.NewCA(t)
	dir := t.TempDir()
	cert, key := ca.Issue(t, dir, 1, "*.localhost", "localhost")
	// Files checked every 200ms; the SIGHUP part below uses another relay
	// that never polls.
	r := harness.StartTLS(t, "", ca, cert, key, "--tls-reload-interval", "200ms")
	if s := serial(t, r); s != "1" {
		t.Fatalf("serial %s, want 1", s)
	}
	open, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	ca.Issue(t, dir, 2, "*.localhost", "localhost")
	harness.Eventually(t, 10*time.Second, "new clients to get serial 2", func() bool { return serial(t, r) == "2" })
	// The connection opened before still works, with its certificate.
	fmt.Fprintf(open, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
	line, err := bufio.NewReader(open).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") || open.ConnectionState().PeerCertificates[0].SerialNumber.String() != "1" {
		t.Errorf("open connection after the reload: %q %v", line, err)
	}
	// A renewal for another name is refused and the current one kept.
	ca.Issue(t, dir, 3, "other.example")
	harness.Eventually(t, 10*time.Second, "the refused reload to be logged", func() bool {
		return strings.Contains(r.Output(), "TLS certificate not reloaded")
	})
	if s := serial(t, r); s != "2" {
		t.Errorf("serial %s after a renewal for another name, want 2", s)
	}

	t.Run("SIGHUP", func(t *testing.T) {
		dir := t.TempDir()
		cert, key := ca.Issue(t, dir, 10, "*.localhost", "localhost")
		r := harness.StartTLS(t, "", ca, cert, key, "--tls-reload-interval", "1h")
		ca.Issue(t, dir, 11, "*.localhost", "localhost")
		if s := serial(t, r); s != "10" {
			t.Fatalf("serial %s before SIGHUP, want 10", s)
		}
		if err := syscall.Kill(r.PID(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 10*time.Second, "serial 11 after SIGHUP", func() bool { return serial(t, r) == "11" })
	})
}

// TestTLSRefusesACertificateThatDoesNotCover: a certificate without
// *.<domain> stops the start with a message saying what is missing.
func TestTLSRefusesACertificateThatDoesNotCover(t *testing.T) {
	t.Parallel()
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "localhost", "ep1.localhost")
	out, code := harness.RunCLI(t, "serve", "--listen", "127.0.0.1:"+strconv.Itoa(harness.FreePort(t)), "--data", t.TempDir(),
		"--tls-cert", cert, "--tls-key", key)
	if code == 0 || !strings.Contains(out, "does not cover *.localhost") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// TestTLSHandshakeSlowloris: connections that open a TLS handshake and
// stall count against --max-conns-per-ip while they wait, and are cut off
// at --tls-handshake-timeout, freeing their slots.
func TestTLSHandshakeSlowloris(t *testing.T) {
	t.Parallel()
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "*.localhost", "localhost")
	const perIP = 4
	r := harness.StartTLS(t, "", ca, cert, key, "--tls-handshake-timeout", "1s", "--max-conns-per-ip", strconv.Itoa(perIP))
	r.CloseIdleConnections()
	const n = perIP + 3
	results := make(chan string, n)
	for range n {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.Port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00}) // a ClientHello's record header, and nothing more
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			b, err := io.ReadAll(c)
			var ne net.Error
			switch {
			case strings.HasPrefix(string(b), "HTTP/1.1 429"):
				results <- "refused"
			case len(b) == 0 && (err == nil || !(errors.As(err, &ne) && ne.Timeout())):
				results <- "closed" // EOF or reset from the server
			default:
				results <- fmt.Sprintf("other: %q %v", b, err)
			}
		}()
	}
	counts := map[string]int{}
	for range n {
		counts[<-results]++
	}
	// The harness's health probe may still hold a slot as the stalls
	// begin: at least n-perIP are refused, the rest are cut off.
	if counts["refused"] < n-perIP || counts["refused"]+counts["closed"] != n {
		t.Errorf("stalled handshakes ended as %v; want at least %d refused over the cap and the rest closed by the server", counts, n-perIP)
	}
	// Their slots are free again: a real client gets through.
	harness.Eventually(t, 10*time.Second, "a TLS client to get through", func() bool {
		c, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"})
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// TestAgentWithoutTheCA: an agent that does not trust the relay's CA says
// so and what to give it.
func TestAgentWithoutTheCA(t *testing.T) {
	t.Parallel()
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "*.localhost", "localhost")
	r := harness.StartTLS(t, "", ca, cert, key)
	tn := signUpTenant(t, r, "noca")
	ep := proxyEndpoint(t, r, tn.Token, "127.0.0.1:9", false)
	a := harness.StartWith(t, harness.Command{Env: []string{"RELAY_TOKEN=" + tn.Token, "SSL_CERT_FILE=", "RELAY_CA_FILE="}},
		"agent", "--server", r.BareURL(), "--endpoint", ep.ID, "--target", "127.0.0.1:9")
	harness.Eventually(t, 15*time.Second, "the agent to name --ca-file", func() bool {
		return strings.Contains(a.Output(), "give it with --ca-file")
	})
}
