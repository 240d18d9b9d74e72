package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
	"github.com/relayhq/relay/evidence"
)

// Defaults of Options.
const (
	DefaultStream  = "RELAY_EVENTS"
	DefaultSubject = "relay.events"
	// DefaultReplicas is what a stream created on a single server gets; on
	// a cluster, Open creates it with as many replicas as the cluster has
	// servers, at most MaxAutoReplicas, unless Options.Replicas says.
	DefaultReplicas   = 1
	MaxAutoReplicas   = 3
	DefaultDuplicates = 2 * time.Minute
	// DefaultAttempt bounds one try of a request. A request written to a
	// server that dies before it answers is lost, not failed, and waits out
	// the whole try: at 5 s a SIGKILL of a server cost whole tries (5, 10
	// s); an append on a healthy stream takes milliseconds, and one tried
	// again is recognised by its event IDs. Below about 2 s, tries ended
	// while a new stream leader was still being elected (4-6 s on
	// nats-server 2.9.10) and added nothing.
	DefaultAttempt = 2 * time.Second
)

// Options tune a Store. The zero value is ready to use.
type Options struct {
	// Stream is the JetStream stream holding the log (DefaultStream).
	Stream string
	// Subject prefixes the per-stream subjects: the stream "delivery-1" is
	// written on "<Subject>.delivery-1" (DefaultSubject).
	Subject string
	// Replicas and Duplicates configure the JetStream stream when Open
	// creates it (Replicas 0: one per server of the cluster, at most
	// MaxAutoReplicas, or DefaultReplicas on a single server; Duplicates
	// DefaultDuplicates); an existing stream keeps its own settings (Open
	// only allows roll-ups where it can).
	Replicas   int
	Duplicates time.Duration
	// Attempt bounds each try of a call (DefaultAttempt). NATS delivers a
	// request at most once: one written while a connection dies, before the
	// client notices, is lost and gets no answer. The store then tries again
	// rather than wait for the caller's deadline; reads are repeatable, and an
	// append repeated with the same event IDs is recognised (see Append).
	Attempt time.Duration
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Subject == "" {
		o.Subject = DefaultSubject
	}
	if o.Duplicates == 0 {
		o.Duplicates = DefaultDuplicates
	}
	if o.Attempt == 0 {
		o.Attempt = DefaultAttempt
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is a domain.EventStore on a NATS JetStream stream. It is safe for
// concurrent use.
type Store struct {
	nc      *nats.Conn
	js      natsjs.JetStream
	stream  natsjs.Stream
	name    string // of the JetStream stream
	subject string // prefix of the per-stream subjects
	attempt time.Duration
	// canDelete: the stream allows roll-ups, which DeleteStream needs.
	canDelete bool

	life      context.Context // ended by Close; subscriptions run inside it
	end       context.CancelFunc
	done      <-chan struct{} // life.Done()
	closeOnce sync.Once
}

var _ domain.EventStore = (*Store)(nil)

// connectTimeout bounds the first connection when ctx has no deadline.
const connectTimeout = 10 * time.Second

// Open connects to servers (one NATS URL or a comma-separated list of
// cluster seeds, as nats.Connect takes them) and makes sure the log's
// JetStream stream exists, creating it when it does not, and allows the
// roll-ups DeleteStream needs (ensureStream). ctx bounds both.
func Open(ctx context.Context, servers string, opts Options) (*Store, error) {
	opts.setDefaults()
	log := opts.Logger.With(slog.String("component", "nats"))
	timeout := connectTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open nats event log: %w", err)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("open nats event log: %w", context.DeadlineExceeded)
	}
	nc, err := nats.Connect(servers,
		nats.Name("relay"),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1), // a relay outlives server restarts and leader moves
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected", slog.Any("error", err))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected", slog.String("server", nc.ConnectedUrlRedacted())) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("async error", slog.Any("error", err)) }),
	)
	if err != nil {
		// The URLs may hold credentials: they stay out of the error.
		return nil, fmt.Errorf("open nats event log: connect: %w", err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open nats event log: %w", err)
	}
	if opts.Replicas == 0 {
		opts.Replicas = autoReplicas(nc)
		log.Info("replicas of the log's stream, if it is created", slog.Int("replicas", opts.Replicas),
			slog.String("why", replicasWhy(nc, opts.Replicas)))
	}
	stream, err := ensureStream(ctx, js, opts)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open nats event log: stream %s: %w", opts.Stream, translate(ctx, err))
	}
	if stream.CachedInfo().Config.AllowDirect {
		// Direct gets may be answered by a replica that lags the leader, so
		// an append could check its expected revision against a stale head.
		// The server still refuses a wrong append, but correct ones can be
		// refused too until the replica catches up.
		log.Warn("the log's stream allows direct gets; stream heads may be read from lagging replicas", slog.String("stream", opts.Stream))
	}
	if have := stream.CachedInfo().Config.Replicas; have < min(autoReplicas(nc), MaxAutoReplicas) && have == 1 {
		// Losing the one server that holds it stops every relay.
		log.Warn("the log's stream has one replica on a cluster: the server holding it is a single point of failure; raise it with nats stream edit --replicas 3",
			slog.String("stream", opts.Stream), slog.String("cluster", nc.ConnectedClusterName()))
	}
	canDelete := allowsRollups(stream.CachedInfo().Config)
	if !canDelete {
		log.Warn("the log's stream denies purges or roll-ups; deleting streams (inspector retention) will fail", slog.String("stream", opts.Stream))
	}
	life, end := context.WithCancel(context.Background())
	return &Store{nc: nc, js: js, stream: stream, name: opts.Stream, subject: opts.Subject, attempt: opts.Attempt, canDelete: canDelete, life: life, end: end, done: life.Done()}, nil
}

