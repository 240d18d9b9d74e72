package agentcli

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/relayhq/relay/internal/agentwire"
)

// The local client's limits: idle connections it keeps to the target, how
// long one may stay idle, its buffers (net/http's defaults), the interim
// (1xx) answers it skips before the final one (net/http's bound), and the
// bytes it reads for an answer's head (net/http's Transport allowed 10
// MiB; no webhook answer has a head of 1 MiB).
const (
	maxIdleLocal  = 256
	idleLocal     = 90 * time.Second
	localBufSize  = 4 << 10
	max1xxAnswers = 5
	// maxLocalHead is the relay's bound on an answer's head: what fits
	// in it never passes the relay's bounds on an answer's headers.
	maxLocalHead = agentwire.MaxAnswerHead
)

// errHeadTooLarge is the error of an answer whose head is past maxLocalHead.
var errHeadTooLarge = fmt.Errorf("the answer's head is larger than %d KiB", maxLocalHead>>10)

// localClient is the agent's HTTP/1.1 client for its one local target. It
// writes a request and reads the answer on the goroutine that forwards it:
// net/http's Transport hands every exchange to two goroutines of its own
// (one writes, one reads), and waking them cost the agent a fifth of its
// CPU per forward (docs/benchmarks.md). The bytes are net/http's all the
// same: Request.Write writes the request as the Transport does, and
// ReadResponse reads the answer.
//
// Like the Transport it keeps idle connections, drops one the target
// closed while it sat idle (see alive) and sends a request again on a new
// connection only when the Transport would: nothing of it could be sent,
// or it is replayable and the reused connection closed before answering.
type localClient struct {
	target Target
	tls    *tls.Config // nil for an http target
	// dial opens a TCP connection (a field: tests count writes on it).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu   sync.Mutex
	idle []*localConn // most recently used last
}

func newLocalClient(target Target, insecure bool) *localClient {
	c := &localClient{target: target, dial: newDialer().DialContext}
	if target.Scheme == "https" {
		host, _, err := net.SplitHostPort(target.Host)
		if err != nil {
			host = target.Host
		}
		c.tls = &tls.Config{ServerName: host, InsecureSkipVerify: insecure} //nolint:gosec // only with --insecure, for loopback targets
	}
	return c
}

// localConn is one connection to the target with its buffers.
type localConn struct {
	raw    net.Conn  // the TCP connection, for alive
	head   *headConn // what the exchange reads and writes, over TLS for https
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
	sent   bool // bytes of the exchange in progress were written
	// headLeft is how many more bytes br may read for the answer's head;
	// -1 while the body is read (bodyread bounds it).
	headLeft int64
	// stop disarms the cancellation of the exchange in progress; false
	// when the exchange's context ended first.
	stop func() bool
}

// roundTrip sends req and reads the head of the final answer. The caller
// reads the body and then hands the connection back with release.
func (c *localClient) roundTrip(req *http.Request) (*http.Response, *localConn, error) {
	if err := validFields(req.Header); err != nil {
		return nil, nil, err
	}
	ctx := req.Context()
	for retried := false; ; retried = true {
		lc, reused, err := c.conn(ctx)
		if err != nil {
			return nil, nil, err
		}
		resp, sent, err := lc.exchange(ctx, req)
		if err == nil {
			return resp, lc, nil
		}
		answered := lc.head.gotBytes()
		lc.close()
		if retried || !reused || ctx.Err() != nil || !again(req, sent, answered) {
			return nil, nil, err
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, nil, err
			}
			req.Body = body
		}
	}
}

