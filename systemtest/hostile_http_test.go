package systemtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/systemtest/harness"
)

// Tests of the relay's HTTP server against clients that hold connections,
// declare more than they send, stall or send too much. Each shows a guard
// of `relay serve` that fails the test when removed.

// clientBound is how long a test's client waits for the relay to end a
// connection before it decides the relay never will; the relay's limits in
// these tests are a second or two, far below it.
const clientBound = 15 * time.Second

// dialFrom opens a TCP connection to the relay from a loopback source
// address of the test's choosing (127.0.0.0/8 is all loopback on Linux), so
// one test can be several clients.
func dialFrom(t *testing.T, r *harness.Relay, source string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	if source != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	c, err := d.Dial("tcp", "127.0.0.1:"+strconv.Itoa(r.Port))
	if err != nil {
		t.Fatalf("dial from %s: %v", source, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readUntilClosed reads c until the relay closes it and returns what came.
// It fails the test if the relay keeps the connection open past clientBound.
func readUntilClosed(t *testing.T, c net.Conn, br *bufio.Reader) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(clientBound))
	got, err := io.ReadAll(br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the relay kept the connection open for %s (read %q)", clientBound, got)
	}
	return got
}

// relayFDs counts the relay's open file descriptors.
func relayFDs(t *testing.T, r *harness.Relay) int {
	t.Helper()
	return len(relayFDTargets(t, r))
}

// relayFDTargets is what each of the relay's open descriptors names
// (socket:[inode], a file's path), by descriptor number.
func relayFDTargets(t *testing.T, r *harness.Relay) map[string]string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", r.PID())
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read relay descriptors: %v", err)
	}
	targets := make(map[string]string, len(ents))
	for _, e := range ents {
		// A descriptor closed since ReadDir has no target: still counted.
		target, _ := os.Readlink(dir + "/" + e.Name())
		targets[e.Name()] = target
	}
	return targets
}

