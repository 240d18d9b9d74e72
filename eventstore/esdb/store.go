package esdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
)

// Options tune a Store. The zero value is ready to use.
type Options struct {
	// Logger receives the store's and the client's diagnostics; nil discards
	// them.
	Logger *slog.Logger
}

// Store is a domain.EventStore backed by an EventStoreDB server or cluster.
// It is safe for concurrent use.
type Store struct {
	client *esdb.Client

	done      chan struct{} // closed by Close: ends subscriptions
	closeOnce sync.Once
	closeErr  error
}

var _ domain.EventStore = (*Store)(nil)

// Open connects to the server named by connString (for example
// "esdb://admin:changeit@127.0.0.1:2113?tls=false") and checks, within ctx,
// that $all can be read.
func Open(ctx context.Context, connString string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := esdb.ParseConnectionString(connString)
	if err != nil {
		// The connection string may hold a password: it stays out of the error.
		return nil, fmt.Errorf("open eventstoredb: parse connection string: %w", err)
	}
	cfg.Logger = clientLogger(opts.Logger)
	client, err := esdb.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("open eventstoredb: %w", err)
	}
	s := &Store{client: client, done: make(chan struct{})}
	if err := s.ping(ctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("open eventstoredb: %w", err)
	}
	return s, nil
}

// clientLogger sends the client's printf-style log lines to slog. The client
// reports every failed call as an error although the adapter returns it to
// its caller too, so its errors are logged as warnings.
func clientLogger(log *slog.Logger) esdb.LoggingFunc {
	return func(level esdb.LogLevel, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		switch level {
		case esdb.LogWarn, esdb.LogError:
			log.Warn(msg, slog.String("component", "eventstoredb-client"))
		default:
			log.Debug(msg, slog.String("component", "eventstoredb-client"))
		}
	}
}

func (s *Store) ping(ctx context.Context) error {
	rs, err := s.client.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err != nil {
		return fmt.Errorf("read $all: %w", translate(ctx, err))
	}
	defer rs.Close()
	if _, err := rs.Recv(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read $all: %w", translate(ctx, err))
	}
	return nil
}

