package wsgql

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/relayhq/relay/graph/answersize"
	"github.com/relayhq/relay/internal/clientkey"
	"github.com/relayhq/relay/internal/cork"
	"github.com/relayhq/relay/internal/gqlws"
)

// The WebSocket close codes this transport uses besides the protocol's
// own (gqlws).
const (
	ClosePolicy = websocket.ClosePolicyViolation // 1008: the client reads too slowly, or keeps asking past the cap
	CloseTooBig = websocket.CloseMessageTooBig   // 1009: a message over the limit
)

// Defaults for a zero Config field.
const (
	DefaultMaxMessage          = 1 << 20
	DefaultMaxSubscriptions    = 100
	DefaultMaxSocketsPerClient = 32
	DefaultKeepAlive           = 5 * time.Second
	DefaultSendQueueBytes      = 4 << 20
	// DefaultHeldBytes bounds the messages of the operations running on
	// one socket: see Config.HeldBytes.
	DefaultHeldBytes = 1 << 20
	// DefaultWaitTimeout bounds how long an operation waits for room among
	// the running ones: see Config.WaitTimeout.
	DefaultWaitTimeout = 30 * time.Second
	// DefaultMaxValues bounds the JSON values of a subscribe payload (its
	// variables and extensions) and of a connection_init payload: see
	// Config.MaxValues.
	DefaultMaxValues = 10_000
)

// closeGrace is how long a closing socket waits for the client to read the
// close frame and hang up before the server drops the connection.
const closeGrace = time.Second

// Config tunes the transport; zero fields take the defaults above.
type Config struct {
	// InitFunc reads the connection_init payload (nil when the client sent
	// none) and returns the context every operation of the socket runs in.
	// An error closes the socket with 4403.
	InitFunc func(ctx context.Context, payload map[string]any) (context.Context, error)
	// MaxMessage is the largest message a client may send (1009 beyond).
	MaxMessage int64
	// MessageLimit, when set, gives the limit after connection_init from the
	// context InitFunc returned (an agent may need to send larger answers
	// than an anonymous client); it never lowers MaxMessage.
	MessageLimit func(ctx context.Context) int64
	// MaxValues bounds the JSON values (objects, arrays, strings, numbers,
	// literals, at any depth) of a subscribe payload, counted before it is
	// decoded: decoded generically, variables take about twenty times their
	// JSON. An operation over it is refused with an error for its id
	// (REQUEST_TOO_LARGE), a connection_init payload over it closes with
	// 4400.
	MaxValues int
	// MaxSubscriptions bounds the operations running on one socket.
	MaxSubscriptions int
	// HeldBytes bounds the subscribe messages of the operations running on
	// one socket together: each holds its message (its query, variables
	// and extensions) for as long as it runs, a subscription for as long as
	// the client likes. Beside them one query or mutation may run with a
	// message of any size up to the socket's limit (an agent's
	// completeForward). An operation past both waits for room (WaitBytes,
	// WaitTimeout).
	HeldBytes int64
	// WaitBytes bounds the subscribe messages of the operations waiting on
	// one socket for room among the running ones (HeldBytes, or the place
	// beside them), read and held meanwhile; each starts once its message
	// fits, in arrival order. An operation past it too is refused with an
	// error for its id (REQUEST_TOO_LARGE); the socket stays. Zero: the
	// socket's message limit (MaxMessage, or MessageLimit's), so that one
	// message of any size may wait, and a socket holds at most HeldBytes
	// and twice its message limit of messages.
	WaitBytes int64
	// WaitTimeout bounds how long an operation waits for room; past it the
	// operation is refused (REQUEST_TOO_LARGE, saying it waited). Default
	// DefaultWaitTimeout, the relay's default --forward-timeout: an agent's
	// answer that waited longer answers a forward already given up.
	WaitTimeout time.Duration
	// Budget, when set, holds the bytes of every message past MaxMessage
	// (an agent's answer, up to MessageLimit's) for as long as the message
	// is held: read, until it is handled, or until the operation it started
	// or queued ends, under the socket's client (ClientKey: its address,
	// whose share and network's share they take whatever account it signs
	// in to) and the account BudgetKey names. A
	// message the budget has no room for closes the socket with 1013 (try
	// again later) before more of it is read. Without it each socket's
	// messages are bounded, but not all sockets' together: one client
	// address's sockets of an account (MaxSocketsPerClient, 32) could hold
	// 32 agents' limits, ≈ 14.3 MiB each, twice over with those waiting.
	Budget MessageBudget
	// BudgetKey names the account whose share of Budget a socket's
	// messages take besides its client's, from the context InitFunc
	// returned; nil or "": the client's share only.
	BudgetKey func(ctx context.Context) string
	// MaxSocketsPerClient bounds the open sockets of one ClientKey.
	MaxSocketsPerClient int
	// MaxSocketsPerNetwork bounds the open sockets of one client network
	// (clientkey.Network of the ClientKey) over all its clients; zero is
	// clientkey.NetworkShare × MaxSocketsPerClient.
	MaxSocketsPerNetwork int
	// ClientKey names the client of a request (default: clientkey.Of the
	// peer's address: its IP, or its /64 for IPv6).
	ClientKey func(*http.Request) string
	// KeepAlive is how often the server pings. A client that sends nothing
	// for twice as long is dropped, and twice as long is also the time a
	// client has to send connection_init.
	KeepAlive time.Duration
	// WriteTimeout bounds each write and the wait for room in the send
	// queue (default: twice KeepAlive).
	WriteTimeout time.Duration
	// SendQueueBytes bounds the bytes waiting to be written to one socket; a
	// message larger than that is still taken into an empty queue.
	SendQueueBytes int64
	// CheckOrigin is the upgrader's origin check (default: any origin).
	CheckOrigin func(*http.Request) bool
	// Answers bounds the bytes of each operation's result messages (one
	// meter per operation, released once a message is queued); nil counts
	// nothing.
	Answers *answersize.Budget
	// Binary, when its Subprotocol is set, is offered before
	// graphql-transport-ws: a socket that agrees on it carries binary frames
	// beside the protocol's messages (see binary.go).
	Binary BinaryConfig
	Logger *slog.Logger
	// GoAway, when set, closes every socket with 1001 once it is stopped
	// (the relay is shutting down); nil: sockets end only as they would
	// otherwise.
	GoAway *GoAway
}

