package serve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestHTTP2StalledAnswersAreDropped: an HTTP/2 client that gives no flow
// control window (SETTINGS_INITIAL_WINDOW_SIZE 0) while it answers PINGs
// holds every answer the relay writes to it, with nothing written to the
// socket for a socket deadline to end. Each stream's answer must be reset
// after --body-timeout without progress, its handler ended, its memory
// (a GraphQL page of 16 bodies of 256 KiB, about 9 MiB, counted in the
// answer budget) freed; before, 8 such answers held 74 MiB and 8 requests
// in flight for as long as the client kept its connection, and an answer
// small enough for net/http to buffer (the console's page) held a
// goroutine each after its handler returned, counted in no cap.
func TestHTTP2StalledAnswersAreDropped(t *testing.T) {
	r, ca := startTLSServe(t, "--body-timeout", "1s")
	var out struct{ CreateInspector struct{ ID string } }
	r.gql(t, "", `mutation{ createInspector{ id } }`, nil, &out)
	id := out.CreateInspector.ID
	body := make([]byte, 256<<10)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	for range 16 {
		if s := r.deliver(t, id, body); s != http.StatusNoContent {
			t.Fatalf("delivery answered %d, want 204", s)
		}
	}
	r.client.CloseIdleConnections()
	page := `{"query":"{ inspector(id: \"` + id + `\"){ deliveries(first: 16){ nodes { body bodyBase64 } } } }"}`
	stalledAnswers(t, r, ca, []stalledAnswer{
		{"a GraphQL page of many MiB", "localhost", http.MethodPost, "/graphql", page, nil, "api", 8},
		// Small enough for net/http to buffer: it writes it after the
		// handler returned, out of the count of requests in flight.
		{"the console's page", "localhost", http.MethodGet, "/", "", nil, "api", 64},
	})
}

// TestHTTP2StalledStreamsAndForwardsAreDropped is
// TestHTTP2StalledAnswersAreDropped for a smee stream (its ready event,
// flushed at once) and a PROXY Endpoint's answer of 1 MiB from its local
// process, through a real agent: each is held by a zero window the same
// way and must be reset the same way. Without connguard.WriteProgress the
// PROXY answers held 8 requests in flight for good; smee streams were
// reset after smee's own write deadline (ingress.StreamWriteTimeout, 30 s).
// Each runs on a relay of its own: the agent's goroutines are not counted
// with the smee streams'.
func TestHTTP2StalledStreamsAndForwardsAreDropped(t *testing.T) {
	for _, name := range []string{"a smee stream", "a PROXY answer of 1 MiB"} {
		t.Run(name, func(t *testing.T) {
			r, ca := startTLSServe(t, "--body-timeout", "1s")
			token, _ := r.signUp(t, "", "streams")
			var tc stalledAnswer
			if name == "a smee stream" {
				var smee struct{ IssueSmeeKey struct{ URL string } }
				r.gql(t, token, `mutation($id: ID!){ issueSmeeKey(endpointId: $id){ url } }`, map[string]any{"id": r.endpoint(t, token)}, &smee)
				u, err := url.Parse(smee.IssueSmeeKey.URL)
				if err != nil {
					t.Fatal(err)
				}
				tc = stalledAnswer{name, u.Hostname(), http.MethodGet, u.Path, "",
					[]hpack.HeaderField{{Name: "accept", Value: "text/event-stream"}}, "address", 8}
			} else {
				proxied := proxyEndpoint(t, r, ca, token, bytes.Repeat([]byte("a"), 1<<20))
				tc = stalledAnswer{name, proxied + ".localhost", http.MethodPost, "/hook", "{}", nil, "address", 8}
			}
			r.client.CloseIdleConnections()
			stalledAnswers(t, r, ca, []stalledAnswer{tc})
		})
	}
}

// stalledAnswer is a request whose answer a client holds with a zero
// window: streams of it sent to host, counted in area's requests in flight.
type stalledAnswer struct {
	name, host, method, path, body string
	fields                         []hpack.HeaderField
	area                           string
	streams                        int
}

