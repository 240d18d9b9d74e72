package ingress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/relayhq/relay/internal/connguard"
)

// Request targets with invalid percent-encoding ("/%zz", "/a%2") are refused
// by net/http before any handler runs: its request reader parses the target
// with url.ParseRequestURI and answers a parse error with its own
// "400 Bad Request". http.Server has no option to accept such a target, and
// r.RequestURI is only kept when the parse succeeds. Yet a sender may post
// to such a path, and the relay records every request as it arrived.
//
// The least intrusive way found is to make the target parseable before
// net/http reads it and to hand the handler the original: a conn wrapper
// rewrites only the request line, and only its invalid '%' (to "%25", which
// still reads as a literal percent sign to routing), and remembers the line
// as sent. It knows where a request line starts from the server's own
// ConnState hook: a connection is new, or idle after its last response,
// exactly when the next bytes begin a request. (HTTP/1.1 pipelining, which
// no webhook sender uses, leaves later requests as net/http reads them.)
// Everything else passes through untouched, and the handler asks
// originalTarget for the target as sent.

// maxRequestLine bounds the request line the wrapper holds to rewrite it;
// longer lines pass unchanged (net/http refuses them if they are invalid).
const maxRequestLine = 16 << 10

// MaxHeaderLines bounds the header lines of an HTTP/1.x request, counted as
// they arrive, before net/http parses them. MaxHeaderBytes alone bounds
// the bytes, not what net/http builds of them: each line becomes a string
// slot in the header map (and an entry of the capture's list), so 64 KiB of
// "a:\r\n" lines (16 000 of them) took about 0.9 MiB of heap, and of
// distinct names 1.3 MiB, for as long as the request lived (a body that
// trickles, a forward waiting for its answer), 20 times the bytes. Beyond
// it the request is answered 431 and its connection closed. An HTTP/2
// request's header fields are held to the same count by HeaderFieldCap.
const MaxHeaderLines = 1000

// headerLinesRefusal is the answer to a request over MaxHeaderLines.
var headerLinesRefusal = func() string {
	body := "Request Header Fields Too Large: more than " + strconv.Itoa(MaxHeaderLines) + " header lines\n"
	return "HTTP/1.1 431 Request Header Fields Too Large\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

// HeaderFieldCap answers an HTTP/2 request with more than MaxHeaderLines
// header fields (its :authority counted as HTTP/1.x counts Host) 431
// before next sees it, and so before it is counted, recorded or held.
// HTTP/2 has no header lines to count as they arrive: its header list
// size (MaxHeaderBytes) counts 32 bytes per field besides its name and
// value, which let 1 880 fields of three-letter names through, each a byte
// on the wire once HPACK indexed it; 50 such requests waiting for their
// bodies held 13 MiB of header maps, 1.8 times what 50 of 1 000 lines
// hold. net/http has built the map when next would run; refused here, it
// is garbage at once. Mount it outermost.
func HeaderFieldCap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor >= 2 && headerFields(r.Header) >= MaxHeaderLines {
			h := w.Header()
			h.Set("Content-Type", "text/plain; charset=utf-8")
			h.Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
			_, _ = w.Write([]byte(headerFieldsRefusal))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headerFieldsRefusal is the body of HeaderFieldCap's 431.
var headerFieldsRefusal = "Request Header Fields Too Large: more than " + strconv.Itoa(MaxHeaderLines) + " header fields\n"

// headerFields counts the values of h.
func headerFields(h http.Header) int {
	n := 0
	for _, v := range h {
		n += len(v)
	}
	return n
}

// errTooManyHeaderLines ends the read of a request over MaxHeaderLines. It
// reaches net/http as a read error, which it answers with nothing: the
// refusal is already written.
var errTooManyHeaderLines = errors.New("more than " + strconv.Itoa(MaxHeaderLines) + " header lines")

// TolerateTargets returns ln wrapped so that srv's handlers see requests
// whose target has invalid percent-encoding, and installs the ConnState
// and ConnContext hooks that go with it (keeping any set before). Call it
// before srv.Serve; srv.ReadHeaderTimeout also bounds the request line.
func TolerateTargets(srv *http.Server, ln net.Listener) net.Listener {
	prevState, prevContext := srv.ConnState, srv.ConnContext
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if tc, ok := c.(*targetConn); ok && st == http.StateIdle {
			tc.expectRequestLine()
		}
		if prevState != nil {
			prevState(c, st)
		}
	}
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prevContext != nil {
			ctx = prevContext(ctx, c)
		}
		if tc, ok := c.(*targetConn); ok {
			ctx = context.WithValue(ctx, targetConnKey{}, tc)
		}
		return ctx
	}
	return &targetListener{Listener: ln, lineTimeout: srv.ReadHeaderTimeout}
}

type targetListener struct {
	net.Listener
	lineTimeout time.Duration
}

func (l *targetListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
		// HTTP/2 has no request line to mend, and net/http speaks it only
		// on a *tls.Conn it can see.
		return c, nil
	}
	return &targetConn{Conn: c, expect: true, lineTimeout: l.lineTimeout}, nil
}

type targetConnKey struct{}

// targetConn is a connection whose next request line may be rewritten.
type targetConn struct {
	net.Conn
	lineTimeout time.Duration

	mu        sync.Mutex
	expect    bool   // the next bytes read begin a request line
	pending   []byte // the (rewritten) line and what came with it, not yet read
	pendErr   error  // the error that ended the line, after pending
	rewritten string // the target as the handler sees it, "" when unchanged
	original  string // the target as sent

	lines   lineCount // the header block being read; only the reader touches it
	refused error     // set once the request is refused: every read returns it
}

