package systemtest

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// rawFields are the fields that carry exact bytes where text cannot.
const rawFields = `id path pathBase64 bodySize bodyUnread complete responseStatus
	headers{name value valueBase64} trailers{name value valueBase64} responseHeaders{name value valueBase64}
	attempts{ status error }`

type rawHeader struct {
	Name, Value string
	ValueBase64 *string
}

// exact is the header's value as sent: the base64 form when there is one.
func (h rawHeader) exact(t *testing.T) string {
	t.Helper()
	if h.ValueBase64 == nil {
		return h.Value
	}
	b, err := base64.StdEncoding.DecodeString(*h.ValueBase64)
	if err != nil {
		t.Fatalf("valueBase64 of %s: %v", h.Name, err)
	}
	return string(b)
}

type rawDelivery struct {
	ID              string
	Path            string
	PathBase64      *string
	BodySize        int
	BodyUnread      bool
	Complete        bool
	ResponseStatus  *int
	Headers         []rawHeader
	Trailers        []rawHeader
	ResponseHeaders []rawHeader
	Attempts        []struct {
		Status *int
		Error  *string
	}
}

// newestRaw waits for the newest answered delivery of an address (an
// inspector's or an Endpoint's) and returns it with its exact bytes.
func newestRaw(t *testing.T, r *harness.Relay, token, kind, address string) rawDelivery {
	t.Helper()
	return newestRawAt(t, r, token, kind, address, "")
}

// newestRawAt is newestRaw for a delivery to path ("" for any path).
func newestRawAt(t *testing.T, r *harness.Relay, token, kind, address, path string) rawDelivery {
	t.Helper()
	var d rawDelivery
	harness.Eventually(t, 10*time.Second, "an answered delivery of "+address+path, func() bool {
		var out map[string]*struct {
			Deliveries struct{ Nodes []rawDelivery }
		}
		r.MustGraphQL(t, token, `query($id: ID!){ `+kind+`(id: $id){ deliveries(first: 1){ nodes{ `+rawFields+` } } } }`,
			map[string]any{"id": address}, &out)
		x := out[kind]
		if x == nil || len(x.Deliveries.Nodes) == 0 || x.Deliveries.Nodes[0].ResponseStatus == nil {
			return false
		}
		d = x.Deliveries.Nodes[0]
		return path == "" || d.Path == path
	})
	return d
}

func headerOf(t *testing.T, hs []rawHeader, name string) string {
	t.Helper()
	for _, h := range hs {
		if http.CanonicalHeaderKey(h.Name) == name {
			return h.exact(t)
		}
	}
	return "<absent>"
}

// TestAgentStopsOnRefusal: a bad token and an unknown Endpoint are printed
// plainly and end the agent with exit code 2 instead of a retry loop that
// claims to be connected; the relay does not log the client's mistake as
// an error.
func TestAgentStopsOnRefusal(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	acct := signUpTenant(t, r, "owner")
	ep := proxyEndpoint(t, r, acct.Token, "127.0.0.1:9", false)
	for _, tc := range []struct {
		name, token, endpoint, hint string
	}{
		{"bad token", "not-a-token", ep.ID, "check --token"},
		{"unknown endpoint", acct.Token, unknownAddress(), "--endpoint takes an Endpoint's id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := r.StartAgent(t, tc.token, tc.endpoint, "127.0.0.1:9")
			var code int
			harness.Eventually(t, 15*time.Second, "the agent to exit", func() bool {
				var exited bool
				exited, code = a.ExitCode()
				return exited
			})
			out := a.Output()
			if code != 2 || !strings.Contains(out, "refused by") || !strings.Contains(out, tc.hint) {
				t.Errorf("exit code %d, output:\n%s\nwant 2 and a refusal naming %q", code, out, tc.hint)
			}
			if strings.Contains(out, "connected to") || strings.Contains(out, "retrying") {
				t.Errorf("a refused agent claims a connection or retries:\n%s", out)
			}
		})
	}
	if strings.Contains(r.Output(), "level=ERROR") {
		t.Errorf("the relay logged a refusal as an error:\n%s", r.Output())
	}
}

