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
var refusal = refusalAnswer("429 Too Many Requests", "Too Many Requests: too many open connections from your address\n")

// networkRefusal answers a connection over its network's cap.
var networkRefusal = refusalAnswer("429 Too Many Requests", "Too Many Requests: too many open connections from your network\n")

// fullRefusal answers a connection over the relay-wide cap: the relay,
// not the client, is out of room, so it is a 503.
var fullRefusal = refusalAnswer("503 Service Unavailable", "Service Unavailable: the relay holds as many connections as it can; retry later\n")

func refusalAnswer(status, body string) string {
	return "HTTP/1.1 " + status + "\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Retry-After: 1\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// Listener caps the connections open at once from each client IP address,
// from each client network, and in all, and gives every accepted
// connection a write deadline that moves with progress. Its Accept never
// returns a refused connection: it answers it 429 (or 503 when the relay
// is full) and waits for the next.
type Listener struct {
	net.Listener
	// OnRefuse, when set before the first Accept, is called for every
	// connection refused over the cap (for a metric).
	OnRefuse func()
	// Unlimited, when set before the first Accept, exempts the IPs for
	// which it is true from the cap (trusted proxies, which carry many
	// clients' connections).
	Unlimited func(ip string) bool
	// MaxPerNetwork, when changed before the first Accept, is the most
	// connections one client network (clientkey.Network) may hold open;
	// NewListener sets it to clientkey.NetworkShare × maxPerIP. Addresses
	// Unlimited exempts do not count.
	MaxPerNetwork int
	// MaxOpen, when set before the first Accept, is the most connections
	// the listener holds open in all, exempt addresses' included (zero: no
	// cap): OpenCap of the descriptor limit, so that the relay refuses
	// connections rather than failing accept() and its own file opens.
	MaxOpen int

	maxPerIP     int
	writeTimeout time.Duration

	open     clientkey.Caps
	total    clientkey.Counter // under one key, totalKey
	refusing chan struct{}
}

// totalKey is the one key of Listener.total.
const totalKey = ""

// NewListener wraps ln. maxPerIP is the most connections one IP address may
// hold open; writeTimeout is how long one write to a client may make no
// progress before the connection fails (zero: no limit).
func NewListener(ln net.Listener, maxPerIP int, writeTimeout time.Duration) *Listener {
	return &Listener{
		Listener: ln, maxPerIP: maxPerIP, writeTimeout: writeTimeout, MaxPerNetwork: clientkey.NetworkShare * maxPerIP,
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
		release, answer := l.take(ip)
		if answer != "" {
			if l.OnRefuse != nil {
				l.OnRefuse()
			}
			l.refuse(c, answer)
			continue
		}
		return &conn{Conn: c, writeTimeout: l.writeTimeout, release: release}, nil
	}
}

// Open is how many accepted connections ip holds now (none counted for
// an address Unlimited exempts).
func (l *Listener) Open(ip string) int {
	return l.open.Held(ip)
}

// take counts a connection from ip against the relay's cap, ip's and its
// network's, and returns what gives them back, or the refusal of the first
// cap it is over. The relay-wide cap comes first: when the relay is full,
// no client is at fault.
func (l *Listener) take(ip string) (release func(), answer string) {
	maxOpen := l.MaxOpen
	if maxOpen <= 0 {
		maxOpen = math.MaxInt
	}
	if !l.total.Take(totalKey, maxOpen) {
		return nil, fullRefusal
	}
	if l.Unlimited != nil && l.Unlimited(ip) {
		return func() { l.total.Release(totalKey) }, ""
	}
	switch l.open.Take(ip, l.maxPerIP, l.MaxPerNetwork) {
	case clientkey.ClientFull:
		l.total.Release(totalKey)
		return nil, refusal
	case clientkey.NetworkFull:
		l.total.Release(totalKey)
		return nil, networkRefusal
	}
	return func() { l.open.Release(ip); l.total.Release(totalKey) }, ""
}

// refuse answers c with answer and closes it without blocking Accept.
func (l *Listener) refuse(c net.Conn, answer string) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		Refuse(c, answer)
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