// Append writes events to stream if expected matches. The server makes it
// durable before answering. A conflict is a *domain.WrongExpectedRevisionError
// whose Actual is read back from the stream.
func (s *Store) Append(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (domain.AppendResult, error) {
	if err := s.checkOpen(); err != nil {
		return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	if err := envelope.Validate(stream, events); err != nil {
		return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	proposed, err := toProposed(events)
	if err != nil {
		return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	res, err := s.client.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: expectedRevision(expected)}, proposed...)
	if err != nil {
		err = translate(ctx, err)
		if errors.Is(err, domain.ErrWrongExpectedRevision) {
			return domain.AppendResult{}, s.conflict(ctx, stream, expected, err)
		}
		return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	pos, err := portPosition(res.CommitPosition, uint64(len(events)-1))
	if err != nil {
		return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	return domain.AppendResult{NextRevision: res.NextExpectedVersion, Position: pos}, nil
}

// conflict builds the port's conflict error. The client reports the
// stream's revision only inside its message, so it is read back instead.
func (s *Store) conflict(ctx context.Context, stream string, expected domain.ExpectedRevision, cause error) error {
	wrong := &domain.WrongExpectedRevisionError{Stream: stream, Expected: expected}
	head, err := s.client.ReadStream(ctx, stream, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err != nil {
		return fmt.Errorf("append to %s: %w (reading its head failed: %v)", stream, cause, err)
	}
	defer head.Close()
	ev, err := head.Recv()
	switch err = translate(ctx, err); {
	case err == nil:
		wrong.Actual, wrong.Exists = ev.OriginalEvent().EventNumber, true
	case errors.Is(err, io.EOF), errors.Is(err, domain.ErrStreamNotFound):
	default:
		return fmt.Errorf("append to %s: %w (reading its head failed: %v)", stream, cause, err)
	}
	return wrong
}

// LastPosition returns the port position of the newest event the port
// wrote (system events are skipped), 0 when there is none.
func (s *Store) LastPosition(ctx context.Context) (uint64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, fmt.Errorf("last position: %w", err)
	}
	from := esdb.AllPosition(esdb.End{})
	const page = 256
	for {
		rs, err := s.client.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: from}, page)
		if err != nil {
			return 0, fmt.Errorf("last position: %w", translate(ctx, err))
		}
		n, found, next, err := lastUserEvent(rs)
		rs.Close()
		if err != nil {
			return 0, fmt.Errorf("last position: %w", translate(ctx, err))
		}
		if found != nil {
			return s.lastOfAppend(ctx, found.Position.Commit)
		}
		if n < page {
			return 0, nil
		}
		from = next
	}
}

// lastOfAppend returns the port position of the last event of the append
// at commit position commit: its events are read forwards from its start,
// with any appended since.
func (s *Store) lastOfAppend(ctx context.Context, commit uint64) (uint64, error) {
	start, err := portPosition(commit, 0)
	if err != nil {
		return 0, fmt.Errorf("last position: %w", err)
	}
	last := start
	for {
		evs, err := s.readAll(ctx, last, 256)
		if err != nil {
			return 0, fmt.Errorf("last position: %w", translate(ctx, err))
		}
		for _, e := range evs {
			if commitOf(e.Position) != commit {
				return last, nil
			}
			last = e.Position
		}
		if len(evs) < 256 {
			return last, nil
		}
	}
}

// lastUserEvent scans one backward page of $all for the newest non-system
// event; next is where the following page starts.
func lastUserEvent(rs *esdb.ReadStream) (n int, found *esdb.RecordedEvent, next esdb.AllPosition, err error) {
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil, next, nil
		}
		if err != nil {
			return n, nil, nil, err
		}
		n++
		rec := ev.OriginalEvent()
		if !isSystem(rec) {
			return n, rec, nil, nil
		}
		next = rec.Position
	}
}

// Close ends every subscription and the connection. Calling it again
// returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		if err := s.client.Close(); err != nil {
			s.closeErr = fmt.Errorf("close eventstoredb: %w", err)
		}
	})
	return s.closeErr
}

func (s *Store) checkOpen() error {
	select {
	case <-s.done:
		return ErrClosed
	default:
		return nil
	}
}

// DeleteStream tombstones stream (EventStoreDB's hard delete): the server
// writes its own "$streamDeleted" event at the end of the stream and
// refuses reads and appends from then on with StreamDeleted, which the
// adapter reports as domain.ErrStreamDeleted. SubscribeAll and ReadAll hand
// that event on as the port's tombstone (see tombstoneOf). Not run against a
// real server in this repository's tests (none can run here).
func (s *Store) DeleteStream(ctx context.Context, stream string, expected domain.ExpectedRevision) (domain.DeleteResult, error) {
	if err := s.checkOpen(); err != nil {
		return domain.DeleteResult{}, fmt.Errorf("delete stream %s: %w", stream, err)
	}
	res, err := s.client.TombstoneStream(ctx, stream, esdb.TombstoneStreamOptions{ExpectedRevision: expectedRevision(expected)})
	if err != nil {
		err = translate(ctx, err)
		if errors.Is(err, domain.ErrWrongExpectedRevision) {
			return domain.DeleteResult{}, s.conflict(ctx, stream, expected, err)
		}
		return domain.DeleteResult{}, fmt.Errorf("delete stream %s: %w", stream, err)
	}
	if c := res.Position.Commit; c == 0 || c == unknownPosition {
		return domain.DeleteResult{}, nil // the server did not say
	}
	pos, err := portPosition(res.Position.Commit, 0)
	if err != nil {
		return domain.DeleteResult{}, fmt.Errorf("delete stream %s: %w", stream, err)
	}
	return domain.DeleteResult{Position: pos}, nil
}