// TestSecondAgentIsToldAndCounted: a second agent on an Endpoint is told
// that another listener answers and it receives copies, and agentCount
// shows both.
func TestSecondAgentIsToldAndCounted(t *testing.T) {
	t.Parallel()
	p := startProxyRig(t, echoPath, false)
	if strings.Contains(p.agent.Output(), "note:") {
		t.Errorf("the only agent was warned:\n%s", p.agent.Output())
	}
	second := p.r.StartAgent(t, p.acct.Token, p.ep.ID, p.target)
	harness.Eventually(t, 15*time.Second, "agentCount 2", func() bool {
		var out struct{ Endpoint struct{ AgentCount int } }
		p.r.MustGraphQL(t, p.acct.Token, `query($id: ID!){ endpoint(id: $id){ agentCount } }`, map[string]any{"id": p.ep.ID}, &out)
		return out.Endpoint.AgentCount == 2
	})
	// The agent announces itself once the relay lists its session, which
	// may be a moment after agentCount shows it.
	waitOutput(t, second, regexp.MustCompile(`note: 1 other listener already serves endpoint`))
}

// TestLateLocalAnswerAfter504: an answer that comes after the relay
// answered 504 is reported as such, naming the request, not as an unknown
// Endpoint. (The agent speaks relay-agent.v3, where the relay sends that
// refusal after the agent has printed the forward.)
func TestLateLocalAnswerAfter504(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.WriteHeader(200)
	})
	p := startProxyRig(t, slow, false, "--forward-timeout", "1s")
	resp := p.send(t, "POST", "/slow", nil, nil)
	close(release)
	if resp.Status != 504 {
		t.Fatalf("status %d, want 504", resp.Status)
	}
	harness.Eventually(t, 15*time.Second, "the agent to report the late answer", func() bool {
		return strings.Contains(p.agent.Output(), "POST /slow: the relay no longer waits")
	})
	if out := p.agent.Output(); strings.Contains(out, "--endpoint takes") || strings.Contains(out, "not found") {
		t.Errorf("a late answer reads as an unknown Endpoint:\n%s", out)
	}
}

// TestNonUTF8BytesPassUnchanged: a target and header values that are not
// UTF-8 reach the local process, the record and the sender byte for byte.
func TestNonUTF8BytesPassUnchanged(t *testing.T) {
	t.Parallel()
	const target, reqValue, respValue = "/caf\xe9?q=\xff", "\xe9\xff ok", "r\xe9ponse"
	var seen requestLog
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r, nil)
		w.Header().Set("X-Reply", respValue)
		w.WriteHeader(201)
	})
	p := startProxyRig(t, h, false)
	resp := p.send(t, "POST", target, [][2]string{{"X-Latin1", reqValue}}, []byte("x"))
	if resp.Status != 201 || resp.Header.Get("X-Reply") != respValue {
		t.Fatalf("sender got %d X-Reply %q, want 201 %q", resp.Status, resp.Header.Get("X-Reply"), respValue)
	}
	got := seen.last(t)
	if got.RequestURI != target || got.Header.Get("X-Latin1") != reqValue {
		t.Errorf("local got %q X-Latin1 %q, want %q %q", got.RequestURI, got.Header.Get("X-Latin1"), target, reqValue)
	}
	d := newestRaw(t, p.r, p.acct.Token, "endpoint", p.ep.ID)
	path := d.Path
	if d.PathBase64 != nil {
		b, _ := base64.StdEncoding.DecodeString(*d.PathBase64)
		path = string(b)
	}
	if path != target {
		t.Errorf("recorded path %q (pathBase64 %v), want %q", path, strp(d.PathBase64), target)
	}
	if v := headerOf(t, d.Headers, "X-Latin1"); v != reqValue {
		t.Errorf("recorded X-Latin1 %q, want %q", v, reqValue)
	}
	if v := headerOf(t, d.ResponseHeaders, "X-Reply"); v != respValue {
		t.Errorf("recorded X-Reply %q, want %q", v, respValue)
	}
}