// sockets counts the sockets among a process's descriptors (see
// relayFDTargets).
func sockets(fds map[string]string) int {
	n := 0
	for _, target := range fds {
		if strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// newFDs describes the descriptors in now that were not open in before, by
// kind: what a test shows when the relay holds more than it should.
func newFDs(before, now map[string]string) string {
	kinds := map[string]int{}
	for fd, target := range now {
		if before[fd] == target {
			continue
		}
		if strings.HasPrefix(target, "socket:") {
			target = "socket"
		}
		kinds[target]++
	}
	var parts []string
	for kind, n := range kinds {
		parts = append(parts, fmt.Sprintf("%d× %s", n, kind))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func relayRSSMiB(t *testing.T, r *harness.Relay) float64 {
	t.Helper()
	kib, err := harness.ProcRSSKiB(r.PID())
	if err != nil {
		t.Fatal(err)
	}
	return float64(kib) / 1024
}

// inFlight reads how many requests of area the relay is handling now.
func inFlight(t *testing.T, r *harness.Relay, area string) int {
	t.Helper()
	// A series not yet in use is absent: nothing in flight.
	return max(int(metricValue(t, r, `relay_http_requests_in_flight{area="`+area+`"}`)), 0)
}

// TestDeclaredBodyReservesNoMemory sends 100 requests per path that declare
// a 10 MiB body, send one byte and go silent. The relay must hold memory for
// what arrived, not for what was declared: 100 such connections once took
// the relay from 27 to 1033 MiB.
func TestDeclaredBodyReservesNoMemory(t *testing.T) {
	// The relay's own bound on a silent body (the default, named here so
	// the wait below follows it): memory is measured well within it.
	const bodyTimeout = 30 * time.Second
	r := harness.Start(t, "", "--body-timeout", bodyTimeout.String())
	inspector, _ := createInspector(t, r)
	owner := signUpTenant(t, r, "declared-body")
	logEp := createEndpointFor(t, r, owner.Token, map[string]any{"name": "log", "mode": "LOG"})
	// No agent: the body is read before the relay looks for one.
	proxyEp := proxyEndpoint(t, r, owner.Token, "127.0.0.1:9", false)

	const conns = 100
	const maxGrowthMiB = 64
	for _, tt := range []struct {
		name, host, target, area string
		declared                 int
	}{
		{"guest inspector", r.AddressHost(inspector), "/hook", "address", 10 << 20},
		{"LOG Endpoint", r.AddressHost(logEp.ID), "/hook", "address", 10 << 20},
		{"PROXY Endpoint", r.AddressHost(proxyEp.ID), "/hook", "address", 10 << 20},
		// Just under --max-api-body: a larger declared body is answered
		// 413 at once, without reading it.
		{"GraphQL API", "localhost:" + strconv.Itoa(r.Port), "/graphql", "api", 1<<20 - 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, fdsBefore := relayRSSMiB(t, r), relayFDTargets(t, r)
			open := make([]net.Conn, 0, conns)
			for range conns {
				c := dialFrom(t, r, "")
				fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", tt.target, tt.host, tt.declared)
				open = append(open, c)
			}
			// The /metrics request itself is in flight on the API.
			want := conns
			if tt.area == "api" {
				want++
			}
			harness.Eventually(t, 20*time.Second, fmt.Sprintf("%d requests in flight", conns), func() bool {
				return inFlight(t, r, tt.area) >= want
			})
			after := relayRSSMiB(t, r)
			t.Logf("%d connections declaring %.1f MiB each: relay RSS %.1f → %.1f MiB", conns, float64(tt.declared)/(1<<20), before, after)
			if after-before > maxGrowthMiB {
				t.Errorf("relay RSS grew by %.1f MiB for %d bytes sent, want < %d MiB", after-before, conns, maxGrowthMiB)
			}
			for _, c := range open {
				c.Close()
			}
			// All of them, and their connections: the next case's 100
			// must not meet these under --max-conns-per-ip. The relay reads
			// the close at once and records what arrived; had it missed the
			// close, its body timeout would still end them, so the wait is
			// that bound with a margin for a loaded machine. Sockets are
			// counted apart from files: the log's and the views' reader
			// pools (ten connections) open files on first use, two per
			// connection, and keep them, while a file left per request
			// would be a hundred.
			testwait.CheckFor(t, bodyTimeout+30*time.Second, 25*time.Millisecond, func() error {
				n, fds := inFlight(t, r, tt.area), relayFDTargets(t, r)
				files, filesBefore := len(fds)-sockets(fds), len(fdsBefore)-sockets(fdsBefore)
				if n <= want-conns && sockets(fds) <= sockets(fdsBefore)+2 && files < filesBefore+conns/2 {
					return nil
				}
				return fmt.Errorf("waiting for the stalled requests and their connections to end: %d in flight, %d sockets open (%d before; descriptors new since: %s)",
					n, sockets(fds), sockets(fdsBefore), newFDs(fdsBefore, fds))
			})
		})
	}
}

// TestIdleConnectionIsClosed: a kept-alive connection that sends nothing
// after its answer is closed after --idle-timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	r := harness.Start(t, "", "--idle-timeout", "1s")
	c := dialFrom(t, r, "")
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: localhost:%d\r\n\r\n", r.Port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("healthz: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	if rest := readUntilClosed(t, c, br); len(rest) != 0 {
		t.Errorf("idle connection got %q before its close", rest)
	}
}

// TestStalledBodyIsDropped: a body that stops arriving ends its connection
// after --body-timeout on every path; on a known address the part that
// arrived is recorded, answered 408.
func TestStalledBodyIsDropped(t *testing.T) {
	r := harness.Start(t, "", "--body-timeout", "1s")
	inspector, _ := createInspector(t, r)
	owner := signUpTenant(t, r, "stalled-body")
	proxyEp := proxyEndpoint(t, r, owner.Token, "127.0.0.1:9", false)
	for _, tt := range []struct {
		name, host, target string
		status             int // answer before the close; 0: none required
	}{
		{"guest inspector", r.AddressHost(inspector), "/stall", http.StatusRequestTimeout},
		{"PROXY Endpoint", r.AddressHost(proxyEp.ID), "/stall", http.StatusRequestTimeout},
		{"GraphQL API", "localhost:" + strconv.Itoa(r.Port), "/graphql", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dialFrom(t, r, "")
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n0123456789", tt.target, tt.host)
			got := readUntilClosed(t, c, bufio.NewReader(c))
			if tt.status != 0 && !strings.HasPrefix(string(got), fmt.Sprintf("HTTP/1.1 %d ", tt.status)) {
				t.Errorf("answer %q, want status %d", got, tt.status)
			}
		})
	}
	// The views follow the log asynchronously.
	var rows []delivery
	harness.Eventually(t, 10*time.Second, "the row in the history", func() bool {
		rows = history(t, r, inspector, 10)
		return len(rows) > 0
	})
	if len(rows) != 1 || rows[0].ResponseStatus == nil || *rows[0].ResponseStatus != http.StatusRequestTimeout ||
		rows[0].BodySize != 10 || rows[0].BodyBase64 != "MDEyMzQ1Njc4OQ==" || rows[0].Complete {
		t.Fatalf("inspector history %+v, want one incomplete row of the 10 bytes that arrived, answered 408", rows)
	}
	explained(t, r, "", rows[0].ID, http.StatusRequestTimeout, []string{"Answered 408 by the relay",
		"the request body stopped arriving for longer than --body-timeout (10 bytes arrived and are stored)"},
		[]string{`recorded reason: "request body stalled: `})
}

// TestSteadyUploadOutlastsBodyTimeout: the body timeout is about progress,
// not a deadline for the whole body: 2 MiB sent in 64 KiB pieces over about
// three seconds passes a relay whose body timeout is one second.
func TestSteadyUploadOutlastsBodyTimeout(t *testing.T) {
	r := harness.Start(t, "", "--body-timeout", "1s")
	inspector, _ := createInspector(t, r)
	const size, piece = 2 << 20, 64 << 10
	c := dialFrom(t, r, "")
	fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", r.AddressHost(inspector), size)
	tick := time.NewTicker(3 * time.Second / (size / piece)) // 32 pieces, ~94 ms apart
	defer tick.Stop()
	chunk := make([]byte, piece)
	start := time.Now()
	for sent := 0; sent < size; sent += piece {
		<-tick.C // pacing the sender, not waiting for the relay
		if _, err := c.Write(chunk); err != nil {
			t.Fatalf("upload cut after %d bytes: %v", sent, err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(clientBound))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("upload of %d bytes over %s: %v", size, time.Since(start).Round(time.Millisecond), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("upload answered %d, want 204", resp.StatusCode)
	}
	t.Logf("%d bytes over %s answered %d", size, time.Since(start).Round(time.Millisecond), resp.StatusCode)
	var rows []delivery
	harness.Eventually(t, 10*time.Second, "the row in the history", func() bool {
		rows = history(t, r, inspector, 10)
		return len(rows) > 0
	})
	if len(rows) != 1 || rows[0].BodySize != size {
		t.Fatalf("history %+v, want one row of %d bytes", rows, size)
	}
}

// TestConnectionsPerClientAreCapped: with --max-conns-per-ip 8 a ninth
// connection from the same address is answered 429 and closed; other
// addresses and /healthz keep working; closing connections frees their
// places; and however many connections one address attempts, the relay's
// descriptors stay bounded.
func TestConnectionsPerClientAreCapped(t *testing.T) {
	const limit = 8
	r := harness.Start(t, "", "--max-conns-per-ip", strconv.Itoa(limit))
	const greedy = "127.0.0.3" // the test's other requests come from 127.0.0.1
	baseFDs := relayFDs(t, r)

	healthz := func(c net.Conn) (*http.Response, error) {
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: localhost:%d\r\n\r\n", r.Port)
		_ = c.SetReadDeadline(time.Now().Add(clientBound))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	// Each held connection is answered once, so the relay has counted it.
	held := make([]net.Conn, 0, limit)
	for i := range limit {
		c := dialFrom(t, r, greedy)
		resp, err := healthz(c)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d of %d: %v %v", i+1, limit, resp, err)
		}
		held = append(held, c)
	}

	refused := func() {
		t.Helper()
		c := dialFrom(t, r, greedy)
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: localhost:%d\r\n\r\n", r.Port)
		br := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(clientBound))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("connection over the cap: %v, want a 429 answer", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || !resp.Close || !strings.Contains(string(body), "too many open connections") {
			t.Fatalf("connection over the cap: %d close=%v %q, want 429 with Connection: close", resp.StatusCode, resp.Close, body)
		}
		if rest := readUntilClosed(t, c, br); len(rest) != 0 {
			t.Fatalf("refused connection got %q after its answer", rest)
		}
	}
	refused()
	if n := int(metricValue(t, r, "relay_http_connections_refused_total")); n != 1 {
		t.Errorf("relay_http_connections_refused_total %d, want 1", n)
	}

	// Another client, and the health check from it, are not affected.
	other := dialFrom(t, r, "127.0.0.2")
	if resp, err := healthz(other); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz from another address: %v %v", resp, err)
	}
	req, _ := http.NewRequest(http.MethodGet, r.BareURL()+"/healthz", nil)
	resp, err := harness.Client.Do(r.Route(req))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz from 127.0.0.1: %v %v", resp, err)
	}
	resp.Body.Close()

	// A closed connection frees its place.
	held[0].Close()
	harness.Eventually(t, 10*time.Second, "a place to free up", func() bool {
		c := dialFrom(t, r, greedy)
		resp, err := healthz(c)
		if err == nil && resp.StatusCode == http.StatusOK {
			held[0] = c
			return true
		}
		c.Close()
		return false
	})
	refused()

	// Many attempts held open by the client cost the relay no descriptors
	// beyond the cap once their refusals are done.
	const attempts = 200
	for range attempts {
		dialFrom(t, r, greedy)
	}
	slack := 8 // the 127.0.0.2 client, harness keep-alives, the views' files
	harness.Eventually(t, 20*time.Second, "the relay's descriptors to settle", func() bool {
		return relayFDs(t, r) <= baseFDs+limit+slack
	})
	t.Logf("relay descriptors: %d at start, %d with %d held and %d more attempted", baseFDs, relayFDs(t, r), limit, attempts)
}

// TestGraphiQLPageHeaders: the GraphiQL page on GET /graphql carries the
// console's protections: a Content-Security-Policy with no inline code
// other than its own (by hash), no framing, and no content sniffing.
func TestGraphiQLPageHeaders(t *testing.T) {
	r := harness.Start(t, "")
	req, _ := http.NewRequest(http.MethodGet, r.BareURL()+"/graphql", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := harness.Client.Do(r.Route(req))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "graphiql") {
		t.Fatalf("GET /graphql as a browser: %d %.200s", resp.StatusCode, page)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'", "script-src 'self' 'sha256-", "object-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("Content-Security-Policy %q allows any inline code", csp)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q, want nosniff", got)
	}
	if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("X-Frame-Options %q, want DENY", got)
	}
}