// autoReplicas is the replica count of a stream created without one: one
// per server of the cluster the connection reached (the servers it knows
// of: its seeds and those the cluster told it about), at most
// MaxAutoReplicas; DefaultReplicas on a server that is in no cluster.
// An R1 stream on a cluster stops every relay when its one server dies,
// and a restarted relay cannot even open it.
func autoReplicas(nc *nats.Conn) int {
	if nc.ConnectedClusterName() == "" {
		return DefaultReplicas
	}
	return max(DefaultReplicas, min(len(nc.Servers()), MaxAutoReplicas))
}

func replicasWhy(nc *nats.Conn, n int) string {
	if nc.ConnectedClusterName() == "" {
		return "the server is in no cluster"
	}
	return fmt.Sprintf("cluster %s of %d known servers (set ?replicas= to choose)", nc.ConnectedClusterName(), len(nc.Servers()))
}

// streamConfig is the JetStream stream the log lives in: every subject
// under the prefix, kept forever on disk. Messages go only through
// DeleteStream's tombstone, a roll-up of one subject (see delete.go), which
// JetStream allows only on a stream that allows purges. So purges are
// allowed (a NATS user with the stream's purge permission could purge it
// too: restrict it to the relay's account) and single message deletes stay
// denied.
func streamConfig(opts Options) natsjs.StreamConfig {
	return natsjs.StreamConfig{
		Name:        opts.Stream,
		Description: "relay event log: one message per append, one subject per event stream",
		Subjects:    []string{opts.Subject + ".*"},
		Storage:     natsjs.FileStorage,
		Retention:   natsjs.LimitsPolicy,
		Discard:     natsjs.DiscardNew, // a full stream refuses appends instead of dropping history
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxAge:      0,
		Replicas:    opts.Replicas,
		Duplicates:  opts.Duplicates,
		DenyDelete:  true,
		DenyPurge:   false, // roll-ups need it
		AllowRollup: true,  // DeleteStream's tombstone
		AllowDirect: false, // reads go to the leader, which has every acknowledged append
	}
}

func ensureStream(ctx context.Context, js natsjs.JetStream, opts Options) (natsjs.Stream, error) {
	cfg := streamConfig(opts)
	stream, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, natsjs.ErrStreamNotFound) {
		stream, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, natsjs.ErrStreamNameAlreadyInUse) { // another relay created it meanwhile
			stream, err = js.Stream(ctx, cfg.Name)
		}
	}
	if err != nil {
		return nil, err
	}
	have := stream.CachedInfo().Config
	if !slices.Contains(have.Subjects, cfg.Subjects[0]) {
		return nil, fmt.Errorf("exists with subjects %v, want it to hold %s", have.Subjects, cfg.Subjects[0])
	}
	if !have.AllowRollup && !have.DenyPurge {
		// Created without roll-ups (by an operator): allow them, changing
		// nothing else. A stream that denies purges (an earlier relay's)
		// cannot be changed so; Open warns and DeleteStream refuses.
		have.AllowRollup = true
		return js.UpdateStream(ctx, have)
	}
	return stream, nil
}

// allowsRollups reports whether DeleteStream can work on a stream.
func allowsRollups(cfg natsjs.StreamConfig) bool { return cfg.AllowRollup && !cfg.DenyPurge }

// subjectOf is the subject of an event stream's messages.
func (s *Store) subjectOf(stream string) string { return s.subject + "." + subjectToken(stream) }