// again is whether a request that failed on a reused connection goes out
// again on a new one, by net/http's Transport's rule: when none of it
// could be sent, or when the request is replayable (a method without side
// effects or an idempotency key) and the connection closed before any
// byte of an answer came.
func again(req *http.Request, sent, answered bool) bool {
	switch {
	case !sent:
		return true
	case answered:
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// validFields refuses what net/http's Transport refuses: a field name that
// is not a token, or a value with a control character.
func validFields(h http.Header) error {
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("net/http: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
	}
	return nil
}

// conn takes the most recently used idle connection that is still open,
// or dials a new one; reused says which.
func (c *localClient) conn(ctx context.Context) (lc *localConn, reused bool, err error) {
	now := time.Now()
	for {
		c.mu.Lock()
		n := len(c.idle)
		if n == 0 {
			c.mu.Unlock()
			break
		}
		lc = c.idle[n-1]
		c.idle[n-1] = nil
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		if now.Sub(lc.idleAt) < idleLocal && alive(lc.raw, now.Sub(lc.idleAt)) {
			return lc, true, nil
		}
		lc.close()
	}
	lc, err = c.open(ctx)
	return lc, false, err
}

// open dials the target, with the TLS handshake for https.
func (c *localClient) open(ctx context.Context) (*localConn, error) {
	raw, err := c.dial(ctx, "tcp", c.target.Host)
	if err != nil {
		return nil, err
	}
	conn := raw
	if c.tls != nil {
		tc := tls.Client(raw, c.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		conn = tc
	}
	lc := &localConn{raw: raw, head: &headConn{Conn: conn}, headLeft: -1}
	lc.br = bufio.NewReaderSize(headReader{lc}, localBufSize)
	lc.bw = bufio.NewWriterSize(sentWriter{lc}, localBufSize)
	return lc, nil
}

// headReader is what a connection's bufio.Reader reads from: the
// connection, up to headLeft bytes while an answer's head is read.
type headReader struct{ lc *localConn }

func (r headReader) Read(p []byte) (int, error) {
	lc := r.lc
	if lc.headLeft == 0 {
		return 0, errHeadTooLarge
	}
	if lc.headLeft > 0 && int64(len(p)) > lc.headLeft {
		p = p[:lc.headLeft]
	}
	n, err := lc.head.Read(p)
	if lc.headLeft > 0 {
		lc.headLeft -= int64(n)
	}
	return n, err
}

// sentWriter notes that bytes of the exchange were written.
type sentWriter struct{ lc *localConn }

func (w sentWriter) Write(p []byte) (int, error) {
	n, err := w.lc.head.Write(p)
	if n > 0 {
		w.lc.sent = true
	}
	return n, err
}

// exchange writes req and reads up to the final answer's head (answer).
// sent is whether any of req may have reached the target. The exchange is cut off when ctx ends: the
// connection's deadline is set in the past, and the caller's read or
// write fails at once.
func (lc *localConn) exchange(ctx context.Context, req *http.Request) (resp *http.Response, sent bool, err error) {
	lc.sent = false
	lc.stop = context.AfterFunc(ctx, func() { _ = lc.head.SetDeadline(time.Unix(1, 0)) })
	err = req.Write(lc.bw)
	if err == nil {
		err = lc.bw.Flush()
	}
	if err != nil {
		if !lc.sent {
			return nil, false, err
		}
		// The target may have answered before it stopped reading (a 413
		// for a body past its own limit): that answer is what it said,
		// and it is passed on. The connection is not used again: the
		// request was not written whole.
		resp, rerr := lc.answer(req)
		if rerr != nil {
			return nil, true, err
		}
		resp.Close = true
		return resp, true, nil
	}
	resp, err = lc.answer(req)
	return resp, true, err
}

// answer reads up to the final answer's head, skipping interim answers as
// the Transport does.
func (lc *localConn) answer(req *http.Request) (*http.Response, error) {
	lc.headLeft = maxLocalHead
	for n := 0; ; n++ {
		resp, err := http.ReadResponse(lc.br, req)
		if err != nil {
			return nil, err
		}
		code := resp.StatusCode
		if code < 100 || code > 199 || code == http.StatusSwitchingProtocols {
			lc.headLeft = -1
			return resp, nil
		}
		if n == max1xxAnswers {
			return nil, errors.New("net/http: too many 1xx informational responses")
		}
	}
}

// release hands lc back after its answer's body was read: to the idle
// connections when reusable (the body read to its end, nothing more sent,
// neither side asked to close, the exchange not cut off), else it closes.
func (c *localClient) release(lc *localConn, resp *http.Response, reusable bool) {
	cut := !lc.stop()
	if !reusable || cut || resp.Close || resp.Request.Close || resp.StatusCode == http.StatusSwitchingProtocols ||
		lc.br.Buffered() > 0 {
		lc.close()
		return
	}
	lc.idleAt = time.Now()
	c.mu.Lock()
	if len(c.idle) >= maxIdleLocal {
		c.mu.Unlock()
		lc.close()
		return
	}
	c.idle = append(c.idle, lc)
	c.mu.Unlock()
}

// closeIdle closes the idle connections.
func (c *localClient) closeIdle() {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, lc := range idle {
		lc.close()
	}
}

// close closes the connection; a cut-off exchange's deadline goes with it.
func (lc *localConn) close() {
	if lc.stop != nil {
		lc.stop()
	}
	_ = lc.head.Close()
}
