package nodebus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/nats-io/nats.go"

	"github.com/relayhq/relay/domain"
)

// Topics of the forward request/reply exchange (the shape of Watermill's
// components/requestreply): each node takes commands on its own topic,
// each Client gets replies on its own, named in the command's replyToKey
// metadata, and a reply is matched to its caller by correlation ID, the
// attempt ID. No handler sees a message meant for another.
const (
	commandsTopicPrefix = "tunnel.forward.commands."
	repliesTopicPrefix  = "tunnel.forward.replies."
	replyToKey          = "reply_to"
	// replyWireKey names the newest reply version the command's Client
	// reads (wire.go); a command without it is from a node that reads
	// version 3 only.
	replyWireKey = "reply_wire"
	// ackKey marks a reply that only acknowledges a command (no payload):
	// the command arrived and runs; the outcome follows.
	ackKey = "ack"
)

func commandsTopic(node string) string { return commandsTopicPrefix + node }

// Bus is the Watermill Pub/Sub and router that carry forward commands and
// their replies between nodes; a command served in the process that holds
// the agent's session never crosses it (see Hub.Forward). Create the Hub
// and Clients, then call Run.
type Bus struct {
	logger *slog.Logger
	pubsub pubSub
	router *message.Router
	conn   *nats.Conn // nil for the in-process bus

	mu      sync.Mutex
	runCtx  context.Context // set by Run; handlers added later are started with it
	runDone chan struct{}   // closed when Run returns
}

// pubSub is what the Bus needs of a Watermill Pub/Sub.
type pubSub interface {
	message.Publisher
	message.Subscriber
}

// NewBus builds a bus in one process, for tests: its Pub/Sub hands each
// topic's messages on in order, one at a time, as the bus on NATS core does
// (memPubSub).
func NewBus(logger *slog.Logger) (*Bus, error) {
	return newBus(logger, newMemPubSub(), nil)
}

// natsConnectTimeout bounds the first connection to the bus's NATS servers.
const natsConnectTimeout = 10 * time.Second

// NewNATSBus builds the bus between nodes on NATS core, with JetStream
// disabled: a forward is delivered at most once, never redelivered (it
// would reach the local target twice), and nothing is stored. servers are
// the cluster's seed URLs; name names this node's connection to the
// servers' monitoring; each subscription holds up to pendingBytes its
// handler has not taken yet (PendingBytes), beyond which NATS drops
// messages, logged as the subscription being full. The connection
// reconnects for as long as the process runs.
func NewNATSBus(logger *slog.Logger, servers []string, name string, pendingBytes int64) (*Bus, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if pendingBytes <= 0 {
		return nil, fmt.Errorf("new bus: pending bytes %d, want more than 0", pendingBytes)
	}
	conn, err := nats.Connect(strings.Join(servers, ","),
		nats.Name(name), nats.Timeout(natsConnectTimeout),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(false),
		nats.ErrorHandler(slowConsumerLogger(logger)))
	if err != nil {
		return nil, fmt.Errorf("connect bus to %s: %w", strings.Join(servers, ","), err)
	}
	wlog := watermillLogger(logger)
	pub, err := wmnats.NewPublisherWithNatsConn(conn, wmnats.PublisherPublishConfig{
		Marshaler: &wmnats.NATSMarshaler{}, SubjectCalculator: wmnats.DefaultSubjectCalculator,
		JetStream: wmnats.JetStreamConfig{Disabled: true},
	}, wlog)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("new bus publisher: %w", err)
	}
	return newBus(logger, natsPubSub{pub, newNATSSubscriber(conn, pendingBytes)}, conn)
}

// natsPubSub joins the NATS publisher and subscriber, which share one
// connection: closing the subscriber drains it, then the publisher closes it.
type natsPubSub struct {
	*wmnats.Publisher
	*natsSubscriber
}

func (p natsPubSub) Close() error {
	return errors.Join(p.natsSubscriber.Close(), p.Publisher.Close())
}

// Conn is the NATS connection of a bus built by NewNATSBus (nil otherwise),
// for the node leases that travel beside the forwards.
func (b *Bus) Conn() *nats.Conn { return b.conn }

// MaxPayload is the largest message the bus carries; 0: no limit.
func (b *Bus) MaxPayload() int64 {
	if b.conn == nil {
		return 0
	}
	return b.conn.MaxPayload()
}

// watermillLogger maps Watermill's Info logs, chatty per message, to Debug.
func watermillLogger(logger *slog.Logger) watermill.LoggerAdapter {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return watermill.NewSlogLoggerWithLevelMapping(logger, map[slog.Level]slog.Level{
		slog.LevelInfo: slog.LevelDebug,
	})
}

// newBus builds a router with correlation, failure replies and panic
// recovery over pubsub.
func newBus(logger *slog.Logger, pubsub pubSub, conn *nats.Conn) (*Bus, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermillLogger(logger))
	if err != nil {
		_ = pubsub.Close()
		return nil, fmt.Errorf("new bus: %w", err)
	}
	b := &Bus{logger: logger, pubsub: pubsub, router: router, conn: conn, runDone: make(chan struct{})}
	// The first middleware is the outermost: a panic becomes an error
	// (Recoverer), and the error becomes a reply to the waiting caller
	// instead of an endless redelivery.
	router.AddMiddleware(b.replyOnError, middleware.Recoverer)
	return b, nil
}

