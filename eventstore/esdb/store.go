package esdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
	"github.com/relayhq/relay/evidence"
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
	ids := make([]string, len(events))
	for i, e := range events {
		id, err := uuid.Parse(e.ID)
		if err != nil {
			return domain.AppendResult{}, fmt.Errorf("append to %s: event %s: %w", stream, e.ID, err)
		}
		ids[i] = id.String()
	}
	for attempt := 1; ; attempt++ {
		plan, err := s.plan(ctx, stream, expected, ids)
		if err != nil {
			return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
		}
		proposed, err := toProposedChained(stream, plan.first, plan.prev, events)
		if err != nil {
			return domain.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
		}
		res, err := s.client.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: plan.expected}, proposed...)
		if err != nil {
			err = translate(ctx, err)
			if errors.Is(err, domain.ErrWrongExpectedRevision) {
				if retried(expected) && attempt < maxChainAttempts {
					continue // another node appended after the head read
				}
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
}

// plan reads what a chained append needs of the stream (planAppend): its
// newest event for Any and StreamExists, and the link it chains to.
func (s *Store) plan(ctx context.Context, stream string, expected domain.ExpectedRevision, ids []string) (appendPlan, error) {
	var last *lastEvent
	if !expected.IsNoStream() {
		if _, exact := expected.ExactRevision(); !exact {
			r, err := s.newest(ctx, stream)
			if err != nil {
				return appendPlan{}, err
			}
			if r != nil {
				_, _, link, _ := splitChain(r.UserMetadata)
				last = &lastEvent{revision: r.EventNumber, id: r.EventID.String(), link: link}
			}
		}
	}
	p := planAppend(expected, last, ids)
	if p.linkAt != nil {
		link, err := s.linkAt(ctx, stream, *p.linkAt)
		if err != nil {
			return appendPlan{}, err
		}
		p.prev = link
	}
	return p, nil
}

// newest reads the stream's newest event, nil when it has none.
func (s *Store) newest(ctx context.Context, stream string) (*esdb.RecordedEvent, error) {
	rs, err := s.client.ReadStream(ctx, stream, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err != nil {
		return nil, s.headError(ctx, err)
	}
	defer rs.Close()
	ev, err := rs.Recv()
	if err != nil {
		return nil, s.headError(ctx, err)
	}
	return ev.OriginalEvent(), nil
}

// headError is nil for a stream with no events, else the read's error.
func (s *Store) headError(ctx context.Context, err error) error {
	err = translate(ctx, err)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, domain.ErrStreamNotFound) && !errors.Is(err, domain.ErrStreamDeleted) {
		return nil
	}
	return fmt.Errorf("read the stream's head: %w", err)
}

// linkAt is the link of the stream's event at revision rev: zero when it
// carries none or is not there (the server then refuses the append).
func (s *Store) linkAt(ctx context.Context, stream string, rev uint64) (evidence.Hash, error) {
	rs, err := s.client.ReadStream(ctx, stream, esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(rev)}, 1)
	if err != nil {
		return evidence.Hash{}, s.headError(ctx, err)
	}
	defer rs.Close()
	ev, err := rs.Recv()
	if err != nil {
		return evidence.Hash{}, s.headError(ctx, err)
	}
	r := ev.OriginalEvent()
	if r.EventNumber != rev {
		return evidence.Hash{}, nil
	}
	_, _, link, _ := splitChain(r.UserMetadata)
	return link, nil
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
// that event on as the port's tombstone (see tombstoneOf). Before it, the
// adapter records what the deletion removes and the tombstone's chain
// (recordRemoval). Not run against a real server in this repository's
// tests (none can run here).
func (s *Store) DeleteStream(ctx context.Context, stream string, expected domain.ExpectedRevision) (domain.DeleteResult, error) {
	if err := s.checkOpen(); err != nil {
		return domain.DeleteResult{}, fmt.Errorf("delete stream %s: %w", stream, err)
	}
	for attempt := 1; ; attempt++ {
		exp, err := s.recordRemoval(ctx, stream, expected)
		if err != nil {
			return domain.DeleteResult{}, fmt.Errorf("delete stream %s: %w", stream, err)
		}
		res, err := s.client.TombstoneStream(ctx, stream, esdb.TombstoneStreamOptions{ExpectedRevision: exp})
		if err != nil {
			err = translate(ctx, err)
			if errors.Is(err, domain.ErrWrongExpectedRevision) {
				if retried(expected) && attempt < maxChainAttempts {
					continue // appended to after the read: record again
				}
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
}

// recordRemoval reads the stream's events and, when the deletion will
// remove them, appends the record of each one's position and link and of
// the tombstone's chain (removalRecord) to the deletion's own stream: a
// checkpoint signed before the deletion signed their links. It returns
// the expectation to delete with: the exact revision it read, when the
// caller asked for Any or StreamExists.
func (s *Store) recordRemoval(ctx context.Context, stream string, expected domain.ExpectedRevision) (esdb.ExpectedRevision, error) {
	raw, err := s.readStreamRaw(ctx, stream, 0, maxRemoved+1)
	if err := s.headError(ctx, err); err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return expectedRevision(expected), nil // nothing removed; the server decides
	}
	if len(raw) > maxRemoved {
		return nil, fmt.Errorf("more than %d events: too many to record what the deletion removes", maxRemoved)
	}
	last := raw[len(raw)-1].rec.EventNumber
	exp := esdb.ExpectedRevision(esdb.Revision(last))
	if rev, ok := expected.ExactRevision(); ok && rev != last || expected.IsNoStream() {
		return expectedRevision(expected), nil // refused by the server
	}
	rec, err := removalOf(stream, raw, time.Now())
	if errors.Is(err, errUnplaced) {
		// Deleted without a record rather than not at all (retention must
		// go on): verification names the tombstone as inserted.
		return exp, nil
	}
	if err != nil {
		return nil, err
	}
	ev, err := rec.proposed()
	if err != nil {
		return nil, err
	}
	if _, err := s.client.AppendToStream(ctx, removedStream(stream), esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}}, ev); err != nil {
		return nil, fmt.Errorf("record what the deletion removes: %w", translate(ctx, err))
	}
	return exp, nil
}

// Messages implements evidence.MessageSource: up to limit of the port's
// events after position after, one message each, with the chain their
// metadata carries; a tombstone with the chain its deletion recorded.
func (s *Store) Messages(ctx context.Context, after uint64, limit int) ([]evidence.Message, error) {
	if err := s.checkRead(limit); err != nil {
		return nil, fmt.Errorf("read messages after %d: %w", after, err)
	}
	raw, err := s.readAllRaw(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read messages after %d: %w", after, translate(ctx, err))
	}
	out := make([]evidence.Message, len(raw))
	for i, p := range raw {
		var rec *removalRecord
		if p.rec.EventType == serverTombstone {
			r, err := s.newest(ctx, removedStream(p.rec.StreamID))
			if err != nil {
				return nil, fmt.Errorf("read messages after %d: %w", after, err)
			}
			if r != nil {
				if rec, err = parseRecord(r.Data); err != nil {
					rec = &removalRecord{} // does not parse: a broken chain
				}
			}
		}
		if out[i], err = messageOf(p.rec, p.pos, rec); err != nil {
			return nil, fmt.Errorf("read messages after %d: %w", after, err)
		}
	}
	return out, nil
}

// LastEvent returns the newest event of stream: what a proof needs of the
// checkpoints' stream. A stream with no events returns
// domain.ErrStreamNotFound.
func (s *Store) LastEvent(ctx context.Context, stream string) (domain.RecordedEvent, error) {
	if err := s.checkOpen(); err != nil {
		return domain.RecordedEvent{}, err
	}
	r, err := s.newest(ctx, stream)
	if err == nil && r == nil {
		err = domain.ErrStreamNotFound
	}
	if err != nil {
		return domain.RecordedEvent{}, fmt.Errorf("read the last event of %s: %w", stream, err)
	}
	raw, err := s.readStreamRaw(ctx, stream, r.EventNumber, 1)
	if err == nil && len(raw) == 0 {
		err = domain.ErrStreamNotFound
	}
	if err != nil {
		return domain.RecordedEvent{}, fmt.Errorf("read the last event of %s: %w", stream, err)
	}
	return toRecorded(raw[0].rec, raw[0].pos)
}
