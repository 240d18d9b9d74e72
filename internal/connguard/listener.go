package connguard

import (
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/relayhq/relay/internal/clientkey"
)

const (
	// refusalLinger is how long a refused connection is kept to read what
	// the client sent, so the refusal reaches it before the close (closing
	// a socket with unread input sends a reset that can discard the answer).
	refusalLinger = 500 * time.Millisecond
	// maxRefusing bounds refused connections lingering at once; beyond it a
	// refused connection is closed at once, so refusals cannot pile up
	// descriptors either.
	maxRefusing = 64
)

// refusal is the whole answer to a connection over the cap: written on the
// raw connection, before any HTTP parsing, and followed by a close.
var refusal = func() string {
	body := "Too Many Requests: too many open connections from your address\n"
	return "HTTP/1.1 429 Too Many Requests\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Retry-After: 1\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

// Listener caps the connections open at once from each client IP address
// and gives every accepted connection a write deadline that moves with
// progress. Its Accept never returns a refused connection: it answers it
// 429 and waits for the next.
type Listener struct {
	net.Listener
	// OnRefuse, when set before the first Accept, is called for every
	// connection refused over the cap (for a metric).
	OnRefuse func()
	// Unlimited, when set before the first Accept, exempts the IPs for
	// which it is true from the cap (trusted proxies, which carry many
	// clients' connections).
	Unlimited func(ip string) bool

	maxPerIP     int
	writeTimeout time.Duration

	open     clientkey.Counter
	refusing chan struct{}
}

// NewListener wraps ln. maxPerIP is the most connections one IP address may
// hold open; writeTimeout is how long one write to a client may make no
// progress before the connection fails (zero: no limit).
func NewListener(ln net.Listener, maxPerIP int, writeTimeout time.Duration) *Listener {
	return &Listener{
		Listener: ln, maxPerIP: maxPerIP, writeTimeout: writeTimeout,
		refusing: make(chan struct{}, maxRefusing),
	}
}

// Accept returns the next connection whose address is under its cap.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientkey.OfAddr(c.RemoteAddr())
		if !l.take(ip) {
			if l.OnRefuse != nil {
				l.OnRefuse()
			}
			l.refuse(c)
			continue
		}
		return &conn{Conn: c, writeTimeout: l.writeTimeout, release: func() { l.release(ip) }}, nil
	}
}

// Open is how many accepted connections ip holds now.
func (l *Listener) Open(ip string) int {
	return l.open.Held(ip)
}

func (l *Listener) take(ip string) bool {
	if l.Unlimited != nil && l.Unlimited(ip) {
		return l.open.Take(ip, math.MaxInt)
	}
	return l.open.Take(ip, l.maxPerIP)
}

func (l *Listener) release(ip string) { l.open.Release(ip) }

// refuse answers c 429 and closes it without blocking Accept.
func (l *Listener) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		Refuse(c, refusal)
	}()
}

// Refuse writes answer, a whole HTTP response that ends with Connection:
// close, on the raw connection c before any HTTP parsing, half-closes it
// and reads what the client still sends until it closes, for at most half
// a second and 64 KiB: closing a socket with unread input sends a reset
// that can discard the answer. The caller closes c.
func Refuse(c net.Conn, answer string) {
	_ = c.SetDeadline(time.Now().Add(refusalLinger))
	if _, err := io.WriteString(c, answer); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// conn releases its address's slot once, on the first Close, and pushes its
// write deadline forward before every write.
type conn struct {
	net.Conn
	writeTimeout time.Duration
	once         sync.Once
	release      func()
}

func (c *conn) Write(p []byte) (int, error) {
	if c.writeTimeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.writeTimeout)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite lets net/http half-close the connection before it closes it,
// as it does with a bare TCP connection, so a final answer is not lost to
// a reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
