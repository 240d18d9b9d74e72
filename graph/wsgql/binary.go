package wsgql

import (
	"context"
	"time"

	"github.com/gorilla/websocket"
	"github.com/relayhq/relay/internal/gqlws"
)

// BinaryConfig lets a socket carry binary frames beside graphql-transport-ws
// messages: a hot path that skips GraphQL (the agents' forwards), on the
// same socket, after the same connection_init. The transport only bounds,
// queues and reads them; Handle and the operations that call
// BinaryOperation decide what they mean.
type BinaryConfig struct {
	// Subprotocol is the name a client offers to speak it.
	Subprotocol string
	// Older are earlier versions of Subprotocol still spoken, for older
	// clients, newest first; Handle tells their frames apart.
	Older []string
	// Handle answers a binary frame a client sent after connection_ack,
	// in the context InitFunc returned, on a socket that agreed on the
	// subprotocol proto (Subprotocol or one of Older, whose frames and
	// replies may differ); a non-nil reply is queued as a
	// binary frame, and then, when not nil, runs right after (before, if
	// the queue has no room now). An error closes the socket with 4400:
	// the client speaks the subprotocol wrongly.
	Handle func(ctx context.Context, proto string, frame []byte) (reply []byte, then func(), err error)
	// ReplyDelay is how long a reply may wait to go out with the next
	// message the socket sends, so that one write carries both; zero
	// sends each at once. A reply nobody waits for on the sending side
	// (an acknowledgement) is worth delaying: under load it rides with the
	// next frame, and the socket's writer wakes half as often.
	ReplyDelay time.Duration
}

// handleBinary acts on one binary frame; false ends the socket.
func (c *conn) handleBinary(frame []byte) bool {
	if !c.acked.Load() {
		c.closeWith(gqlws.CloseUnauthorized, "Unauthorized")
		return false
	}
	if c.t.cfg.Binary.Handle == nil {
		return c.badRequest("binary frames are not expected")
	}
	reply, then, err := c.t.cfg.Binary.Handle(c.ctx, c.proto, frame)
	if err != nil {
		return c.badRequest(err.Error())
	}
	if reply == nil {
		if then != nil {
			then()
		}
		return true
	}
	// The reply is queued before then runs: then wakes a goroutine that
	// would otherwise run first and leave the reply (and the writer's
	// wake-up) behind it. Only when the queue has no room now does then go
	// first, so that nothing waits on a slow client.
	m := outgoing{typ: websocket.BinaryMessage, b: reply, lazy: c.t.cfg.Binary.ReplyDelay > 0}
	room, err := c.tryQueue(m)
	if then != nil {
		then()
	}
	if err == nil && room != nil {
		err = c.enqueue(c.ctx, m)
	}
	return err == nil
}

// BinaryOperation is, for an operation running on a socket that agreed on
// the binary subprotocol, the operation's id and a function that queues a
// binary frame on the socket (waiting for room as every message does; a
// queue that stays full closes the socket with 1008). written, when not
// nil, runs once the frame is written, or dropped: not queued (send's
// error) or still queued when the socket closes. ok is false for an
// operation elsewhere (HTTP, a plain graphql-transport-ws socket): it then
// sends its results as GraphQL.
func BinaryOperation(ctx context.Context) (id string, send func(ctx context.Context, frame []byte, written func()) error, ok bool) {
	c, isConn := ctx.Value(connKey{}).(*conn)
	op, isOp := ctx.Value(opKey{}).(*operation)
	if !isConn || !isOp || !c.binary {
		return "", nil, false
	}
	return op.id, func(ctx context.Context, frame []byte, written func()) error {
		err := c.enqueue(ctx, outgoing{typ: websocket.BinaryMessage, b: frame, written: written})
		if err != nil && written != nil {
			written()
		}
		return err
	}, true
}
