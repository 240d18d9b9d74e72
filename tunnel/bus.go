package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

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
)

// DefaultNode names the node of a Hub whose config names none.
const DefaultNode = "local"

func commandsTopic(node string) string { return commandsTopicPrefix + node }

// Bus is the Watermill Pub/Sub and router that carry forward commands and
// their replies between nodes; a command served in the process that holds
// the agent's session never crosses it (see Hub.Forward). Create the Hub
// and Clients, then call Run.
type Bus struct {
	logger *slog.Logger
	pubsub *gochannel.GoChannel
	router *message.Router

	mu      sync.Mutex
	runCtx  context.Context // set by Run; handlers added later are started with it
	runDone chan struct{}   // closed when Run returns
}

// NewBus builds a GoChannel Pub/Sub and a router with correlation, failure
// replies and panic recovery. Watermill's Info logs are chatty per message,
// so they are mapped to Debug.
func NewBus(logger *slog.Logger) (*Bus, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	wlog := watermill.NewSlogLoggerWithLevelMapping(logger, map[slog.Level]slog.Level{
		slog.LevelInfo: slog.LevelDebug,
	})
	pubsub := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 256}, wlog)
	router, err := message.NewRouter(message.RouterConfig{}, wlog)
	if err != nil {
		return nil, fmt.Errorf("new bus: %w", err)
	}
	b := &Bus{logger: logger, pubsub: pubsub, router: router, runDone: make(chan struct{})}
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
}

// publishReply sends r to the Client that sent the command msg.
func (b *Bus) publishReply(msg *message.Message, r reply) error {
	replyTo := msg.Metadata.Get(replyToKey)
	if replyTo == "" {
		return fmt.Errorf("command %s names no reply topic", msg.UUID)
	}
	out := message.NewMessage(watermill.NewUUID(), encodeReply(r))
	middleware.SetCorrelationID(middleware.MessageCorrelationID(msg), out)
	if err := b.pubsub.Publish(replyTo, out); err != nil {
		return fmt.Errorf("publish reply to %s: %w", replyTo, err)
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
		text := err.Error()
		var p middleware.RecoveredPanicError
		if errors.As(err, &p) {
			text = fmt.Sprintf("panic: %v", p.V) // the stack trace is in the log, not in the reply
		}
		if err := b.publishReply(msg, reply{Outcome: domain.ForwardOutcome{AttemptID: correlationID}, Error: text}); err != nil {
			b.logger.Error("forward command failed and its caller could not be told", "attempt_id", correlationID, "error", err)
		}
		return nil, nil
	}
}
