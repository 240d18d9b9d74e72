package agentcli

import (
	"bufio"
	"bytes"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// maxHeadCapture bounds the response bytes a headConn keeps per request.
const maxHeadCapture = 16 << 10

// headConn keeps the first bytes the local target sends after each request
// on a connection. net/http's ReadResponse deletes a response's whole Connection
// field when it says "close" (it handles that itself), and with it the
// names of other hop-by-hop headers listed there ("Connection: close,
// X-Hop"); without them the agent would pass X-Hop on. The kept bytes hold
// the response head, from which connectionNames reads the field back.
//
// The local client (localclient.go) writes a request, then reads its
// response; it never pipelines. So the first Write after bytes were read
// starts a new request and the capture starts over. Over https it sits
// above TLS, so it keeps the response head in clear.
type headConn struct {
	net.Conn
	mu   sync.Mutex
	head []byte
	read bool // bytes were read since the capture started over
}

func newDialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
}

func (c *headConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.read {
		c.head, c.read = c.head[:0], false
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *headConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.read = true
		if room := maxHeadCapture - len(c.head); room > 0 {
			c.head = append(c.head, p[:min(n, room)]...)
		}
		c.mu.Unlock()
	}
	return n, err
}

// gotBytes is whether bytes were read since the last request was written.
func (c *headConn) gotBytes() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}

// connectionNames returns the header names listed in the Connection
// fields of the final response head read since the last request, or nil
// when that head is not (entirely) among the kept bytes.
func (c *headConn) connectionNames() []string {
	c.mu.Lock()
	rest := bytes.Clone(c.head)
	c.mu.Unlock()
	for {
		end := bytes.Index(rest, []byte("\r\n\r\n"))
		if end < 0 {
			return nil
		}
		r := textproto.NewReader(bufio.NewReader(bytes.NewReader(rest[:end+4])))
		status, err := r.ReadLine()
		if err != nil {
			return nil
		}
		h, err := r.ReadMIMEHeader()
		if err != nil {
			return nil
		}
		if _, code, _ := strings.Cut(status, " "); strings.HasPrefix(code, "1") {
			rest = rest[end+4:] // an interim answer (100 Continue); the final one follows
			continue
		}
		var names []string
		for _, v := range h.Values("Connection") {
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); f != "" && !strings.EqualFold(f, "close") {
					names = append(names, f)
				}
			}
		}
		return names
	}
}
