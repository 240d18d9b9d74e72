package tlslisten

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// recordTypeHandshake is the first byte of every TLS connection.
const recordTypeHandshake = 0x16

// Listener sorts the connections of the listener below into TLS and plain
// ones. Each is looked at in its own goroutine, so a slow client holds up
// no other; the first byte and the whole TLS handshake must arrive within
// the handshake timeout, or the connection is closed.
type Listener struct {
	inner   net.Listener
	config  *tls.Config
	timeout time.Duration
	log     *slog.Logger

	conns     chan net.Conn
	errs      chan error
	done      chan struct{}
	closeOnce sync.Once
}

// NewListener starts accepting from inner. config serves the TLS
// connections; timeout bounds the wait for the first byte and the TLS
// handshake.
func NewListener(inner net.Listener, config *tls.Config, timeout time.Duration, log *slog.Logger) *Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Listener{
		inner: inner, config: config, timeout: timeout, log: log,
		conns: make(chan net.Conn), errs: make(chan error), done: make(chan struct{}),
	}
	go l.run()
	return l
}

func (l *Listener) run() {
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case l.errs <- err:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go l.sort(c)
	}
}

// sort waits for the first byte and either completes the TLS handshake or
// hands on the plain connection with that byte still to read.
func (l *Listener) sort(c net.Conn) {
	deadline := time.Now().Add(l.timeout)
	_ = c.SetDeadline(deadline)
	first := make([]byte, 1)
	if _, err := c.Read(first); err != nil {
		c.Close() // a client that connects and says nothing within the timeout
		return
	}
	pc := &peekedConn{Conn: c, first: first}
	var out net.Conn = pc
	if first[0] == recordTypeHandshake {
		tc := tls.Server(pc, l.config)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			l.log.Debug("TLS handshake failed", "remote", c.RemoteAddr().String(), "error", err)
			tc.Close()
			return
		}
		out = tc
	}
	_ = c.SetDeadline(time.Time{})
	select {
	case l.conns <- out:
	case <-l.done:
		out.Close()
	}
}

// Accept returns the next sorted connection: a *tls.Conn whose handshake
// is done, or a plain one.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections still being sorted are closed.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.inner.Close()
	})
	return err
}

// Addr is the address of the listener below.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// peekedConn gives back the byte read to sort the connection before
// anything else.
type peekedConn struct {
	net.Conn
	mu    sync.Mutex
	first []byte
}

func (c *peekedConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.first) > 0 && len(p) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// CloseWrite passes net/http's half-close on (see connguard).
func (c *peekedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn is the connection below.
func (c *peekedConn) NetConn() net.Conn { return c.Conn }

// State is the TLS state of c, looking through wrappers that offer
// NetConn (as ingress's request-line wrapper does); nil for a plain
// connection.
func State(c net.Conn) *tls.ConnectionState {
	for range 8 {
		if tc, ok := c.(*tls.Conn); ok {
			st := tc.ConnectionState()
			return &st
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

type stateKey struct{}

// ConnContext is an http.Server ConnContext hook that keeps the TLS state
// of connections net/http reads as plain HTTP/1.1 (ingress wraps TLS
// connections to read their request line as sent), for MarkTLS.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if st := State(c); st != nil {
		return context.WithValue(ctx, stateKey{}, st)
	}
	return ctx
}

// MarkTLS sets r.TLS for requests that came over TLS on a connection
// net/http did not see as one (see ConnContext), so everything below can
// ask r.TLS.
func MarkTLS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if st, ok := r.Context().Value(stateKey{}).(*tls.ConnectionState); ok {
				r.TLS = st
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Merge accepts from several listeners as one (--listen and
// --http-listen share one server and its limits). Addr is the first's.
func Merge(lns ...net.Listener) net.Listener {
	m := &merged{lns: lns, conns: make(chan acceptResult), done: make(chan struct{})}
	for _, ln := range lns {
		go func() {
			for {
				c, err := ln.Accept()
				select {
				case m.conns <- acceptResult{c, err}:
				case <-m.done:
					if c != nil {
						c.Close()
					}
					return
				}
				if errors.Is(err, net.ErrClosed) {
					return
				}
			}
		}()
	}
	return m
}

type acceptResult struct {
	c   net.Conn
	err error
}

type merged struct {
	lns       []net.Listener
	conns     chan acceptResult
	done      chan struct{}
	closeOnce sync.Once
}

func (m *merged) Accept() (net.Conn, error) {
	select {
	case r := <-m.conns:
		return r.c, r.err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *merged) Close() error {
	var errs []error
	m.closeOnce.Do(func() {
		close(m.done)
		for _, ln := range m.lns {
			errs = append(errs, ln.Close())
		}
	})
	return errors.Join(errs...)
}

func (m *merged) Addr() net.Addr { return m.lns[0].Addr() }