// stalledAnswers sends each case's streams over a connection that gives no
// window, and expects each stream answered 200, then reset, its handler,
// memory and goroutines freed.
func stalledAnswers(t *testing.T, r *servedRelay, ca *harness.CA, cases []stalledAnswer) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			streams := tc.streams
			base := r.inFlight(t, tc.area)
			before, goroutines := heapInUse(), runtime.NumGoroutine()
			c := dialH2(t, r, ca, "127.0.0.2", tc.host, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			authority := tc.host + ":" + r.port
			for range streams {
				fields := append([]hpack.HeaderField{{Name: "content-type", Value: "application/json"}}, tc.fields...)
				if tc.body == "" {
					c.open(tc.method, authority, tc.path, fields, true)
					continue
				}
				fields = append(fields, hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(tc.body))})
				sid := c.open(tc.method, authority, tc.path, fields, false)
				c.sendData(sid, true, []byte(tc.body))
			}
			// A stream is held by the zero window only once its answer
			// starts (its HEADERS, which take no window): building the
			// answers first (8 GraphQL pages read from the log and encoded,
			// 9 MiB each) is work, not a hold, and under -race on busy
			// cores took from 25 s to over 2 min. So the wait for the
			// resets starts once every stream is answered; the first wait
			// is long, as it bounds only work the relay does. The polls force no
			// collection: two of them every 20 ms over a heap of tens of
			// MiB took the cores the answers were built on.
			var peak int64
			waitFor(t, 5*time.Minute, func() error {
				peak = max(peak, heapNow()-before)
				if n := c.answered(); n < streams {
					return fmt.Errorf("%d of %d streams answered or reset; heap at most +%d MiB", n, streams, peak>>20)
				}
				return nil
			})
			waitFor(t, 30*time.Second, func() error {
				heap := heapNow() - before
				peak = max(peak, heap)
				statuses, resets, _, _ := c.counts()
				g := runtime.NumGoroutine() - goroutines
				if n := r.inFlight(t, tc.area) - base; n > 0 || resets < streams || g >= streams/2 {
					return fmt.Errorf("%d requests still in flight, %d of %d streams reset (answers %v), %d more goroutines; heap +%d MiB, at most +%d MiB",
						n, resets, streams, statuses, g, heap>>20, peak>>20)
				}
				return nil
			})
			held := heapInUse() - before
			statuses, _, _, _ := c.counts()
			t.Logf("%d answers %v held by a zero window: heap at most +%d MiB, +%d MiB once reset; %d more goroutines", streams, statuses, peak>>20, held>>20, runtime.NumGoroutine()-goroutines)
			// HEADERS take no window: each stream was answered, then held.
			if statuses[http.StatusOK] != streams {
				t.Errorf("answers %v, want %d × 200", statuses, streams)
			}
			if held > 16<<20 {
				t.Errorf("heap +%d MiB after the streams were reset, want under 16 MiB", held>>20)
			}
		})
	}
}

// TestHTTP2HeaderFieldsAreBounded: HTTP/2 requests of tiny header fields
// (three-letter names, empty values: 35 of the header list's bytes each,
// so 1 800 fit under --max-header-bytes) are held to the 1 000 lines an
// HTTP/1.x request may have: answered 431 before a handler holds them.
// Before, 50 such requests waiting for their bodies held 13 MiB of header
// maps. A request of exactly 1 000 fields (its :authority one of them) is
// served.
func TestHTTP2HeaderFieldsAreBounded(t *testing.T) {
	r, ca := startTLSServe(t)
	var out struct{ CreateInspector struct{ ID string } }
	r.gql(t, "", `mutation{ createInspector{ id } }`, nil, &out)
	host := out.CreateInspector.ID + ".localhost"
	fields := func(n int) []hpack.HeaderField {
		f := []hpack.HeaderField{{Name: "content-length", Value: "2"}}
		for i := range n - len(f) {
			f = append(f, hpack.HeaderField{Name: "x" + strconv.FormatInt(int64(i), 36), Value: ""})
		}
		return f
	}
	for _, tc := range []struct {
		name     string
		fields   int // besides :authority
		requests int
		want     int
	}{
		{"at the bound", ingress.MaxHeaderLines - 1, 1, http.StatusNoContent},
		{"tiny fields past it, bodies pending", 1800, 50, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialH2(t, r, ca, "127.0.0.2", host)
			base := r.inFlight(t, "address")
			before := heapInUse()
			f := fields(tc.fields)
			for range tc.requests {
				id := c.open(http.MethodPost, host, "/x", f, false)
				if tc.want == http.StatusNoContent {
					c.sendData(id, true, []byte("ok"))
				}
			}
			// Each request is answered, or held by a handler waiting for
			// its body (one whose body was sent is answered).
			waitFor(t, 30*time.Second, func() error {
				statuses, _, _, _ := c.counts()
				answered := 0
				for _, n := range statuses {
					answered += n
				}
				held := r.inFlight(t, "address") - base
				if tc.want == http.StatusNoContent {
					held = 0
				}
				if n := held + answered; n < tc.requests {
					return fmt.Errorf("%d of %d requests answered or in flight", n, tc.requests)
				}
				return nil
			})
			held := heapInUse() - before
			statuses, _, _, _ := c.counts()
			t.Logf("%d requests of %d header fields: answers %v, %d in flight, heap +%d KiB", tc.requests, tc.fields+1, statuses, r.inFlight(t, "address")-base, held>>10)
			if statuses[tc.want] != tc.requests {
				t.Errorf("answers %v, want %d × %d", statuses, tc.requests, tc.want)
			}
			if held > 4<<20 {
				t.Errorf("heap +%d MiB with the requests held, want under 4 MiB", held>>20)
			}
		})
	}
}