// TestHopByHopHeadersStayOnTheirHop: Proxy-Authorization does not reach
// the local process and Proxy-Authenticate does not reach the sender; the
// record keeps what the sender sent. A header the local answer names in
// "Connection: close, X-Hop" does not reach the sender either.
func TestHopByHopHeadersStayOnTheirHop(t *testing.T) {
	t.Parallel()
	var seen requestLog
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r, nil)
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close, X-Hop")
			w.Header().Set("X-Hop", "for the next hop only")
		}
		w.Header().Set("Proxy-Authenticate", `Basic realm="local"`)
		w.Header().Set("X-Kept", "yes")
		w.WriteHeader(200)
	})
	p := startProxyRig(t, h, false)
	resp := p.send(t, "POST", "/auth", [][2]string{{"Proxy-Authorization", "Basic c2VjcmV0"}, {"X-Sig", "s"}}, nil)
	if resp.Header.Get("Proxy-Authenticate") != "" || resp.Header.Get("X-Kept") != "yes" {
		t.Errorf("sender got Proxy-Authenticate %q X-Kept %q", resp.Header.Get("Proxy-Authenticate"), resp.Header.Get("X-Kept"))
	}
	got := seen.last(t)
	if got.Header.Get("Proxy-Authorization") != "" || got.Header.Get("X-Sig") != "s" {
		t.Errorf("local got Proxy-Authorization %q X-Sig %q", got.Header.Get("Proxy-Authorization"), got.Header.Get("X-Sig"))
	}
	d := newestRaw(t, p.r, p.acct.Token, "endpoint", p.ep.ID)
	if v := headerOf(t, d.Headers, "Proxy-Authorization"); v != "Basic c2VjcmV0" {
		t.Errorf("recorded Proxy-Authorization %q", v)
	}

	resp = p.send(t, "POST", "/close", nil, nil)
	if resp.Status != 200 || resp.Header.Get("X-Hop") != "" || resp.Header.Get("X-Kept") != "yes" {
		t.Errorf("sender got %d X-Hop %q X-Kept %q, want 200, no X-Hop, X-Kept", resp.Status, resp.Header.Get("X-Hop"), resp.Header.Get("X-Kept"))
	}
}

// TestBodySizeCountsEveryByte: an inspector counts a body past --max-body
// to its end; a PROXY 413 records the bytes it read and says the rest was
// not read.
func TestBodySizeCountsEveryByte(t *testing.T) {
	t.Parallel()
	p := startProxyRig(t, echoPath, false, "--max-body", "4KiB", "--capture-cap", "1KiB")
	body := []byte(strings.Repeat("b", 10000))

	insp, _ := createInspector(t, p.r)
	if resp := send(t, p.r, insp, "POST", "/big", nil, body); resp.Status != 204 {
		t.Fatalf("inspector answered %d", resp.Status)
	}
	d := newestRaw(t, p.r, "", "inspector", insp)
	if d.BodySize != len(body) || d.BodyUnread || d.Complete {
		t.Errorf("inspector recorded bodySize %d bodyUnread %v complete %v, want %d false false", d.BodySize, d.BodyUnread, d.Complete, len(body))
	}

	if resp := p.send(t, "POST", "/big", nil, body); resp.Status != 413 {
		t.Fatalf("proxy answered %d, want 413", resp.Status)
	}
	d = newestRaw(t, p.r, p.acct.Token, "endpoint", p.ep.ID)
	if d.BodySize != 4097 || !d.BodyUnread || d.Complete {
		t.Errorf("413 recorded bodySize %d bodyUnread %v complete %v, want 4097 (what was read) true false", d.BodySize, d.BodyUnread, d.Complete)
	}
}