// Run subscribes the handlers and blocks until ctx is done or Close is called.
func (b *Bus) Run(ctx context.Context) error {
	b.mu.Lock()
	if b.runCtx != nil {
		b.mu.Unlock()
		return errors.New("run bus: already running")
	}
	b.runCtx = ctx
	b.mu.Unlock()
	defer close(b.runDone)
	if err := b.router.Run(ctx); err != nil {
		return fmt.Errorf("run bus: %w", err)
	}
	return nil
}

// Running is closed once Run has subscribed every handler.
func (b *Bus) Running() <-chan struct{} { return b.router.Running() }

// Close stops the router, waiting for handlers in progress, and the Pub/Sub.
func (b *Bus) Close() error {
	b.mu.Lock()
	started := b.runCtx != nil
	b.mu.Unlock()
	var errs []error
	if started {
		// Closing a router that never ran would wait for handlers that
		// never started until its close timeout.
		if err := b.router.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close router: %w", err))
		}
	}
	if err := b.pubsub.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close pubsub: %w", err))
	}
	return errors.Join(errs...)
}

// addHandler registers a handler; one added after Run is started at once.
func (b *Bus) addHandler(name, topic, publishTopic string, fn message.HandlerFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, dup := b.router.Handlers()[name]; dup {
		b.logger.Error("bus handler registered twice; keeping the first", "handler", name)
		return
	}
	if publishTopic == "" {
		b.router.AddConsumerHandler(name, topic, b.pubsub, func(m *message.Message) error {
			_, err := fn(m)
			return err
		})
	} else {
		b.router.AddHandler(name, topic, b.pubsub, publishTopic, b.pubsub, fn)
	}
	if b.runCtx == nil {
		return
	}
	select {
	case <-b.router.Running():
	case <-b.runDone:
		return
	case <-b.runCtx.Done():
		return
	}
	if err := b.router.RunHandlers(b.runCtx); err != nil {
		b.logger.Error("start bus handler", "handler", name, "error", err)
	}
}

// reply is the payload of a message on a replies topic (see wire.go).
type reply struct {
	Outcome domain.ForwardOutcome
	Error   string // the Hub could not carry out or record the forward
	lost    bool   // never sent: the node's lease lapsed (Client.NodeLost)
}

// failureNotRecorded is an error reply's outcome failure text when the
// attempt ran but its outcome could not be recorded. It rides in a field
// every version of the reply carries, so nodes of other versions still
// read the reply (as an error they cannot tell apart).
const failureNotRecorded = "outcome not recorded"

// errorReply is the reply to a command the Hub could not carry out or
// record.
func errorReply(attemptID string, err error) reply {
	r := reply{Outcome: domain.ForwardOutcome{AttemptID: attemptID}, Error: err.Error()}
	if errors.Is(err, domain.ErrOutcomeNotRecorded) {
		r.Outcome.Failure = failureNotRecorded
	}
	return r
}

// replyAddr is where the reply to a command goes: the sending Client's
// topic and the command's correlation ID, and the reply version it reads.
type replyAddr struct {
	topic, correlationID string
	version              byte
}

func replyAddress(msg *message.Message) replyAddr {
	to := replyAddr{topic: msg.Metadata.Get(replyToKey), correlationID: middleware.MessageCorrelationID(msg), version: wireReplyV3}
	if msg.Metadata.Get(replyWireKey) == strconv.Itoa(wireReplyV4) {
		to.version = wireReplyV4
	}
	return to
}

// publishReply sends r to the Client that sent the command.
func (b *Bus) publishReply(to replyAddr, r reply) error {
	if to.topic == "" {
		return fmt.Errorf("command %s names no reply topic", to.correlationID)
	}
	out := message.NewMessage(watermill.NewUUID(), encodeReply(r, to.version))
	middleware.SetCorrelationID(to.correlationID, out)
	if err := b.pubsub.Publish(to.topic, out); err != nil {
		return fmt.Errorf("publish reply to %s: %w", to.topic, err)
	}
	return nil
}

// publishAck tells the Client that sent the command that it arrived.
func (b *Bus) publishAck(to replyAddr) error {
	if to.topic == "" {
		return fmt.Errorf("command %s names no reply topic", to.correlationID)
	}
	out := message.NewMessage(watermill.NewUUID(), nil)
	middleware.SetCorrelationID(to.correlationID, out)
	out.Metadata.Set(ackKey, "1")
	if err := b.pubsub.Publish(to.topic, out); err != nil {
		return fmt.Errorf("publish acknowledgement to %s: %w", to.topic, err)
	}
	return nil
}

// replyOnError answers the waiting caller when a command handler fails,
// rather than nacking the command: a forward must not run twice, and the
// caller would otherwise wait until its own timeout.
func (b *Bus) replyOnError(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		out, err := h(msg)
		if err == nil {
			return out, nil
		}
		correlationID := middleware.MessageCorrelationID(msg)
		b.logger.Error("forward command failed", "attempt_id", correlationID, "error", err)
		var p middleware.RecoveredPanicError
		if errors.As(err, &p) {
			err = fmt.Errorf("panic: %v", p.V) // the stack trace is in the log, not in the reply
		}
		if err := b.publishReply(replyAddress(msg), errorReply(correlationID, err)); err != nil {
			b.logger.Error("forward command failed and its caller could not be told", "attempt_id", correlationID, "error", err)
		}
		return nil, nil
	}
}
