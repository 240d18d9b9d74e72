// Package corktest records what reaches a socket below a cork.Conn, for
// the tests of the writers that cork (the relay's and the agent's).
package corktest

import (
	"bytes"
	"net"
	"sync"
)

// Writes records each write that reaches the socket, and passes it on to
// the connection below when there is one.
type Writes struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *Writes) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(p))
	c.mu.Unlock()
	if c.Conn == nil {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// Count is how many writes have reached the socket.
func (c *Writes) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

// All returns the writes so far, each a copy of what was written.
func (c *Writes) All() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.writes...)
}