// MessageBudget is memory that large messages of every socket share
// (Config.Budget): ReserveFor takes n bytes for a client address and an
// account ("": none), each within its share, or nothing and false;
// ReleaseFor gives back what they reserved. A key of the account alone
// would let one address, signed in to as many accounts as sign-up gives
// it, hold the whole of it (ingress.BodyBudget keeps the shares of
// addresses, their networks and accounts).
type MessageBudget interface {
	ReserveFor(client, account string, n int64) bool
	ReleaseFor(client, account string, n int64)
}

// Transport is a graphql.Transport for graphql-transport-ws.
type Transport struct {
	cfg      Config
	upgrader websocket.Upgrader
	clients  *clientkey.Caps
}

var _ graphql.Transport = (*Transport)(nil)

// New returns a transport with cfg's zero fields set to the defaults.
func New(cfg Config) *Transport {
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.MaxValues <= 0 {
		cfg.MaxValues = DefaultMaxValues
	}
	if cfg.MaxSubscriptions <= 0 {
		cfg.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if cfg.HeldBytes <= 0 {
		cfg.HeldBytes = DefaultHeldBytes
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = DefaultWaitTimeout
	}
	if cfg.MaxSocketsPerClient <= 0 {
		cfg.MaxSocketsPerClient = DefaultMaxSocketsPerClient
	}
	cfg.MaxSocketsPerNetwork = clientkey.NetworkCap(cfg.MaxSocketsPerNetwork, cfg.MaxSocketsPerClient)
	if cfg.ClientKey == nil {
		cfg.ClientKey = func(r *http.Request) string { return clientkey.Of(r.RemoteAddr) }
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 2 * cfg.KeepAlive
	}
	if cfg.SendQueueBytes <= 0 {
		cfg.SendQueueBytes = DefaultSendQueueBytes
	}
	if cfg.CheckOrigin == nil {
		cfg.CheckOrigin = func(*http.Request) bool { return true }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	protocols := []string{gqlws.Subprotocol}
	if cfg.Binary.Subprotocol != "" {
		// The server's order wins.
		protocols = append(append([]string{cfg.Binary.Subprotocol}, cfg.Binary.Older...), gqlws.Subprotocol)
	}
	return &Transport{
		cfg: cfg,
		upgrader: websocket.Upgrader{
			Subprotocols:    protocols,
			CheckOrigin:     cfg.CheckOrigin,
			ReadBufferSize:  16 << 10,
			WriteBufferSize: 16 << 10,
		},
		clients: &clientkey.Caps{},
	}
}

// Supports reports whether r asks for a WebSocket.
func (t *Transport) Supports(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }

// Do serves one socket until it closes.
func (t *Transport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	key := t.cfg.ClientKey(r)
	switch t.clients.Take(key, t.cfg.MaxSocketsPerClient, t.cfg.MaxSocketsPerNetwork) {
	case clientkey.ClientFull:
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many WebSocket connections from this address", http.StatusTooManyRequests)
		return
	case clientkey.NetworkFull:
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many WebSocket connections from this network", http.StatusTooManyRequests)
		return
	}
	defer t.clients.Release(key)
	if g := t.cfg.GoAway; g != nil {
		if !g.join() {
			http.Error(w, ReasonShuttingDown, http.StatusServiceUnavailable)
			return
		}
		defer g.leave()
	}
	cw := &corkingWriter{ResponseWriter: w}
	ws, err := t.upgrader.Upgrade(cw, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	ctx, cancel := context.WithCancel(r.Context())
	c := &conn{
		t: t, ws: ws, cork: cw.conn, exec: exec, headers: r.Header, ctx: ctx, cancel: cancel,
		clientKey: key,
		ops:       map[string]*operation{},
		wake:      make(chan struct{}, 1),
		room:      make(chan struct{}),
		done:      make(chan struct{}),
		produce:   make(chan struct{}, 1),
	}
	c.serve()
}

// conn is one socket: the reader runs in serve, the writer in its own
// goroutine, each operation in one more.
type conn struct {
	t       *Transport
	ws      *websocket.Conn
	cork    *cork.Conn // below ws: the writer sends what it finds queued in one write
	exec    graphql.GraphExecutor
	headers http.Header
	ctx     context.Context // the socket's; InitFunc's once acknowledged
	cancel  context.CancelFunc

	binary      bool   // the socket agreed on Config.Binary.Subprotocol or one of Older
	proto       string // the subprotocol agreed on
	initialised bool   // reader only
	limit       int64  // reader only: the socket's message limit
	// clientKey and budgetKey (its account's, set at init) are the
	// socket's shares of Config.Budget; reserved is what the message being
	// handled holds of it, which an operation it starts or queues takes
	// over (reader only).
	clientKey string
	budgetKey string
	reserved  int64
	refused   int // reader only: operations refused for the cap
	acked     atomic.Bool

	mu  sync.Mutex
	ops map[string]*operation
	wg  sync.WaitGroup // operations
	// held is what the running operations' messages take of
	// Config.HeldBytes; large: one runs with a message beside it.
	held  int64
	large bool
	// waiting: operations waiting for room, in arrival order (also in
	// ops); waitHeld: their messages' bytes (Config.WaitBytes).
	waiting  []*operation
	waitHeld int64
	// stopping: the socket ends; no operation starts any more.
	stopping bool

	qmu    sync.Mutex
	queue  []outgoing
	queued int64
	room   chan struct{} // closed and replaced when queued bytes shrink while roomWaited
	// roomWaited: a sender took room to wait on it (the queue was full).
	roomWaited bool
	wake       chan struct{} // capacity 1: "the queue is not empty"
	closed     bool
	// lazyTimer wakes the writer for lazy messages (outgoing.lazy) no
	// other message took along; lazyArmed: it is set for some.
	lazyTimer *time.Timer
	lazyArmed bool

	done      chan struct{} // closed by shut
	closeOnce sync.Once
	sentClose atomic.Bool // a close frame went out: linger before hanging up

	produce chan struct{} // capacity 1: the AwaitRoom turn
}

// operation is one running subscribe.
type operation struct {
	cancel context.CancelFunc
	id     string
	// stopped is set when the client completed the operation or the socket
	// closed: nothing more is sent for it.
	stopped bool
	// turn: the operation holds the socket's AwaitRoom turn for an item it
	// handed on; it passes once that item's message is queued.
	turn bool
	// endErr, set by EndWith, is sent as the operation's error instead of
	// complete when its results end.
	endErr *gqlerror.Error
	// held is its message's size, counted in the socket's held bytes, or
	// beside them when large (Config.HeldBytes).
	held  int64
	large bool
	// reserved is what its message holds of Config.Budget, given back
	// when the operation ends (or is dropped while it waits).
	reserved int64
	// wait, while the operation waits for room: what it starts with.
	wait *waiting
}

// waiting is what an operation waiting for room keeps.
type waiting struct {
	params *graphql.RawParams
	timer  *time.Timer // Config.WaitTimeout
}

var errClosed = errors.New("websocket closed")

func (c *conn) serve() {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	defer func() {
		c.shut()
		c.stopAll()
		c.wg.Wait()
		c.hangUp() // also ends a write the client does not take
		<-writerDone
		c.cancel()
	}()
	proto := c.ws.Subprotocol()
	c.proto = proto
	c.binary = c.t.cfg.Binary.Subprotocol != "" && (proto == c.t.cfg.Binary.Subprotocol || slices.Contains(c.t.cfg.Binary.Older, proto))
	if c.ws.Subprotocol() != gqlws.Subprotocol && !c.binary {
		c.closeWith(gqlws.CloseBadSubprotocol, "Subprotocol not acceptable")
		return
	}
	c.ws.SetReadLimit(c.t.cfg.MaxMessage)
	c.limit = c.t.cfg.MaxMessage
	if g := c.t.cfg.GoAway; g != nil {
		c.closeWhen(g.stopping, websocket.CloseGoingAway, ReasonShuttingDown)
	}
	silence := 2 * c.t.cfg.KeepAlive
	// The init deadline is not moved by pings: only connection_init counts.
	_ = c.ws.SetReadDeadline(time.Now().Add(silence))
	for {
		typ, data, err := c.readMessage()
		if err != nil {
			c.readFailed(err)
			return
		}
		select {
		case <-c.done: // closed by the writer or an operation
			c.releaseMessage()
			return
		default:
		}
		handled := false
		if typ == websocket.BinaryMessage && c.binary {
			handled = c.handleBinary(data)
		} else {
			handled = c.handle(data)
		}
		c.releaseMessage() // unless an operation took it over
		if !handled {
			return
		}
		if c.acked.Load() { // from the ack on, any message shows the client is alive
			_ = c.ws.SetReadDeadline(time.Now().Add(silence))
		}
	}
}

// errBudgetFull: the message being read does not fit in Config.Budget.
var errBudgetFull = errors.New("the relay's memory for large messages is in use")

// budgetChunk is how much of a large message is reserved of Config.Budget
// at a time, as it is read: small beside a client's share (at least one
// --max-body), which the bodies its address sends share, so that an
// answer of a few hundred KiB is not refused for the MiB it does not hold.
const budgetChunk = 64 << 10

// readMessage reads the next message whole, as websocket.ReadMessage does,
// the bytes past MaxMessage each reserved of Config.Budget before they are
// read (c.reserved; releaseMessage gives them back).
func (c *conn) readMessage() (int, []byte, error) {
	if c.t.cfg.Budget == nil || c.limit <= c.t.cfg.MaxMessage {
		return c.ws.ReadMessage()
	}
	typ, r, err := c.ws.NextReader()
	if err != nil {
		return typ, nil, err
	}
	b, err := readReserved(r, c.t.cfg.MaxMessage, func() bool {
		if !c.t.cfg.Budget.ReserveFor(c.clientKey, c.budgetKey, budgetChunk) {
			return false
		}
		c.reserved += budgetChunk
		return true
	})
	if err != nil {
		c.releaseMessage()
		return typ, nil, err // the reader's limit past the socket's, among others
	}
	// Keep what the message holds, no more.
	if held := max(int64(len(b))-c.t.cfg.MaxMessage, 0); held < c.reserved {
		c.t.cfg.Budget.ReleaseFor(c.clientKey, c.budgetKey, c.reserved-held)
		c.reserved = held
	}
	return typ, b, nil
}

// readReserved reads r whole: up to free bytes as they come, then the rest
// budgetChunk at a time, each chunk reserved first (reserve; errBudgetFull
// when it has no room). The chunks are held apart and joined once at the
// end, so that what a message held while it was read, for as long as its
// sender takes, is what it reserved: grown as one buffer, its capacity
// doubled past its bytes (a message of 9 MiB held 16 MiB). The join holds
// both for the time of one copy.
func readReserved(r io.Reader, free int64, reserve func() bool) ([]byte, error) {
	var first bytes.Buffer
	n, err := first.ReadFrom(io.LimitReader(r, free))
	if err != nil || n < free {
		return first.Bytes(), err
	}
	chunks := [][]byte{first.Bytes()}
	for {
		if !reserve() {
			return nil, errBudgetFull
		}
		chunk := make([]byte, budgetChunk)
		m, err := io.ReadFull(r, chunk)
		if m > 0 {
			chunks = append(chunks, chunk[:m])
			n += int64(m)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	out := make([]byte, 0, n)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out, nil
}

// releaseMessage gives back what the message just handled holds of
// Config.Budget, unless an operation took it over.
func (c *conn) releaseMessage() {
	if c.reserved > 0 {
		c.t.cfg.Budget.ReleaseFor(c.clientKey, c.budgetKey, c.reserved)
		c.reserved = 0
	}
}

// readFailed closes the socket after a failed read with the code that says
// why.
func (c *conn) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, websocket.ErrReadLimit):
		// gorilla has sent 1009 already; this one only marks the close.
		c.closeWith(CloseTooBig, "message too big")
	case errors.Is(err, errBudgetFull):
		c.closeWith(websocket.CloseTryAgainLater, "relay busy: "+errBudgetFull.Error()+"; send the message again later")
	case errors.As(err, &ne) && ne.Timeout() && !c.acked.Load():
		c.closeWith(gqlws.CloseInitTimeout, "Connection initialisation timeout")
	case websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived):
		// the client hung up
	default:
		c.t.cfg.Logger.Debug("websocket read", "error", err)
	}
}

// closeWith sends a close frame once and ends the socket; the reader stops
// at its next read.
func (c *conn) closeWith(code int, reason string) {
	c.closeOnce.Do(func() {
		c.sentClose.Store(true)
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(closeGrace))
		c.shut()
	})
}

