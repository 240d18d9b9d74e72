// Package cork lets a WebSocket's writer send the messages it finds waiting
// together in one write to the socket instead of one each.
package cork

import (
	"net"
	"sync"
)

// Max bounds what a corked connection holds back: a message that would take
// it past this goes out at once, with what is held before it.
const Max = 64 << 10

// keep is the most a Conn keeps allocated between bursts.
const keep = 8 << 10

// Conn holds, while corked, the frames a WebSocket library writes to it,
// and the first write after the cork is lifted (or Flush) carries them all.
// Only the socket's writer corks, and only while more messages wait. A
// control frame (close, ping, pong: gorilla writes each whole, in one
// call) is never held: it goes out at once, with what is held before it.
// Below TLS the writes are records, never taken for control frames: the
// writer's last write, or its Flush, sends them.
type Conn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	held   []byte
}

// New wraps c, uncorked: its writes go straight through until Cork(true).
func New(c net.Conn) *Conn { return &Conn{Conn: c} }

// Cork holds the writes that follow (on) or lets them, and anything held,
// go out with the next write (off).
func (c *Conn) Cork(on bool) {
	c.mu.Lock()
	c.corked = on
	c.mu.Unlock()
}

func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held)+len(p) <= Max {
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
func (c *Conn) flushLocked() error {
	if len(c.held) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.held)
	if cap(c.held) > keep {
		c.held = nil // a socket that corked a burst once does not keep its size
	} else {
		c.held = c.held[:0]
	}
	return err
}

// Flush lifts the cork and sends what is held now.
func (c *Conn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

// NetConn is the connection below (a TLS one tells its state through it).
func (c *Conn) NetConn() net.Conn { return c.Conn }