// TestHTTP2AttacksStayBounded runs the HTTP/2 attacks net/http's own
// limits and the relay's caps already bound, against the real server, and
// asserts the bound: streams past MaxConcurrentStreams are refused by
// HTTP/2 itself; one client's 500 streams trickling bodies, or idle (no
// END_STREAM, no byte of their bodies), over two connections are held to
// --max-requests-per-ip in flight and answered after --body-timeout; a rapid reset (HEADERS then RST_STREAM, 5 000 times)
// leaves nothing running; a PING flood from a client that reads nothing is
// cut by net/http's queue of control frames.
func TestHTTP2AttacksStayBounded(t *testing.T) {
	r, ca := startTLSServe(t, "--body-timeout", "2s", "--address-rate", "off")
	var out struct{ CreateInspector struct{ ID string } }
	r.gql(t, "", `mutation{ createInspector{ id } }`, nil, &out)
	host := out.CreateInspector.ID + ".localhost"
	api := "localhost:" + r.port
	r.client.CloseIdleConnections()
	pending := func(n int) []hpack.HeaderField {
		return []hpack.HeaderField{{Name: "content-type", Value: "application/json"}, {Name: "content-length", Value: strconv.Itoa(n)}}
	}

	for _, tc := range []struct {
		name   string
		area   string
		conns  int
		attack func(c *h2Client)
		// maxInFlight bounds the requests in flight while the attack
		// holds them; streams is how many streams the relay must end
		// (answer or reset) over all the connections.
		maxInFlight, streams int
		refused              int // streams HTTP/2 refuses
	}{
		{"300 streams on one connection, bodies pending", "api", 1, func(c *h2Client) {
			for range 300 {
				c.open(http.MethodPost, api, "/graphql", pending(64), false)
			}
		}, http2MaxStreams, 300, 300 - http2MaxStreams},
		{"2 connections of 250 streams trickling bodies", "address", 2, func(c *h2Client) {
			for range 250 {
				id := c.open(http.MethodPost, host, "/x", pending(1<<20), false)
				c.sendData(id, false, []byte("a"))
			}
		}, 256, 500, 0},
		// Opened and never another frame: no END_STREAM, no byte of
		// the body, no reset.
		{"2 connections of 250 idle streams at an address", "address", 2, func(c *h2Client) {
			for range 250 {
				c.open(http.MethodPost, host, "/x", pending(1<<20), false)
			}
		}, 256, 500, 0},
		{"2 connections of 250 idle streams at the API", "api", 2, func(c *h2Client) {
			for range 250 {
				c.open(http.MethodPost, api, "/graphql", pending(64), false)
			}
		}, 256, 500, 0},
		{"rapid reset, 5 000 streams", "address", 1, func(c *h2Client) {
			for range 5000 {
				id := c.open(http.MethodGet, host, "/x", nil, true)
				c.write(func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeCancel) })
			}
		}, 256, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// /metrics counts itself in the "api" area.
			base := r.inFlight(t, tc.area)
			before, goroutines := heapInUse(), runtime.NumGoroutine()
			var cs []*h2Client
			for range tc.conns {
				c := dialH2(t, r, ca, "127.0.0.2", host)
				cs = append(cs, c)
				tc.attack(c)
			}
			peakInFlight, peakHeap := 0, int64(0)
			ended := func() (n int) {
				for _, c := range cs {
					c.mu.Lock()
					for id := range c.statuses {
						if c.ended[id] || c.resets[id] != 0 {
							n++
						}
					}
					for id := range c.resets {
						if _, answered := c.statuses[id]; !answered {
							n++
						}
					}
					c.mu.Unlock()
				}
				return n
			}
			waitFor(t, 60*time.Second, func() error {
				peakInFlight = max(peakInFlight, r.inFlight(t, tc.area)-base)
				peakHeap = max(peakHeap, heapInUse()-before)
				g := runtime.NumGoroutine() - goroutines
				if n, e := r.inFlight(t, tc.area)-base, ended(); n > 0 || e < tc.streams || g > 16 {
					return fmt.Errorf("%d in flight (at most %d), %d of %d streams ended, %d more goroutines", n, peakInFlight, e, tc.streams, g)
				}
				return nil
			})
			statuses, resets := map[int]int{}, map[http2.ErrCode]int{}
			for _, c := range cs {
				s, _, _, _ := c.counts()
				for k, v := range s {
					statuses[k] += v
				}
				c.mu.Lock()
				for _, code := range c.resets {
					resets[code]++
				}
				c.mu.Unlock()
			}
			t.Logf("in flight at most %d; answers %v, streams reset %v; heap at most +%d KiB", peakInFlight, statuses, resets, peakHeap>>10)
			// REFUSED_STREAM while the relay's SETTINGS may not have been
			// acknowledged yet, PROTOCOL_ERROR past them.
			if n := resets[http2.ErrCodeRefusedStream] + resets[http2.ErrCodeProtocol]; n != tc.refused {
				t.Errorf("%d streams refused, want %d", n, tc.refused)
			}
			if peakInFlight > tc.maxInFlight {
				t.Errorf("%d requests in flight at once, want at most %d", peakInFlight, tc.maxInFlight)
			}
			if peakHeap > 32<<20 {
				t.Errorf("heap +%d MiB during the attack, want under 32 MiB", peakHeap>>20)
			}
		})
	}

	t.Run("PING flood, never reading", func(t *testing.T) {
		before := heapInUse()
		c := dialH2Reading(t, r, ca, "127.0.0.2", host, false)
		var err error
		n := 0
		for ; n < 1_000_000 && err == nil; n++ {
			_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			err = c.fr.WritePing(false, [8]byte{1})
		}
		held := heapInUse() - before
		t.Logf("%d PINGs written before %v; heap +%d KiB", n, err, held>>10)
		if err == nil {
			t.Errorf("the relay took %d PINGs from a client that reads none of its answers", n)
		}
		if held > 16<<20 {
			t.Errorf("heap +%d MiB, want under 16 MiB", held>>20)
		}
	})
}