// lineCount follows the header block of the request being read, from its
// request line to the empty line that ends it.
type lineCount struct {
	scanning bool
	lines    int  // complete lines so far, the request line included
	lineLen  int  // bytes of the current line so far
	last     byte // the current line's last byte so far
}

// tooMany counts the lines in b, the next bytes read, and reports whether
// the block has more than MaxHeaderLines header lines. The bytes after the
// block (the body) are not looked at.
func (lc *lineCount) tooMany(b []byte) bool {
	for lc.scanning && len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			lc.lineLen += len(b)
			lc.last = b[len(b)-1]
			return false
		}
		if i > 0 {
			lc.last = b[i-1]
		}
		empty := lc.lineLen+i == 0 || lc.lineLen+i == 1 && lc.last == '\r'
		lc.lineLen = 0
		b = b[i+1:]
		switch {
		case empty && lc.lines > 0:
			lc.scanning = false // the block's end
		case !empty:
			lc.lines++
			if lc.lines > MaxHeaderLines+1 {
				return true
			}
		}
	}
	return false
}

// CloseWrite passes net/http's half-close on to the connection below, so a
// refusal such as 431 reaches the sender before the close instead of being
// lost to a reset.
func (c *targetConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn is the connection below (a TLS one tells its state through it).
func (c *targetConn) NetConn() net.Conn { return c.Conn }

func (c *targetConn) expectRequestLine() {
	c.mu.Lock()
	c.expect = true
	c.mu.Unlock()
}

// Read is the connection's Read, except that a request line is read whole
// and made parseable first, and a request with more than MaxHeaderLines
// header lines is answered 431 before net/http parses them.
func (c *targetConn) Read(p []byte) (int, error) {
	if c.refused != nil {
		return 0, c.refused
	}
	n, err := c.read(p)
	if c.lines.tooMany(p[:n]) {
		connguard.Refuse(c.Conn, headerLinesRefusal)
		c.refused = &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errTooManyHeaderLines}
		return 0, c.refused
	}
	return n, err
}

func (c *targetConn) read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.pending) > 0 || c.pendErr != nil {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		var err error
		if len(c.pending) == 0 {
			err, c.pendErr = c.pendErr, nil
		}
		c.mu.Unlock()
		return n, err
	}
	expect := c.expect
	c.expect = false
	if expect { // a new request: the last one's rewrite is no longer this one's
		c.rewritten, c.original = "", ""
		c.lines = lineCount{scanning: true}
	}
	c.mu.Unlock()
	if !expect {
		return c.Conn.Read(p)
	}
	// A sender sends its request line, and most often the whole request,
	// at once: it is read straight into p, and a whole line without a '%'
	// (nothing to mend) is handed on as it is, in one read.
	n, err := c.Conn.Read(p)
	if end := bytes.IndexByte(p[:n], '\n'); end >= 0 && bytes.IndexByte(p[:end], '%') < 0 {
		return n, err
	}
	buf, err := c.readLine(append(make([]byte, 0, max(512, n)), p[:n]...), err)
	fixed, rewritten, original := fixRequestLine(buf)
	c.mu.Lock()
	c.rewritten, c.original = rewritten, original
	c.pending, c.pendErr = fixed, err
	c.mu.Unlock()
	return c.read(p)
}

// readLine reads on from buf (the first read's bytes, err its error) until
// the end of the first line, maxRequestLine bytes or an error. Once the
// first bytes arrived, the rest of the line must come within lineTimeout
// (the server sets its header timeout only after them).
func (c *targetConn) readLine(buf []byte, err error) ([]byte, error) {
	started := false
	for {
		if len(buf) > 0 && !started && c.lineTimeout > 0 {
			started = true
			_ = c.Conn.SetReadDeadline(time.Now().Add(c.lineTimeout))
		}
		if err != nil || bytes.IndexByte(buf, '\n') >= 0 || len(buf) >= maxRequestLine {
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		var n int
		n, err = c.Conn.Read(buf[len(buf):min(cap(buf), maxRequestLine)])
		buf = buf[:len(buf)+n]
	}
}

// fixRequestLine returns buf with every '%' in the request line's target
// that starts no valid escape replaced by "%25", and both targets when it
// changed something. The line is split as net/http splits it.
func fixRequestLine(buf []byte) (fixed []byte, rewritten, original string) {
	end := bytes.IndexByte(buf, '\n')
	if end < 0 {
		return buf, "", ""
	}
	line := string(buf[:end])
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !strings.HasPrefix(proto, "HTTP/") {
		return buf, "", ""
	}
	fixedTarget := escapeStrayPercents(target)
	if fixedTarget == target {
		return buf, "", ""
	}
	out := make([]byte, 0, len(buf)+len(fixedTarget)-len(target))
	out = append(out, method...)
	out = append(out, ' ')
	out = append(out, fixedTarget...)
	out = append(out, ' ')
	out = append(out, buf[len(method)+1+len(target)+1:]...)
	return out, fixedTarget, target
}

// escapeStrayPercents replaces each '%' of the path (before any '?': the
// query is not decoded by net/http) that is not followed by two hex digits.
func escapeStrayPercents(target string) string {
	path, query, hasQuery := strings.Cut(target, "?")
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		b.WriteByte(path[i])
		if path[i] == '%' && (i+2 >= len(path) || !isHex(path[i+1]) || !isHex(path[i+2])) {
			b.WriteString("25")
		}
	}
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(query)
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// originalTarget is r.RequestURI as the sender sent it: the wrapper's
// original when it rewrote this request's line, else r.RequestURI.
func originalTarget(r *http.Request) string {
	tc, ok := r.Context().Value(targetConnKey{}).(*targetConn)
	if !ok {
		return r.RequestURI
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.rewritten != "" && tc.rewritten == r.RequestURI {
		return tc.original
	}
	return r.RequestURI
}