// shut stops the writer and every operation; it does not touch the TCP
// connection, which hangUp closes once the reader is done.
func (c *conn) shut() {
	var dropped []outgoing
	c.qmu.Lock()
	if !c.closed {
		c.closed = true
		dropped = c.queue
		c.queue, c.queued = nil, 0
		close(c.done)
		close(c.room)
	}
	c.qmu.Unlock()
	for _, m := range dropped {
		if m.written != nil {
			m.written()
		}
	}
	c.cancel()
	// Unblock a reader waiting on a silent client.
	_ = c.ws.SetReadDeadline(time.Now().Add(closeGrace))
}

// hangUp closes the TCP connection. After a close frame it first reads
// what the client still sends (its close frame, the rest of an oversize
// message) for a moment: closing with unread input would reset the
// connection and could lose the close frame on the client's side.
func (c *conn) hangUp() {
	if c.sentClose.Load() {
		nc := c.ws.NetConn()
		_ = nc.SetReadDeadline(time.Now().Add(closeGrace))
		_, _ = io.Copy(io.Discard, nc) // bounded by the deadline, not by memory
	}
	_ = c.ws.Close()
}

// stopAll cancels every operation and forgets those waiting; none starts
// after it.
func (c *conn) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopping = true
	for _, op := range c.waiting {
		c.unwaitLocked(op)
		c.releaseOp(op)
		delete(c.ops, op.id)
	}
	c.waiting = nil
	for _, op := range c.ops {
		op.stopped = true
		op.cancel()
	}
}

// Close is a reason for the server to close a socket after
// connection_init (a revoked token, say).
type Close struct {
	Code   int
	Reason string // at most 123 bytes, as a close frame allows
}

type closeOnKey struct{}

// WithCloseOn marks the context InitFunc returns: the socket closes with
// the first Close received on ch.
func WithCloseOn(ctx context.Context, ch <-chan Close) context.Context {
	return context.WithValue(ctx, closeOnKey{}, ch)
}

// closeWhen closes the socket with code and reason once ch closes.
func (c *conn) closeWhen(ch <-chan struct{}, code int, reason string) {
	go func() {
		select {
		case <-ch:
			c.closeWith(code, reason)
		case <-c.done:
		}
	}()
}

// closeOn closes the socket on the first Close of its context's channel.
func (c *conn) closeOn(ctx context.Context) {
	ch, _ := ctx.Value(closeOnKey{}).(<-chan Close)
	if ch == nil {
		return
	}
	go func() {
		select {
		case cl := <-ch:
			c.closeWith(cl.Code, cl.Reason)
		case <-c.done:
		}
	}()
}