// TestTrailersAreRecorded: trailer fields after a chunked body are in the
// record, byte for byte.
func TestTrailersAreRecorded(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	insp, _ := createInspector(t, r)
	conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /t HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nConnection: close\r\n\r\n"+
		"3\r\nabc\r\n0\r\nX-Sum: caf\xe9\r\n\r\n", r.AddressHost(insp))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 204 {
		t.Fatalf("answered %d", resp.StatusCode)
	}
	d := newestRaw(t, r, "", "inspector", insp)
	if v := headerOf(t, d.Trailers, "X-Sum"); v != "caf\xe9" || d.BodySize != 3 {
		t.Errorf("trailer X-Sum %q, bodySize %d; want %q, 3", v, d.BodySize, "caf\xe9")
	}
}

// TestBadGatewayTextsNameOnlyTheTarget: the sender's 502 text is stable and
// names the target, never a local socket; the attempt keeps the detail.
func TestBadGatewayTextsNameOnlyTheTarget(t *testing.T) {
	t.Parallel()
	hangUp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, as a crashing process gives
			}
			c.Close()
		}
	})
	p := startProxyRig(t, hangUp, false)
	resp := p.send(t, "POST", "/reset", nil, nil)
	want := "Bad Gateway: the local target " + p.target + " closed the connection\n"
	if resp.Status != 502 || string(resp.Body) != want {
		t.Errorf("sender got %d %q, want 502 %q", resp.Status, resp.Body, want)
	}
	d := newestRaw(t, p.r, p.acct.Token, "endpoint", p.ep.ID)
	if len(d.Attempts) != 1 || d.Attempts[0].Error == nil || !strings.Contains(*d.Attempts[0].Error, "closed the connection: ") {
		t.Errorf("attempt error %+v, want the detail after the stable text", d.Attempts)
	}

	// Nothing listening: the agent forwards to a port that is closed.
	closed := harness.ClosedPort(t)
	target := "127.0.0.1:" + strconv.Itoa(closed)
	ep := proxyEndpoint(t, p.r, p.acct.Token, target, false)
	startAgentFor(t, p.r, p.acct.Token, ep.ID, target)
	resp = send(t, p.r, ep.ID, "POST", "/none", nil, nil)
	if want := "Bad Gateway: nothing listening on " + target + "\n"; resp.Status != 502 || string(resp.Body) != want {
		t.Errorf("sender got %d %q, want 502 %q", resp.Status, resp.Body, want)
	}
}

// TestInvalidPercentEncodingIsADelivery: "/%zz" is recorded byte for byte
// and answered like any request (204 from an inspector), and a PROXY
// Endpoint forwards it as sent.
func TestInvalidPercentEncodingIsADelivery(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	insp, _ := createInspector(t, r)
	for _, target := range []string{"/%zz", "/a%2?q=%zz", "/ok%20/%G1"} {
		resp := send(t, r, insp, "POST", target, nil, []byte("x"))
		if resp.Status != 204 {
			t.Fatalf("%s: inspector answered %d %q, want 204", target, resp.Status, resp.Body)
		}
		newestRawAt(t, r, "", "inspector", insp, target) // recorded byte for byte
	}

	lines := make(chan string, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		line, _ := br.ReadString('\n')
		lines <- line
		for l, err := br.ReadString('\n'); err == nil && l != "\r\n"; l, err = br.ReadString('\n') {
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	}()
	local := ln.Addr().String()
	acct := signUpTenant(t, r, "owner")
	ep := proxyEndpoint(t, r, acct.Token, local, false)
	startAgentFor(t, r, acct.Token, ep.ID, local)
	if resp := send(t, r, ep.ID, "GET", "/%zz", nil, nil); resp.Status != 200 {
		t.Fatalf("proxy answered %d %q, want the local 200", resp.Status, resp.Body)
	}
	if line := <-lines; line != "GET /%zz HTTP/1.1\r\n" {
		t.Errorf("local request line %q, want GET /%%zz", line)
	}
}
