package apiclient

import (
	"fmt"
	"net"
	"sync/atomic"
)

// MaxHandshake bounds what a WebSocket dial reads before its socket is
// upgraded: a proxy's answer, TLS's handshake and the relay's answer to
// the upgrade. The dialer reads that answer with http.ReadResponse, which
// keeps header lines without end, so a relay (or whatever answers at its
// address) could fill memory at network speed until the handshake timed
// out; a real answer is a few hundred bytes, a TLS handshake a few KiB.
const MaxHandshake = 1 << 20

// HandshakeTooLargeError is a handshake past MaxHandshake bytes.
type HandshakeTooLargeError struct{}

func (*HandshakeTooLargeError) Error() string {
	return fmt.Sprintf("the answer to the WebSocket handshake is over %d MiB, more than any relay's", MaxHandshake>>20)
}

// HandshakeConn is a connection whose reads fail past MaxHandshake bytes
// until Upgraded is called, once the dial returned.
type HandshakeConn struct {
	net.Conn
	left     int64 // read only by the dialer, before Upgraded
	upgraded atomic.Bool
}

// LimitHandshake is c with its reads bounded by MaxHandshake until
// Upgraded.
func LimitHandshake(c net.Conn) *HandshakeConn {
	return &HandshakeConn{Conn: c, left: MaxHandshake}
}

// Upgraded lifts the bound: what follows are the socket's messages, which
// its read limit bounds.
func (c *HandshakeConn) Upgraded() { c.upgraded.Store(true) }

func (c *HandshakeConn) Read(p []byte) (int, error) {
	if c.upgraded.Load() {
		return c.Conn.Read(p)
	}
	if c.left <= 0 {
		return 0, &HandshakeTooLargeError{}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}