// TestCleartextHTTP2IsRefused: the relay speaks HTTP/2 only over TLS. On a
// plain connection neither the prior-knowledge preface nor an Upgrade: h2c
// request gets HTTP/2: each is answered in HTTP/1.1, never 101.
func TestCleartextHTTP2IsRefused(t *testing.T) {
	r, _ := startTLSServe(t)
	for _, tc := range []struct{ name, request string }{
		{"prior knowledge", http2.ClientPreface},
		{"Upgrade: h2c", "GET / HTTP/1.1\r\nHost: localhost:" + r.port + "\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", "127.0.0.1:"+r.port)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no HTTP/1.1 answer: %v", err)
			}
			resp.Body.Close()
			t.Logf("answered %s %s", resp.Proto, resp.Status)
			if resp.ProtoMajor != 1 || resp.StatusCode == http.StatusSwitchingProtocols {
				t.Errorf("answered %s %s, want an HTTP/1.1 answer other than 101", resp.Proto, resp.Status)
			}
		})
	}
}

// proxyEndpoint makes a PROXY Endpoint of the account of token whose agent
// (in this process, over HTTPS) forwards to a local process that answers
// every request 200 with answer, on a connection of its own, and returns its id once the agent is
// connected.
func proxyEndpoint(t *testing.T, r *servedRelay, ca *harness.CA, token string, answer []byte) string {
	t.Helper()
	local := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = w.Write(answer)
	}))
	// No connection kept between forwards: the goroutines a test counts
	// are the relay's, not the agent's idle ones or this server's.
	local.Config.SetKeepAlivesEnabled(false)
	local.Start()
	t.Cleanup(local.Close)
	target := strings.TrimPrefix(local.URL, "http://")
	var ep struct{ CreateEndpoint struct{ ID string } }
	r.gql(t, token, `mutation($t: String!){ createEndpoint(input: {name: "proxied", mode: PROXY, target: $t}){ id } }`,
		map[string]any{"t": target}, &ep)
	id := ep.CreateEndpoint.ID
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- agentcli.Serve(ctx, agentcli.Options{Server: "https://localhost:" + r.port, Token: token, CAFile: ca.File,
			Endpoints: []agentcli.Route{{EndpointID: id, Target: target}}})
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, 30*time.Second, func() error {
		var out struct{ Endpoint struct{ AgentConnected bool } }
		r.gql(t, token, `query($id: ID!){ endpoint(id: $id){ agentConnected } }`, map[string]any{"id": id}, &out)
		if !out.Endpoint.AgentConnected {
			return fmt.Errorf("agent not connected yet")
		}
		return nil
	})
	return id
}

