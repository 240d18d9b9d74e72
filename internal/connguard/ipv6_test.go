package connguard

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// fakeConn is a connection from a chosen peer address.
type fakeConn struct {
	net.Conn
	remote net.Addr
}

func (c fakeConn) RemoteAddr() net.Addr             { return c.remote }
func (c fakeConn) Close() error                     { return nil }
func (c fakeConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c fakeConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c fakeConn) SetDeadline(time.Time) error      { return nil }
func (c fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c fakeConn) SetWriteDeadline(time.Time) error { return nil }

// fakeListener hands out connections from the given peers, in order.
type fakeListener struct {
	net.Listener
	peers chan net.Addr
}

func (l *fakeListener) Accept() (net.Conn, error) {
	a, ok := <-l.peers
	if !ok {
		return nil, net.ErrClosed
	}
	return fakeConn{remote: a}, nil
}

// TestIPv6ClientCountsByItsSlash64: an IPv6 client usually holds a whole
// /64, so --max-conns-per-ip counts its /64, not each of its 2^64
// addresses: of 1 000 connections from one /64 under a cap of 4, four are
// accepted.
func TestIPv6ClientCountsByItsSlash64(t *testing.T) {
	const cap, n = 4, 1000
	peers := make(chan net.Addr, n)
	for i := range n {
		ip := net.ParseIP(fmt.Sprintf("2001:db8:1:2::%x", i+1))
		peers <- &net.TCPAddr{IP: ip, Port: 40000}
	}
	close(peers)
	l := NewListener(&fakeListener{peers: peers}, cap, 0)
	accepted := 0
	for {
		if _, err := l.Accept(); err != nil {
			break
		}
		accepted++
	}
	if accepted != cap {
		t.Errorf("one /64 (2001:db8:1:2::/64) holds %d connections open under --max-conns-per-ip %d", accepted, cap)
	}
}