// TestAgentWarnsAboutTokenFlag: a token on the command line is readable by
// every local user in the process list, so the agent warns when it is given
// there and says to use RELAY_TOKEN, in its help and in the warning; a
// token from RELAY_TOKEN draws no warning.
func TestAgentWarnsAboutTokenFlag(t *testing.T) {
	const warning = "--token shows the token to every local user in the process list; set RELAY_TOKEN instead"
	help, _ := harness.RunCLI(t, "agent", "--help")
	if !strings.Contains(help, "RELAY_TOKEN") || !strings.Contains(help, "process list") {
		t.Errorf("relay agent --help does not recommend RELAY_TOKEN:\n%s", help)
	}

	r := harness.Start(t, "")
	owner := signUpTenant(t, r, "token-flag")
	server := "http://127.0.0.1:" + strconv.Itoa(r.Port)
	flagged := createEndpointFor(t, r, owner.Token, map[string]any{"name": "flag", "mode": "PROXY", "target": "127.0.0.1:9"})
	a := harness.StartProcess(t, harness.Binary(t), "agent", "--server", server, "--token", owner.Token,
		"--endpoint", flagged.ID, "--target", "127.0.0.1:9")
	waitAgent(t, r, owner.Token, flagged.ID, true)
	if !strings.Contains(a.Output(), warning) {
		t.Errorf("agent given --token printed no warning:\n%s", a.Output())
	}

	fromEnv := createEndpointFor(t, r, owner.Token, map[string]any{"name": "env", "mode": "PROXY", "target": "127.0.0.1:9"})
	t.Setenv("RELAY_TOKEN", owner.Token) // the agent inherits the test's environment
	b := harness.StartProcess(t, harness.Binary(t), "agent", "--server", server,
		"--endpoint", fromEnv.ID, "--target", "127.0.0.1:9")
	waitAgent(t, r, owner.Token, fromEnv.ID, true)
	if strings.Contains(b.Output(), "warning") {
		t.Errorf("agent with RELAY_TOKEN warned:\n%s", b.Output())
	}
}

