package wsgql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/relayhq/relay/graph/answersize"
	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/internal/jsoncount"
)

// message is one frame in either direction.
type message = gqlws.Message

// incoming is a client frame as sent, so that missing fields and wrong
// JSON types can be told apart and refused.
type incoming struct {
	ID      json.RawMessage `json:"id"`
	Type    json.RawMessage `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// subscribePayload is the payload of subscribe.
type subscribePayload = gqlws.SubscribePayload

// frame is a client message that passed parse.
type frame struct {
	typ       string
	id        string
	payload   json.RawMessage
	subscribe subscribePayload // for subscribe
	// tooManyValues: the subscribe payload holds more JSON values than the
	// transport decodes (Config.MaxValues); it was not decoded.
	tooManyValues bool
	// size is the message's length, what its operation holds while it runs.
	size int64
}

// parse reads and checks a client message as the protocol describes it;
// an error is the reason for closing the socket with 4400. A subscribe
// payload of more than maxValues JSON values is counted, not decoded: a
// generic decode of variables costs about twenty times their JSON (a map
// for every empty object), so the count comes first.
func parse(data []byte, maxValues int) (frame, error) {
	var in incoming
	if err := json.Unmarshal(data, &in); err != nil {
		return frame{}, errors.New("not a JSON object")
	}
	f := frame{payload: in.Payload}
	if json.Unmarshal(in.Type, &f.typ) != nil {
		return frame{}, errors.New("type must be a string")
	}
	switch f.typ {
	case gqlws.ConnectionInit, gqlws.Ping, gqlws.Pong:
		if !isObjectOrAbsent(in.Payload) {
			return frame{}, fmt.Errorf("%s payload must be an object", f.typ)
		}
	case gqlws.Subscribe:
		var ok bool
		if f.id, ok = operationID(in.ID); !ok {
			return frame{}, errors.New("subscribe needs a non-empty string id")
		}
		if !isObject(in.Payload) {
			return frame{}, errors.New("subscribe payload must be an object with a query string")
		}
		if _, over := jsoncount.Values(in.Payload, maxValues); over {
			f.tooManyValues = true
			return f, nil
		}
		if decodeNumbers(in.Payload, &f.subscribe) != nil || f.subscribe.Query == nil {
			return frame{}, errors.New("subscribe payload must be an object with a query string")
		}
	case gqlws.Complete:
		var ok bool
		if f.id, ok = operationID(in.ID); !ok {
			return frame{}, errors.New("complete needs a non-empty string id")
		}
	default:
		// connection_ack, next and error are the server's to send.
		return frame{}, fmt.Errorf("unexpected message type %q", f.typ)
	}
	return f, nil
}

// handle acts on one client message; false ends the socket.
func (c *conn) handle(data []byte) bool {
	start := graphql.Now()
	f, err := parse(data, c.t.cfg.MaxValues)
	if err != nil {
		return c.badRequest(err.Error())
	}
	f.size = int64(len(data))
	switch f.typ {
	case gqlws.ConnectionInit:
		return c.onInit(f.payload)
	case gqlws.Ping:
		_ = c.send(c.ctx, message{Type: gqlws.Pong, Payload: f.payload})
	case gqlws.Subscribe:
		return c.onSubscribe(f, start)
	case gqlws.Complete:
		c.onComplete(f.id)
	}
	return true
}

func (c *conn) badRequest(reason string) bool {
	c.closeWith(gqlws.CloseBadRequest, "Invalid message received: "+reason)
	return false
}

// onInit acknowledges the first connection_init; a second one is 4429.
func (c *conn) onInit(raw json.RawMessage) bool {
	if c.initialised {
		c.closeWith(gqlws.CloseTooManyInitialise, "Too many initialisation requests")
		return false
	}
	c.initialised = true
	if _, over := jsoncount.Values(raw, c.t.cfg.MaxValues); over {
		return c.badRequest("connection_init payload holds more than " + strconv.Itoa(c.t.cfg.MaxValues) + " JSON values")
	}
	var payload map[string]any
	if len(raw) > 0 && json.Unmarshal(raw, &payload) != nil {
		return c.badRequest("connection_init payload must be an object")
	}
	ctx := c.ctx
	if c.t.cfg.InitFunc != nil {
		var err error
		if ctx, err = c.t.cfg.InitFunc(c.ctx, payload); err != nil {
			c.closeWith(gqlws.CloseForbidden, "Forbidden")
			return false
		}
	}
	if c.t.cfg.MessageLimit != nil {
		if n := c.t.cfg.MessageLimit(ctx); n > c.t.cfg.MaxMessage {
			c.ws.SetReadLimit(n)
			c.limit = n
		}
	}
	if c.t.cfg.BudgetKey != nil {
		if k := c.t.cfg.BudgetKey(ctx); k != c.clientKey {
			c.budgetKey = k
		}
	}
	c.ctx = context.WithValue(ctx, connKey{}, c)
	c.acked.Store(true)
	ok := c.send(c.ctx, message{Type: gqlws.ConnectionAck}) == nil
	c.closeOn(ctx)
	return ok
}

// onSubscribe starts an operation, or refuses it.
func (c *conn) onSubscribe(f frame, start time.Time) bool {
	id, p := f.id, f.subscribe
	if !c.acked.Load() {
		c.closeWith(gqlws.CloseUnauthorized, "Unauthorized")
		return false
	}
	c.mu.Lock()
	if _, running := c.ops[id]; running {
		c.mu.Unlock()
		c.closeWith(gqlws.CloseSubscriberExists, "Subscriber for "+id+" already exists")
		return false
	}
	if f.tooManyValues {
		c.mu.Unlock()
		// Refused like an operation over the API's other limits: an error
		// for its id, and the socket stays (an agent's other forwards go on).
		c.sendErrors(c.ctx, id, gqlerror.List{{
			Message:    fmt.Sprintf("request too large: an operation's variables and extensions may hold at most %d JSON values", c.t.cfg.MaxValues),
			Extensions: map[string]any{"code": "REQUEST_TOO_LARGE"},
		}})
		return true
	}
	full := len(c.ops) >= c.t.cfg.MaxSubscriptions
	op := &operation{id: id, held: f.size}
	params := &graphql.RawParams{Variables: p.Variables, Extensions: p.Extensions, Headers: c.headers}
	params.Query = *p.Query
	if p.OperationName != nil {
		params.OperationName = *p.OperationName
	}
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	switch {
	case full:
		c.mu.Unlock()
		if !c.countRefusal() {
			return false
		}
		c.sendErrors(c.ctx, id, gqlerror.List{{
			Message:    fmt.Sprintf("at most %d operations may run on one WebSocket", c.t.cfg.MaxSubscriptions),
			Extensions: map[string]any{"code": "TOO_MANY_SUBSCRIPTIONS"},
		}})
		return true
	case c.fit(op):
		op.reserved, c.reserved = c.reserved, 0 // held while it runs
		c.startLocked(op, params)
	case c.waitHeld+f.size <= c.waitBytes():
		op.reserved, c.reserved = c.reserved, 0
		c.waitLocked(op, params)
	default:
		c.mu.Unlock()
		if !c.countRefusal() {
			return false
		}
		c.sendErrors(c.ctx, id, gqlerror.List{c.heldError(fmt.Sprintf(
			"; operations waiting for room hold theirs too, %d bytes at most", c.waitBytes()))})
		return true
	}
	c.mu.Unlock()
	return true
}

// fit gives op room among the running operations if its message fits now:
// in the held bytes (Config.HeldBytes), else in the place beside them.
// Called with c.mu held.
func (c *conn) fit(op *operation) bool {
	switch {
	case c.held+op.held <= c.t.cfg.HeldBytes:
		c.held += op.held
	case !c.large:
		c.large, op.large = true, true
	default:
		return false
	}
	return true
}

// startLocked runs op, which fit, in a goroutine of its own; when it ends
// its room goes to the operations waiting for it. Called with c.mu held.
func (c *conn) startLocked(op *operation, params *graphql.RawParams) {
	ctx, cancel := context.WithCancel(c.ctx)
	op.cancel = cancel
	ctx = context.WithValue(ctx, opKey{}, op)
	c.ops[op.id] = op
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			if c.ops[op.id] == op {
				delete(c.ops, op.id)
			}
			if op.large {
				c.large = false
			} else {
				c.held -= op.held
			}
			c.releaseOp(op)
			c.admitLocked()
			c.mu.Unlock()
			cancel()
		}()
		c.run(ctx, op.id, op, params)
	}()
}

// An operation whose message does not fit among the running ones waits
// for room instead of being refused: an agent answering several forwards
// with completeForward messages over 1 MiB has one run in the place beside
// the held bytes and the next wait for it. The waiting messages are read
// already (the reader goes on, so that complete, ping and small
// operations, which an operation running may wait for, still pass), and
// they are bounded like the running ones: by the operations a socket may
// run (waiting ones count), by a byte budget of their own (waitBytes: the
// socket's message limit unless Config.WaitBytes, so that one message of
// any size may wait) and by Config.WaitTimeout. With WaitBytes unset the
// messages one socket holds are thus at most HeldBytes + 2 × its message
// limit: the held bytes, the one beside them and those waiting (3 MiB on
// an anonymous socket of the relay, about 29.7 MiB on an agent's). Past
// the budget an operation is refused as before; past the timeout too,
// saying it waited. Waiting ones start in arrival order as room frees,
// each as soon as its message fits, so a small one is not kept behind a
// large one waiting for the place beside the held bytes (which only a
// query or mutation keeps, and which frees when it ends, with nothing more
// read from the client). The reader does not stop for a waiting one: a
// running operation may wait for a later message (an agent's answer to a
// retry running on the same socket), and a reader stopped behind it would
// hold both until the timeout.

// waitBytes is the budget of the messages waiting on this socket. Reader
// only.
func (c *conn) waitBytes() int64 {
	if c.t.cfg.WaitBytes > 0 {
		return c.t.cfg.WaitBytes
	}
	return c.limit
}

// waitLocked queues op until its message fits, or until
// Config.WaitTimeout. Called with c.mu held.
func (c *conn) waitLocked(op *operation, params *graphql.RawParams) {
	op.wait = &waiting{params: params}
	c.ops[op.id] = op
	c.waiting = append(c.waiting, op)
	c.waitHeld += op.held
	op.wait.timer = time.AfterFunc(c.t.cfg.WaitTimeout, func() { c.waitedOut(op) })
}

// admitLocked starts the waiting operations that fit now, the earliest
// first. Called with c.mu held.
func (c *conn) admitLocked() {
	if c.stopping {
		return
	}
	kept := c.waiting[:0]
	for _, op := range c.waiting {
		if !c.fit(op) {
			kept = append(kept, op)
			continue
		}
		params := op.wait.params
		c.unwaitLocked(op)
		c.startLocked(op, params)
	}
	clear(c.waiting[len(kept):])
	c.waiting = kept
}

// unwaitLocked takes op's message out of the waiting budget and stops its
// timer; the caller takes it off c.waiting. Called with c.mu held.
func (c *conn) unwaitLocked(op *operation) {
	op.wait.timer.Stop()
	op.wait = nil
	c.waitHeld -= op.held
}

// dropWaiterLocked forgets op, which waits: completed, or waited too long.
// Called with c.mu held.
func (c *conn) dropWaiterLocked(op *operation) {
	c.unwaitLocked(op)
	c.releaseOp(op)
	if c.ops[op.id] == op {
		delete(c.ops, op.id)
	}
	if i := slices.Index(c.waiting, op); i >= 0 {
		c.waiting = slices.Delete(c.waiting, i, i+1)
	}
}

// releaseOp gives back what op's message held of Config.Budget.
func (c *conn) releaseOp(op *operation) {
	if op.reserved > 0 {
		c.t.cfg.Budget.ReleaseFor(c.clientKey, c.budgetKey, op.reserved)
		op.reserved = 0
	}
}

// waitedOut refuses op once it has waited Config.WaitTimeout for room.
func (c *conn) waitedOut(op *operation) {
	c.mu.Lock()
	if op.wait == nil || c.stopping {
		c.mu.Unlock()
		return
	}
	c.dropWaiterLocked(op)
	c.wg.Add(1) // nothing outlives the socket's serve
	c.mu.Unlock()
	defer c.wg.Done()
	c.sendErrors(c.ctx, op.id, gqlerror.List{c.heldError(fmt.Sprintf(
		"; this one waited %s for room and was given none", c.t.cfg.WaitTimeout))})
}

// countRefusal counts an operation refused for a bound of the socket's
// and reports whether the socket stays: a client may meet a bound; one
// that keeps asking past it as many times again as operations may run
// floods, and answering each with an error would cost the relay a parse
// and a message per request.
func (c *conn) countRefusal() bool {
	if c.refused++; c.refused > c.t.cfg.MaxSubscriptions {
		c.closeWith(ClosePolicy, "too many operations refused: at most "+strconv.Itoa(c.t.cfg.MaxSubscriptions)+" may run")
		return false
	}
	return true
}

// heldError refuses an operation whose message does not fit in what the
// socket's running operations may hold (Config.HeldBytes); why says more.
func (c *conn) heldError(why string) *gqlerror.Error {
	return &gqlerror.Error{
		Message: fmt.Sprintf("request too large: the operations running on this WebSocket hold their messages, %d bytes at most, "+
			"and one query or mutation beside them%s; a subscription's message counts within them: complete an operation, or use another socket", c.t.cfg.HeldBytes, why),
		Extensions: map[string]any{"code": "REQUEST_TOO_LARGE"},
	}
}

// onComplete stops an operation; nothing more is sent for it.
func (c *conn) onComplete(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op, ok := c.ops[id]; ok {
		if op.wait != nil {
			c.dropWaiterLocked(op)
			return
		}
		op.stopped = true
		op.cancel()
		delete(c.ops, id)
	}
}

// run executes one operation: next for each result, then complete; or
// error, and then nothing.
func (c *conn) run(ctx context.Context, id string, op *operation, params *graphql.RawParams) {
	ctx = graphql.StartOperationTrace(ctx)
	rc, errs := c.exec.CreateOperationContext(ctx, params)
	if errs != nil {
		resp := c.exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		c.sendErrors(ctx, id, resp.Errors)
		return
	}
	if op.large && rc.Operation != nil && rc.Operation.Operation == ast.Subscription {
		// It would hold its message beside the others for as long as it
		// runs: only a query or mutation, which ends, may.
		c.sendErrors(ctx, id, gqlerror.List{c.heldError("")})
		return
	}
	ctx = graphql.WithOperationContext(ctx, rc)
	defer func() {
		if r := recover(); r != nil {
			err := rc.Recover(ctx, r)
			gerr, ok := err.(*gqlerror.Error)
			if !ok {
				gerr = gqlerror.Errorf("internal error")
			}
			c.sendErrors(ctx, id, gqlerror.List{gerr})
		}
	}()
	// An item handed on under the socket's turn passes it once queued, or
	// when the operation ends without queuing it.
	defer c.passTurn(op)
	// Each result is counted against the answer budget while it is built
	// and encoded, and given back once queued: the queue has its own bound.
	var meter *answersize.Meter
	if c.t.cfg.Answers != nil {
		meter = c.t.cfg.Answers.Meter()
		defer meter.Close()
		ctx = answersize.With(ctx, meter)
	}
	responses, ctx := c.exec.DispatchOperation(ctx, rc)
	for {
		resp := responses(ctx)
		if resp == nil || c.isStopped(op) {
			break
		}
		b, err := encodeResult(resp)
		if err != nil {
			c.sendErrors(ctx, id, gqlerror.List{gqlerror.Errorf("encode result: %v", err)})
			return
		}
		err = c.send(ctx, message{ID: id, Type: gqlws.Next, Payload: b})
		meter.Release()
		c.passTurn(op)
		if err != nil {
			return
		}
	}
	c.mu.Lock()
	stopped, endErr := op.stopped, op.endErr
	c.mu.Unlock()
	switch {
	case stopped:
	case endErr != nil:
		c.sendErrors(ctx, id, gqlerror.List{endErr})
	default:
		_ = c.send(ctx, message{ID: id, Type: gqlws.Complete})
	}
}

// EndWith makes the subscription running under ctx end with err (an
// error message for its id) instead of complete once its resolver closes
// its channel: the way to tell a client why the relay ended its stream.
// Outside this transport it does nothing.
func EndWith(ctx context.Context, err *gqlerror.Error) {
	c, ok := ctx.Value(connKey{}).(*conn)
	op, isOp := ctx.Value(opKey{}).(*operation)
	if !ok || !isOp {
		return
	}
	c.mu.Lock()
	op.endErr = err
	c.mu.Unlock()
}

// encodeResult encodes a result without HTML escaping: JSON does not
// require <, > and & escaped, and \u003c is six bytes for one.
func encodeResult(resp *graphql.Response) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func (c *conn) isStopped(op *operation) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return op.stopped
}

func (c *conn) sendErrors(ctx context.Context, id string, errs gqlerror.List) {
	b, err := json.Marshal(errs)
	if err != nil {
		b = []byte(`[{"message":"internal error"}]`)
	}
	_ = c.send(ctx, message{ID: id, Type: gqlws.Error, Payload: b})
}

// operationID reads an id that must be a non-empty string.
func operationID(raw json.RawMessage) (string, bool) {
	var id string
	if json.Unmarshal(raw, &id) != nil || id == "" {
		return "", false
	}
	return id, true
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// isObjectOrAbsent accepts an object, null or no payload.
func isObjectOrAbsent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null")) || raw[0] == '{'
}

// decodeNumbers decodes with numbers kept as json.Number, as gqlgen's HTTP
// transports do, so that Int variables stay integers.
func decodeNumbers(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}
