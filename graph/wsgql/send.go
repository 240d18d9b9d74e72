package wsgql

import (
	"context"
	"encoding/json"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/gqlws"
)

// send queues a message for the writer. While the queue holds
// SendQueueBytes or more it waits for room, at most WriteTimeout: a client
// that lets its queue stay full that long reads too slowly and is closed
// with 1008. ctx ends the wait early (the operation was completed).
func (c *conn) send(ctx context.Context, m message) error {
	b, err := encode(m)
	if err != nil {
		return err
	}
	return c.enqueue(ctx, outgoing{typ: websocket.TextMessage, b: b})
}

// outgoing is a queued message and its WebSocket message type. A lazy one
// does not wake the writer: it goes out with the next message that does, or
// when BinaryConfig.ReplyDelay has passed.
type outgoing struct {
	typ  int
	b    []byte
	lazy bool
	// written, when not nil, runs once the message is written, or
	// dropped with the socket.
	written func()
}

// enqueue queues a message, waiting for room as send says.
func (c *conn) enqueue(ctx context.Context, m outgoing) error {
	var timeout <-chan time.Time
	for {
		room, err := c.tryQueue(m)
		if room == nil || err != nil {
			return err
		}
		if timeout == nil {
			t := time.NewTimer(c.t.cfg.WriteTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			c.closeWith(ClosePolicy, "send queue full: the client reads too slowly")
			return errClosed
		}
	}
}

// tryQueue queues a message if the queue has room for it now; if not, it
// returns the channel closed when room is made.
func (c *conn) tryQueue(m outgoing) (room <-chan struct{}, err error) {
	c.qmu.Lock()
	if c.closed {
		c.qmu.Unlock()
		return nil, errClosed
	}
	if c.queued == 0 || c.queued+int64(len(m.b)) <= c.t.cfg.SendQueueBytes {
		c.queue = append(c.queue, m)
		c.queued += int64(len(m.b))
		if m.lazy {
			if !c.lazyArmed {
				c.lazyArmed = true
				if c.lazyTimer == nil {
					c.lazyTimer = time.AfterFunc(c.t.cfg.Binary.ReplyDelay, c.lazyDue)
				} else {
					c.lazyTimer.Reset(c.t.cfg.Binary.ReplyDelay)
				}
			}
			c.qmu.Unlock()
			return nil, nil
		}
		c.qmu.Unlock()
		c.wakeWriter()
		return nil, nil
	}
	room = c.room
	c.roomWaited = true
	c.qmu.Unlock()
	return room, nil
}

// wakeWriter tells the writer the queue is not empty.
func (c *conn) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// lazyDue wakes the writer for lazy messages that waited ReplyDelay.
func (c *conn) lazyDue() {
	c.qmu.Lock()
	c.lazyArmed = false
	c.qmu.Unlock()
	c.wakeWriter()
}

// writeLoop writes queued messages and pings until the socket closes. A
// write that the client does not take within WriteTimeout ends the socket
// (gorilla cannot write after a timed-out write, so no close frame follows).
func (c *conn) writeLoop() {
	ping, _ := encode(message{Type: gqlws.Ping})
	tick := time.NewTicker(c.t.cfg.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
			if !c.acked.Load() {
				continue
			}
			if !c.write(websocket.TextMessage, ping) {
				return
			}
		case <-c.wake:
			for {
				c.qmu.Lock()
				if c.closed || len(c.queue) == 0 {
					if c.lazyArmed && c.lazyTimer.Stop() {
						// What the timer was set for has gone out. (A
						// timer that fired clears lazyArmed itself.)
						c.lazyArmed = false
					}
					c.qmu.Unlock()
					break
				}
				m := c.queue[0]
				c.queue[0] = outgoing{}
				c.queue = c.queue[1:]
				// More queued behind it: hold this one's frame for the
				// write of the last (internal/cork).
				c.cork.Cork(len(c.queue) > 0)
				c.qmu.Unlock()
				ok := c.write(m.typ, m.b)
				if m.written != nil {
					m.written()
				}
				c.qmu.Lock()
				if !c.closed {
					c.queued -= int64(len(m.b))
					if c.roomWaited { // not a new channel per message
						close(c.room)
						c.room, c.roomWaited = make(chan struct{}), false
					}
				}
				c.qmu.Unlock()
				if !ok {
					return
				}
			}
			// The loop can end with frames held (the socket closed while
			// more were queued): send them.
			if err := c.cork.Flush(); err != nil {
				c.t.cfg.Logger.Debug("websocket write", "error", err)
				c.shut()
				return
			}
		}
	}
}