// TestStoredHeadersAreCapped: a delivery stores at most --max-headers
// header values and --max-header-bytes of names and values; the rest are
// counted in droppedHeaders, the sender still gets its normal answer, and a
// PROXY Endpoint's local process still gets every header (forwarding keeps
// fidelity; only storage is capped). A header block beyond
// --max-header-bytes (and net/http's 4 KiB of slack) is refused with 431.
func TestStoredHeadersAreCapped(t *testing.T) {
	const maxHeaders = 5
	var seen requestLog
	p := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen.add(r, body)
		w.WriteHeader(http.StatusCreated)
	}), false, "--max-headers", strconv.Itoa(maxHeaders), "--max-header-bytes", "4KiB")

	type stored struct {
		ID             string
		Headers        []header
		DroppedHeaders int
		Complete       bool
		ResponseStatus *int
	}
	read := func(t *testing.T, token, id string) stored {
		t.Helper()
		var out struct{ Delivery stored }
		p.r.MustGraphQL(t, token, `query($id: ID!){ delivery(id: $id){ id headers{name value} droppedHeaders complete responseStatus } }`,
			map[string]any{"id": id}, &out)
		return out.Delivery
	}

	t.Run("count, PROXY Endpoint", func(t *testing.T) {
		var sent [][2]string
		for i := range 40 {
			sent = append(sent, [2]string{fmt.Sprintf("X-Many-%02d", i), "v"})
		}
		total := len(sent) + 2 // the raw request adds Content-Length and Connection
		if resp := p.send(t, "POST", "/many", sent, []byte("{}")); resp.Status != http.StatusCreated {
			t.Fatalf("sender got %d %q, want the local 201", resp.Status, resp.Body)
		}
		p.seenAll(t, &seen, len(sent))
		d := read(t, p.acct.Token, deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/many").ID)
		if len(d.Headers) != maxHeaders || d.DroppedHeaders != total-maxHeaders {
			t.Fatalf("stored %d headers, %d dropped; want %d stored and %d dropped", len(d.Headers), d.DroppedHeaders, maxHeaders, total-maxHeaders)
		}
		// Asked alone, the count is still read from the log.
		var alone struct{ Delivery struct{ DroppedHeaders int } }
		p.r.MustGraphQL(t, p.acct.Token, `query($id: ID!){ delivery(id: $id){ droppedHeaders } }`, map[string]any{"id": d.ID}, &alone)
		if alone.Delivery.DroppedHeaders != d.DroppedHeaders {
			t.Errorf("droppedHeaders asked alone: %d, with the headers: %d", alone.Delivery.DroppedHeaders, d.DroppedHeaders)
		}
		if code := refusal(t, p.r, p.acct.Token, retryMutation, map[string]any{"id": d.ID}).Code(); code != "PAYLOAD_INCOMPLETE" {
			t.Errorf("retry of a delivery with dropped headers: %s, want PAYLOAD_INCOMPLETE", code)
		}
	})

	t.Run("bytes, guest inspector", func(t *testing.T) {
		id, _ := createInspector(t, p.r)
		big := strings.Repeat("b", 1500)
		// Sorted by name: Connection, Content-Length, then 2×1507 bytes fit
		// 4 KiB and the third big header does not.
		resp := send(t, p.r, id, "POST", "/big", [][2]string{{"X-Big-0", big}, {"X-Big-1", big}, {"X-Big-2", big}}, nil)
		if resp.Status != http.StatusNoContent {
			t.Fatalf("sender got %d, want 204", resp.Status)
		}
		// The history view follows the answer by a moment.
		var rows []delivery
		harness.Eventually(t, 10*time.Second, "the delivery in the inspector's history", func() bool {
			rows = history(t, p.r, id, 10)
			return len(rows) > 0
		})
		if len(rows) != 1 {
			t.Fatalf("%d rows, want 1", len(rows))
		}
		d := read(t, "", rows[0].ID)
		size := 0
		for _, h := range d.Headers {
			size += len(h.Name) + len(h.Value)
		}
		if d.DroppedHeaders != 1 || len(d.Headers) != 4 || size > 4<<10 {
			t.Fatalf("stored %d headers of %d bytes, %d dropped; want 4 within 4 KiB and 1 dropped", len(d.Headers), size, d.DroppedHeaders)
		}
		if !d.Complete {
			t.Errorf("complete is false: it speaks of the body only")
		}
	})

	t.Run("header block over the limit", func(t *testing.T) {
		id, _ := createInspector(t, p.r)
		var huge [][2]string
		for i := range 10 {
			huge = append(huge, [2]string{fmt.Sprintf("X-Huge-%d", i), strings.Repeat("h", 1000)})
		}
		if resp := send(t, p.r, id, "POST", "/huge", huge, nil); resp.Status != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("10 KB of headers with --max-header-bytes 4KiB: %d, want 431", resp.Status)
		}
	})

	t.Run("header lines over the count", func(t *testing.T) {
		id, _ := createInspector(t, p.r)
		// 1 100 one-letter lines are 6.6 KB: under the block limit with
		// its slack, over ingress.MaxHeaderLines.
		lines := make([][2]string, 1100)
		for i := range lines {
			lines[i] = [2]string{"a", "b"}
		}
		if resp := send(t, p.r, id, "POST", "/lines", lines, nil); resp.Status != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("%d header lines: %d, want 431", len(lines), resp.Status)
		}
	})
}

// seenAll checks that the local handler's latest request (answered before
// the sender was) carried want X-Many-* headers.
func (p *proxyRig) seenAll(t *testing.T, l *requestLog, want int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) == 0 {
		t.Fatal("the local process got nothing")
	}
	got := 0
	for name := range l.seen[len(l.seen)-1].Header {
		if strings.HasPrefix(name, "X-Many-") {
			got++
		}
	}
	if got != want {
		t.Fatalf("the local process got %d of the %d headers sent", got, want)
	}
}

// TestMemoryLimit: the Go heap's soft limit (--memory-limit) is what the
// runtime reports, so garbage under a flood is collected before it piles
// up (BenchmarkHostile's subscription flood peaked at 317 MiB without it).
func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want float64
	}{
		{nil, 160 << 20},
		{[]string{"--memory-limit", "64MiB"}, 64 << 20},
		{[]string{"--memory-limit", "off"}, math.MaxInt64},
	} {
		r := harness.Start(t, "", tc.args...)
		if got := metricValue(t, r, "go_gc_gomemlimit_bytes"); got != tc.want {
			t.Errorf("relay serve %v: go_gc_gomemlimit_bytes %g, want %g", tc.args, got, tc.want)
		}
	}
}