// maxConflictRetries bounds how often one Any or StreamExists append reads
// the head again after the stream moved on under it; each retry means
// another append won, so the log is progressing.
const maxConflictRetries = 1000

// Append writes events to stream as one message if expected matches; the
// server has stored it (on a quorum of a replicated stream) before it
// answers. A retry of an append that was stored already, with the same event
// IDs at the same place, returns the first result instead of writing again.
func (s *Store) Append(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (domain.AppendResult, error) {
	if err := s.checkOpen(); err != nil {
		return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	if err := envelope.Validate(stream, events); err != nil {
		return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	if err := checkAppendSize(len(events)); err != nil {
		return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	res, err := s.append(ctx, stream, expected, events)
	var wrong *domain.WrongExpectedRevisionError
	if err != nil && !errors.As(err, &wrong) {
		return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	return res, err
}

func (s *Store) append(ctx context.Context, stream string, expected domain.ExpectedRevision, events []domain.EventData) (domain.AppendResult, error) {
	subj := s.subjectOf(stream)
	for range maxConflictRetries {
		// NoStream needs no read: expecting subject sequence 0 is the whole
		// check, and it is the relay's most common append.
		var h head
		var last *stored
		if !expected.IsNoStream() {
			var err error
			if h, last, err = s.head(ctx, subj); err != nil {
				return domain.AppendResult{}, err
			}
			if last != nil && isRetryAt(expected, last, events) {
				return last.result(), nil
			}
		}
		seq, ok := expectedSubjectSeq(expected, h)
		if !ok {
			return s.conflict(ctx, stream, expected, events, h, last)
		}
		ack, err := s.publish(ctx, subj, batch{stream: stream, revision: h.nextRevision(), events: events}, last.headLink(), seq)
		switch {
		case errors.Is(err, domain.ErrWrongExpectedRevision) && (expected.IsAny() || expected.IsStreamExists()):
			continue // another append landed between the read and the write
		case errors.Is(err, domain.ErrWrongExpectedRevision):
			if h, last, err = s.head(ctx, subj); err != nil {
				return domain.AppendResult{}, err
			}
			if _, ok := expectedSubjectSeq(expected, h); ok && (last == nil || !isRetryAt(expected, last, events)) {
				// The stream is where the append expects it: a replicated
				// stream's leader refuses an expected subject sequence
				// (10164, no number) while an earlier message of the same
				// subject is still in process there, even one already
				// acknowledged. Not a conflict: try again once it is done.
				if err := pause(ctx, inFlightPause); err != nil {
					return domain.AppendResult{}, err
				}
				continue
			}
			return s.conflict(ctx, stream, expected, events, h, last)
		case err != nil:
			return domain.AppendResult{}, err
		case ack.Duplicate:
			return s.duplicate(ctx, subj, events, ack.Sequence)
		}
		n := len(events)
		return domain.AppendResult{NextRevision: h.nextRevision() + uint64(n) - 1, Position: position(ack.Sequence, n-1, n)}, nil
	}
	return domain.AppendResult{}, fmt.Errorf("%w: stream %s kept moving over %d tries", domain.ErrWrongExpectedRevision, stream, maxConflictRetries)
}

// publish sends one append's message with the subject sequence the server
// must find, and the first event's ID as Nats-Msg-Id: the server then drops
// a repeat of the message within the stream's duplicate window and answers
// with the original's sequence.
//
// The message carries the events' chain after prev, the link of the message
// the expected sequence names (chain.go).
func (s *Store) publish(ctx context.Context, subj string, b batch, prev evidence.Hash, expectedSeq uint64) (*natsjs.PubAck, error) {
	msg, err := chainMessage(subj, b, prev)
	if err != nil {
		return nil, err
	}
	var ack *natsjs.PubAck
	err = s.retry(ctx, func(try context.Context) (err error) {
		// A repeat of a try that was stored after all finds the subject
		// moved on (or its own Nats-Msg-Id) and is recognised by Append.
		ack, err = s.js.PublishMsg(try, msg,
			natsjs.WithMsgID(b.events[0].ID),
			natsjs.WithExpectStream(s.name),
			natsjs.WithExpectLastSequencePerSubject(expectedSeq))
		return err
	})
	if err != nil {
		return nil, translate(ctx, err)
	}
	return ack, nil
}

// conflict decides a refused append: it is a retry of an append already
// stored at the place expected names (a lost reply, a client retry) when
// the message starting there carries the same event IDs, and a conflict
// otherwise. h and last are the stream's head as read after the refusal.
// Whether the server reported the retry as a duplicate or as a wrong last
// sequence depends on its version, its clustering and the duplicate window;
// reading the IDs back decides the same way in every case.
func (s *Store) conflict(ctx context.Context, stream string, expected domain.ExpectedRevision, events []domain.EventData, h head, last *stored) (domain.AppendResult, error) {
	if place, ok := placeOf(expected); ok {
		m, err := s.messageAt(ctx, s.subjectOf(stream), place, h, last)
		if err != nil {
			return domain.AppendResult{}, err
		}
		if m != nil && sameIDs(m.batch.events, events) {
			return m.result(), nil
		}
	}
	return domain.AppendResult{}, &domain.WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: h.last, Exists: h.exists}
}

// duplicate answers an append the server dropped as a repeat of message seq:
// a retry when that message is this append, a reused event ID otherwise
// (the window spans the whole JetStream stream, every event stream).
func (s *Store) duplicate(ctx context.Context, subj string, events []domain.EventData, seq uint64) (domain.AppendResult, error) {
	m, err := s.message(ctx, seq)
	if err != nil {
		return domain.AppendResult{}, fmt.Errorf("read the message event %s repeats: %w", events[0].ID, err)
	}
	if m.subject != subj || !sameIDs(m.batch.events, events) {
		return domain.AppendResult{}, fmt.Errorf("%w: %s is already in %s at revision %d", domain.ErrDuplicateEventID, events[0].ID, m.batch.stream, m.batch.revision)
	}
	return m.result(), nil
}

// isRetryAt reports whether the stream's newest message m is this append
// itself, at the place expected names (anywhere for Any and StreamExists).
func isRetryAt(expected domain.ExpectedRevision, m *stored, events []domain.EventData) bool {
	if place, ok := placeOf(expected); ok && m.batch.revision != place {
		return false
	}
	return sameIDs(m.batch.events, events)
}

func sameIDs(a, b []domain.EventData) bool {
	return slices.EqualFunc(a, b, func(x, y domain.EventData) bool { return x.ID == y.ID })
}

// LastPosition is the position of the newest event: the last event of the
// stream's last message (see position).
func (s *Store) LastPosition(ctx context.Context) (uint64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, fmt.Errorf("last position: %w", err)
	}
	seq, err := s.lastSeq(ctx)
	if err != nil {
		return 0, fmt.Errorf("last position: %w", err)
	}
	return lastPosition(seq), nil
}

func (s *Store) lastSeq(ctx context.Context) (uint64, error) {
	var info *natsjs.StreamInfo
	err := s.retry(ctx, func(try context.Context) (err error) {
		info, err = s.stream.Info(try)
		return err
	})
	if err != nil {
		return 0, translate(ctx, err)
	}
	return info.State.LastSeq, nil
}

// retryPause spaces tries when no server answered at all (JetStream still
// starting, or a leader being elected).
const retryPause = 250 * time.Millisecond

// inFlightPause spaces tries of an append the leader refused while an
// earlier append to its subject was still being applied.
const inFlightPause = 5 * time.Millisecond

func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("append: %w", ctx.Err())
	}
}

// errCodeTemporarilyUnavailable is JetStream's "JetStream system
// temporarily unavailable" (HTTP 503): a replicated stream without a
// leader for a moment, as when a server of the cluster stops. Seen for
// every append for about a second after one of three servers stopped
// (systemtest/cluster_test.go); the jetstream package names no constant
// for it.
const errCodeTemporarilyUnavailable natsjs.ErrorCode = 10008

func temporarilyUnavailable(err error) bool {
	var apiErr *natsjs.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeTemporarilyUnavailable
}

// retry runs one request until it is answered, fails for another reason
// than a lost request, or ctx ends; each try gets at most s.attempt.
func (s *Store) retry(ctx context.Context, request func(try context.Context) error) error {
	for {
		try, cancel := context.WithTimeout(ctx, s.attempt)
		err := request(try)
		cancel()
		switch {
		case err == nil || ctx.Err() != nil:
			return err
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		case errors.Is(err, nats.ErrNoResponders), errors.Is(err, natsjs.ErrNoStreamResponse), temporarilyUnavailable(err):
			select {
			case <-time.After(retryPause):
			case <-ctx.Done():
				return err
			}
		default:
			return err
		}
		if err := s.checkOpen(); err != nil {
			return err
		}
	}
}

// Close ends every subscription and the connection. Calling it again does
// nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.end()
		s.nc.Close()
	})
	return nil
}

func (s *Store) checkOpen() error {
	select {
	case <-s.done:
		return ErrClosed
	default:
		return nil
	}
}