func (c *conn) write(typ int, b []byte) bool {
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.t.cfg.WriteTimeout))
	if err := c.ws.WriteMessage(typ, b); err != nil {
		c.t.cfg.Logger.Debug("websocket write", "error", err)
		c.shut()
		return false
	}
	return true
}

// Turn is a socket's turn to load one item for a subscription, taken with
// AwaitRoom. The holder either gives it back (Release: nothing was loaded,
// or the load failed) or hands the loaded item on to the operation's
// results (HandOn, before sending it to gqlgen): the turn then passes once
// the transport has queued that item's message. So a socket holds at most
// one loaded item beyond its queue however many subscriptions it runs.
type Turn struct {
	c  *conn
	op *operation
}

// Release gives the turn back at once.
func (t Turn) Release() {
	if t.c != nil {
		<-t.c.produce
	}
}

// HandOn says the loaded item goes to the operation's results: the turn
// passes once its message is queued (or the operation ends).
func (t Turn) HandOn() {
	if t.c == nil {
		return
	}
	if t.op == nil { // not an operation of this transport: nothing will queue it
		t.Release()
		return
	}
	t.c.mu.Lock()
	t.op.turn = true
	t.c.mu.Unlock()
}

// passTurn passes the turn an operation's handed-on item held, once that
// item's message is queued or the operation ends.
func (c *conn) passTurn(op *operation) {
	c.mu.Lock()
	held := op.turn
	op.turn = false
	c.mu.Unlock()
	if held {
		<-c.produce
	}
}

// AwaitRoom takes the socket's turn to load an item for a subscription and
// waits until the socket's send queue has room. A subscription that loads
// large items (history rows) calls it before each load, so a client that
// stops reading stops the loading; a queue that stays full for
// WriteTimeout closes the socket with 1008, as in send. Outside a
// WebSocket it returns at once with a turn that holds nothing.
func AwaitRoom(ctx context.Context) (Turn, error) {
	c, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return Turn{}, nil
	}
	op, _ := ctx.Value(opKey{}).(*operation)
	select {
	case c.produce <- struct{}{}:
	case <-ctx.Done():
		return Turn{}, ctx.Err()
	}
	turn := Turn{c: c, op: op}
	var timeout <-chan time.Time
	for {
		c.qmu.Lock()
		closed, full, room := c.closed, c.queued >= c.t.cfg.SendQueueBytes, c.room
		c.roomWaited = c.roomWaited || full
		c.qmu.Unlock()
		switch {
		case closed:
			turn.Release()
			return Turn{}, errClosed
		case !full:
			return turn, nil
		}
		if timeout == nil {
			t := time.NewTimer(c.t.cfg.WriteTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-room:
		case <-ctx.Done():
			turn.Release()
			return Turn{}, ctx.Err()
		case <-timeout:
			turn.Release()
			c.closeWith(ClosePolicy, "send queue full: the client reads too slowly")
			return Turn{}, errClosed
		}
	}
}

type connKey struct{}

// opKey carries an operation in its context, for AwaitRoom.
type opKey struct{}

// encode writes the frame with its payload copied once and not scanned
// again: a payload is JSON this package produced, and a next message may
// carry megabytes.
func encode(m message) ([]byte, error) {
	id, err := json.Marshal(m.ID)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(id)+len(m.Type)+len(m.Payload)+32)
	b = append(b, `{"type":"`...)
	b = append(b, m.Type...) // one of the msg constants
	b = append(b, '"')
	if m.ID != "" {
		b = append(b, `,"id":`...)
		b = append(b, id...)
	}
	if len(m.Payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, m.Payload...)
	}
	return append(b, '}'), nil
}
