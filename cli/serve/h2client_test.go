package serve

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/systemtest/harness"
)

// startTLSServe runs `relay serve` in this process as startServe does, with
// a certificate for localhost and *.localhost from a CA of the test's.
func startTLSServe(t *testing.T, args ...string) (*servedRelay, *harness.CA) {
	t.Helper()
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "*.localhost", "localhost")
	r := startServe(t, append([]string{"--tls-cert", cert, "--tls-key", key}, args...)...)
	r.base = "https://127.0.0.1:" + r.port
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	r.client = &http.Client{Transport: tr, Timeout: time.Minute}
	return r, ca
}

// h2Client is one raw HTTP/2 connection to a relay, built on x/net's
// Framer and hpack encoder, so a test can send what net/http's client
// never would (header lists of tiny fields, streams it never reads, resets)
// and see every frame the relay answers with. It answers PINGs and
// SETTINGS, as an attacker keeping its connection alive would, and sends
// no WINDOW_UPDATE unless asked.
type h2Client struct {
	t    *testing.T
	conn *tls.Conn

	wmu  sync.Mutex // the writing half of fr, enc and hbuf
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32

	mu         sync.Mutex
	statuses   map[uint32]int
	resets     map[uint32]http2.ErrCode
	data       map[uint32]int
	ended      map[uint32]bool
	goAway     bool
	goAwayCode http2.ErrCode
	readErr    error
	done       chan struct{}
}

// dialH2 opens an HTTP/2 connection from local (an address of 127/8) to the
// relay, with SNI host, and sends the preface and settings.
func dialH2(t *testing.T, r *servedRelay, ca *harness.CA, local, host string, settings ...http2.Setting) *h2Client {
	t.Helper()
	return dialH2Reading(t, r, ca, local, host, true, settings...)
}

// dialH2Reading is dialH2; a client that does not read takes no frame the
// relay sends, as a client that floods and never reads, and keeps a small
// socket receive buffer, so what the relay sends it backs up soon.
func dialH2Reading(t *testing.T, r *servedRelay, ca *harness.CA, local, host string, read bool, settings ...http2.Setting) *h2Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	raw, err := d.Dial("tcp", "127.0.0.1:"+r.port)
	if err != nil {
		t.Fatal(err)
	}
	if !read {
		if err := raw.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
			t.Fatal(err)
		}
	}
	conn := tls.Client(raw, &tls.Config{RootCAs: ca.Pool, ServerName: host, NextProtos: []string{"h2"}})
	t.Cleanup(func() { conn.Close() })
	if err := conn.HandshakeContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	c := &h2Client{
		t: t, conn: conn, next: 1,
		statuses: map[uint32]int{}, resets: map[uint32]http2.ErrCode{}, data: map[uint32]int{}, ended: map[uint32]bool{},
		done: make(chan struct{}),
	}
	c.fr = http2.NewFramer(conn, conn)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	c.write(func() error { return c.fr.WriteSettings(settings...) })
	if read {
		go c.read()
	}
	return c
}

func (c *h2Client) write(f func() error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := f(); err != nil {
		c.t.Errorf("HTTP/2 write: %v", err)
	}
}

// ack answers a PING or SETTINGS: one the relay sent as it ended the
// connection finds it closed, which is no failure of the test.
func (c *h2Client) ack(f func() error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = f()
}

// read takes every frame the relay sends until the connection ends.
func (c *h2Client) read() {
	defer close(c.done)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.mu.Lock()
			c.readErr = err
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if s, err := strconv.Atoi(f.PseudoValue("status")); err == nil {
				c.statuses[f.StreamID] = s
			}
			if f.StreamEnded() {
				c.ended[f.StreamID] = true
			}
		case *http2.DataFrame:
			c.data[f.StreamID] += len(f.Data())
			if f.StreamEnded() {
				c.ended[f.StreamID] = true
			}
		case *http2.RSTStreamFrame:
			c.resets[f.StreamID] = f.ErrCode
		case *http2.GoAwayFrame:
			c.goAway, c.goAwayCode = true, f.ErrCode
		case *http2.PingFrame:
			if !f.IsAck() {
				go c.ack(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				go c.ack(c.fr.WriteSettingsAck)
			}
		}
		c.mu.Unlock()
	}
}

// open sends a request's HEADERS (split into CONTINUATION frames of at
// most 16 KiB), ending the stream when end is set, and returns its id.
func (c *h2Client) open(method, host, path string, fields []hpack.HeaderField, end bool) uint32 {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	id := c.next
	c.next += 2
	c.hbuf.Reset()
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: method}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: host}, {Name: ":path", Value: path},
	}, fields...) {
		if err := c.enc.WriteField(f); err != nil {
			c.t.Fatal(err)
		}
	}
	block := c.hbuf.Bytes()
	const frag = 16 << 10
	first := block[:min(frag, len(block))]
	block = block[len(first):]
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(block) == 0}); err != nil {
		c.t.Errorf("HEADERS: %v", err)
		return id
	}
	for len(block) > 0 {
		part := block[:min(frag, len(block))]
		block = block[len(part):]
		if err := c.fr.WriteContinuation(id, len(block) == 0, part); err != nil {
			c.t.Errorf("CONTINUATION: %v", err)
			return id
		}
	}
	return id
}

// sendData sends p on stream id.
func (c *h2Client) sendData(id uint32, end bool, p []byte) {
	c.write(func() error { return c.fr.WriteData(id, end, p) })
}

// counts is a snapshot of what the relay answered.
func (c *h2Client) counts() (statuses map[int]int, resets, ended int, goAway bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	statuses = map[int]int{}
	for _, s := range c.statuses {
		statuses[s]++
	}
	return statuses, len(c.resets), len(c.ended), c.goAway
}

// answered is how many streams the relay answered (HEADERS with a status)
// or reset.
func (c *h2Client) answered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.statuses)
	for id := range c.resets {
		if _, ok := c.statuses[id]; !ok {
			n++
		}
	}
	return n
}

// inFlight reads relay_http_requests_in_flight of area from /metrics, over
// a plain HTTP/1.1 connection of its own.
func (r *servedRelay) inFlight(t *testing.T, area string) int {
	t.Helper()
	conn, err := net.Dial("tcp", "127.0.0.1:"+r.port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: localhost:%s\r\nConnection: close\r\n\r\n", r.port)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^relay_http_requests_in_flight\{area="` + area + `"\} (\d+)`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// heapInUse is the heap in use after two collections.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// heapNow is the heap in use, garbage included, without a collection: cheap
// enough to poll while the relay works.
func heapNow() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// waitFor polls check until it returns nil, for at most limit.
func waitFor(t *testing.T, limit time.Duration, check func() error) {
	t.Helper()
	testwait.CheckFor(t, limit, 20*time.Millisecond, check)
}
