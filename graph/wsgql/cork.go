package wsgql

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// corkMax bounds what a corked connection holds back: a message that would
// take it past this goes out at once, with what is held before it.
const corkMax = 64 << 10

// corkKeep is the most a corkConn keeps allocated between bursts.
const corkKeep = 8 << 10

// corkConn lets the writer send the messages it finds queued together in
// one write to the socket instead of one each: while corked, the frames
// gorilla writes are held, and the write of the last message queued
// carries them all (under load, the relay's Done and forward frames to an
// agent come several at a time). Only the writer corks, and only while
// more messages wait. A control frame (close, ping, pong: gorilla writes
// each whole, in one call) is never held: it goes out at once, with what
// is held before it.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	held   []byte
}

// cork holds the writes that follow (on) or lets them, and anything held,
// go out with the next write (off).
func (c *corkConn) cork(on bool) {
	c.mu.Lock()
	c.corked = on
	c.mu.Unlock()
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held)+len(p) <= corkMax {
		if c.corked && !control(p) {
			c.held = append(c.held, p...)
			return len(p), nil
		}
		if len(c.held) > 0 {
			c.held = append(c.held, p...)
			err := c.flushLocked()
			if err != nil {
				return 0, err
			}
			return len(p), nil
		}
		return c.Conn.Write(p)
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// control tells a write that begins a WebSocket control frame: its opcode
// (the first byte's low four bits) is 8 or more.
func control(p []byte) bool { return len(p) > 0 && p[0]&0x0f >= 0x8 }

// flushLocked writes what is held. A failed write fails the socket: the
// writer closes it.
func (c *corkConn) flushLocked() error {
	if len(c.held) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.held)
	if cap(c.held) > corkKeep {
		c.held = nil // a socket that corked a burst once does not keep its size
	} else {
		c.held = c.held[:0]
	}
	return err
}

// flush sends what is held now.
func (c *corkConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

// NetConn is the connection below (a TLS one tells its state through it).
func (c *corkConn) NetConn() net.Conn { return c.Conn }

// corkingWriter hands gorilla's upgrader a corkConn when it hijacks the
// connection, and keeps it for the writer.
type corkingWriter struct {
	http.ResponseWriter
	conn *corkConn
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: nc}
	return w.conn, brw, nil
}

func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