// TestHTTP2FloodsStayBounded runs the HTTP/2 floods of control frames and
// header fragments against the real server, and asserts what each may
// hold: WINDOW_UPDATEs of 1 byte by the hundred thousand keep the heap and
// the goroutines flat and the connection serving; a window raised past
// 2^31-1 is a connection error (GOAWAY FLOW_CONTROL_ERROR) on the
// connection and a stream error (RST_STREAM FLOW_CONTROL_ERROR) on a
// stream, the window never grown past it; SETTINGS from a client that
// never reads the acknowledgements stop being read once those back up (the
// client's writes stall or fail), the heap flat; a header block continued in CONTINUATION frames for ever
// (CVE-2023-45288) ends the connection within a bounded number of bytes
// past --max-header-bytes, none of it held.
func TestHTTP2FloodsStayBounded(t *testing.T) {
	r, ca := startTLSServe(t, "--body-timeout", "2s")
	host := "localhost"
	authority := host + ":" + r.port
	pending := []hpack.HeaderField{{Name: "content-type", Value: "application/json"}, {Name: "content-length", Value: "64"}}
	const maxWindow = 1<<31 - 1
	// A header block fragment of 16 KiB: literal fields without indexing,
	// each a new name, so every byte is decoded and none indexed.
	var fragment []byte
	for len(fragment) < 16<<10-128 {
		name := "x-" + strconv.Itoa(len(fragment))
		fragment = append(fragment, 0x00, byte(len(name)))
		fragment = append(fragment, name...)
		fragment = append(fragment, 100)
		fragment = append(fragment, bytes.Repeat([]byte("v"), 100)...)
	}

	for _, tc := range []struct {
		name string
		read bool // the client reads what the relay sends
		// attack floods c and returns what it wrote (frames or bytes)
		// and the write error that stopped it (nil: it wrote them all).
		attack func(c *h2Client) (int, error)
		// ends: the relay must end the connection (else serve on it).
		ends bool
		// goAway, reset: the error code of the GOAWAY, or of the
		// RST_STREAM on the attack's stream, the relay must send.
		goAway, reset http2.ErrCode
		// maxSent bounds what the relay took before it ended the
		// connection (0: no bound).
		maxSent int
	}{
		{"200 000 WINDOW_UPDATEs of one byte", true, func(c *h2Client) (int, error) {
			sid := c.open(http.MethodPost, authority, "/graphql", pending, false)
			for range 100_000 {
				c.write(func() error { return c.fr.WriteWindowUpdate(0, 1) })
				c.write(func() error { return c.fr.WriteWindowUpdate(sid, 1) })
			}
			return 200_000, nil
		}, false, 0, 0, 0},
		{"a connection window past 2^31-1", true, func(c *h2Client) (int, error) {
			c.write(func() error { return c.fr.WriteWindowUpdate(0, maxWindow) })
			c.write(func() error { return c.fr.WriteWindowUpdate(0, maxWindow) })
			return 2, nil
		}, true, http2.ErrCodeFlowControl, 0, 0},
		{"a stream window past 2^31-1", true, func(c *h2Client) (int, error) {
			sid := c.open(http.MethodPost, authority, "/graphql", pending, false)
			c.write(func() error { return c.fr.WriteWindowUpdate(sid, maxWindow) })
			c.write(func() error { return c.fr.WriteWindowUpdate(sid, maxWindow) })
			return 2, nil
		}, false, 0, http2.ErrCodeFlowControl, 0},
		// Its small receive buffer fills with acknowledgements: the
		// relay stops reading it, and its writes stall.
		{"SETTINGS flood, never reading", false, func(c *h2Client) (int, error) {
			for n := range 2_000_000 {
				_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535}); err != nil {
					return n, err
				}
			}
			return 2_000_000, nil
		}, true, 0, 0, 0},
		{"CONTINUATION flood", true, func(c *h2Client) (int, error) {
			c.wmu.Lock()
			defer c.wmu.Unlock()
			c.hbuf.Reset()
			for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
				{Name: ":authority", Value: authority}, {Name: ":path", Value: "/"}} {
				_ = c.enc.WriteField(f)
			}
			sid := c.next
			c.next += 2
			if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: c.hbuf.Bytes()}); err != nil {
				return 0, err
			}
			sent := 0
			for sent < 256<<20 {
				_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if err := c.fr.WriteContinuation(sid, false, fragment); err != nil {
					return sent, err
				}
				sent += len(fragment)
			}
			return sent, nil
		}, true, 0, 0, 8 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, goroutines := heapInUse(), runtime.NumGoroutine()
			c := dialH2Reading(t, r, ca, "127.0.0.2", host, tc.read)
			sent, err := tc.attack(c)
			held := heapInUse() - before
			t.Logf("%d sent, stopped by %v; heap +%d KiB", sent, err, held>>10)
			if held > 16<<20 {
				t.Errorf("heap +%d MiB during the flood, want under 16 MiB", held>>20)
			}
			if tc.maxSent > 0 && sent > tc.maxSent {
				t.Errorf("the relay took %d bytes of one header block, want at most %d", sent, tc.maxSent)
			}
			if !tc.read {
				if err == nil {
					t.Errorf("the relay took all %d frames from a client that reads none of its answers", sent)
				}
			} else if !tc.ends {
				// The connection still serves: a request on it is answered.
				id := c.open(http.MethodGet, authority, "/healthz", nil, true)
				waitFor(t, 30*time.Second, func() error {
					c.mu.Lock()
					defer c.mu.Unlock()
					if _, ok := c.statuses[id]; !ok {
						return fmt.Errorf("no answer on the connection after the flood (read: %v)", c.readErr)
					}
					return nil
				})
			}
			if tc.read {
				waitFor(t, 30*time.Second, func() error {
					c.mu.Lock()
					defer c.mu.Unlock()
					switch {
					case tc.ends && c.readErr == nil:
						return fmt.Errorf("the connection is still open")
					case tc.goAway != 0 && c.goAwayCode != tc.goAway:
						return fmt.Errorf("GOAWAY %v (sent: %v), want %v", c.goAwayCode, c.goAway, tc.goAway)
					case tc.reset != 0 && c.resets[1] != tc.reset:
						return fmt.Errorf("stream 1 reset %v, want %v", c.resets[1], tc.reset)
					case !tc.ends && c.goAway:
						return fmt.Errorf("GOAWAY %v, want the connection kept", c.goAwayCode)
					}
					return nil
				})
			}
			// Whatever the flood made is freed: the pending bodies end by
			// --body-timeout, the connection's goroutines with it.
			c.conn.Close()
			waitFor(t, 30*time.Second, func() error {
				if g := runtime.NumGoroutine() - goroutines; g > 4 {
					return fmt.Errorf("%d more goroutines", g)
				}
				return nil
			})
		})
	}
}
