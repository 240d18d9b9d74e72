package wsgql

import (
	"context"
	"sync"
)

// ReasonShuttingDown is the reason of the close frame (1001, going away)
// every socket gets when its relay shuts down (GoAway.Stop).
const ReasonShuttingDown = "relay shutting down"

// GoAway ends a transport's sockets when the relay shuts down: each gets
// a close frame 1001 (going away), so a client (an agent, relay listen,
// the console) is told the relay is stopping instead of finding its
// connection dropped (1006). http.Server.Shutdown neither closes nor
// waits for hijacked connections; the relay calls Stop once it has
// drained its requests, whose forwards need the agents' sockets open.
type GoAway struct {
	mu       sync.Mutex
	stopping chan struct{}
	stopped  bool
	live     int
	ended    chan struct{} // closed once stopped with no socket left
}

// NewGoAway returns a GoAway for Config.GoAway.
func NewGoAway() *GoAway {
	return &GoAway{stopping: make(chan struct{}), ended: make(chan struct{})}
}

// Stop closes every socket with 1001 and waits until they have ended (each
// within closeGrace of its close frame), or ctx ends. Sockets asked for
// after it are refused.
func (g *GoAway) Stop(ctx context.Context) error {
	g.mu.Lock()
	if !g.stopped {
		g.stopped = true
		close(g.stopping)
		if g.live == 0 {
			close(g.ended)
		}
	}
	g.mu.Unlock()
	select {
	case <-g.ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// join counts a new socket; false once Stop was called.
func (g *GoAway) join() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	g.live++
	return true
}

// leave counts a socket that has ended.
func (g *GoAway) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.live--
	if g.stopped && g.live == 0 {
		close(g.ended)
	}
}
