package jetstream

import (
	"context"
	"errors"
	"fmt"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
)

// stored is one message of the log, decoded.
type stored struct {
	seq     uint64
	subject string
	batch   batch
	// The chain (chain.go): nil leaves and links for a message without.
	leaves, links []evidence.Hash
	removed       []evidence.RemovedLink
}

func decodeStored(m *natsjs.RawStreamMsg) (*stored, error) {
	b, err := decodeBatch(m.Data)
	if err != nil {
		return nil, fmt.Errorf("message %d on %s: %w", m.Sequence, m.Subject, err)
	}
	leaves, links, removed := parseChain(m.Header)
	return &stored{seq: m.Sequence, subject: m.Subject, batch: b, leaves: leaves, links: links, removed: removed}, nil
}

// head summarises the message as the newest of its stream.
func (m *stored) head() head {
	return head{exists: true, seq: m.seq, first: m.batch.revision, last: m.batch.revision + uint64(len(m.batch.events)) - 1}
}

// result is what the append that wrote m returned.
func (m *stored) result() domain.AppendResult {
	n := len(m.batch.events)
	return domain.AppendResult{NextRevision: m.head().last, Position: position(m.seq, n-1, n)}
}

// recorded returns m's events as the port hands them out.
func (m *stored) recorded() []domain.RecordedEvent {
	n := len(m.batch.events)
	out := make([]domain.RecordedEvent, n)
	for i, e := range m.batch.events {
		out[i] = domain.RecordedEvent{EventData: e, Stream: m.batch.stream, Revision: m.batch.revision + uint64(i), Position: position(m.seq, i, n)}
	}
	return out
}

// head reads the newest message of a subject; an empty stream has the zero
// head and no message. A deleted stream's newest (and only) message is its
// tombstone: every read, append and delete of it stops here with
// domain.ErrStreamDeleted.
func (s *Store) head(ctx context.Context, subj string) (head, *stored, error) {
	raw, err := s.get(ctx, func(try context.Context) (*natsjs.RawStreamMsg, error) {
		return s.stream.GetLastMsgForSubject(try, subj)
	})
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return head{}, nil, nil
	}
	if err != nil {
		return head{}, nil, fmt.Errorf("read the stream's head: %w", translate(ctx, err))
	}
	m, err := decodeStored(raw)
	if err != nil {
		return head{}, nil, err
	}
	if m.isTombstone() {
		return head{}, nil, domain.ErrStreamDeleted
	}
	return m.head(), m, nil
}

// get runs one message read, tried again if its request is lost.
func (s *Store) get(ctx context.Context, read func(try context.Context) (*natsjs.RawStreamMsg, error)) (*natsjs.RawStreamMsg, error) {
	var raw *natsjs.RawStreamMsg
	err := s.retry(ctx, func(try context.Context) (err error) {
		raw, err = read(try)
		return err
	})
	return raw, err
}

// message reads the message with sequence seq.
func (s *Store) message(ctx context.Context, seq uint64) (*stored, error) {
	raw, err := s.get(ctx, func(try context.Context) (*natsjs.RawStreamMsg, error) { return s.stream.GetMsg(try, seq) })
	if err != nil {
		return nil, translate(ctx, err)
	}
	return decodeStored(raw)
}

// nextOn reads the first message on subj with a sequence of at least seq,
// nil when there is none.
func (s *Store) nextOn(ctx context.Context, subj string, seq uint64) (*stored, error) {
	raw, err := s.get(ctx, func(try context.Context) (*natsjs.RawStreamMsg, error) {
		return s.stream.GetMsg(try, seq, natsjs.WithGetMsgSubject(subj))
	})
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, translate(ctx, err)
	}
	return decodeStored(raw)
}

// scan calls fn with the messages of subj in order, from the one that holds
// revision from up to the head h, until fn returns false. The head is often
// the only message needed and costs no read; older ones are read one
// request each, from the one seek finds.
func (s *Store) scan(ctx context.Context, subj string, from uint64, h head, last *stored, fn func(*stored) bool) error {
	if !h.exists || from > h.last {
		return nil
	}
	if h.first <= from {
		fn(last)
		return nil
	}
	seq, err := s.seek(ctx, subj, from, h)
	if err != nil {
		return err
	}
	for seq <= h.seq {
		m, err := s.nextOn(ctx, subj, seq)
		if err != nil {
			return err
		}
		if m == nil || m.seq > h.seq {
			return nil
		}
		if m.head().last >= from && !fn(m) {
			return nil
		}
		seq = m.seq + 1
	}
	return nil
}

// seek returns a sequence from which the first message of subj is the one
// that holds revision from (h.first > from: an older message than the
// head). No index maps a revision to its sequence, but a subject's
// revisions rise with its messages' sequences, so it searches the
// sequences by halves: about one request per bit of the log's last
// sequence, where reading forward from the start would cost one request
// per message of the stream before from, however long its history.
func (s *Store) seek(ctx context.Context, subj string, from uint64, h head) (uint64, error) {
	if from == 0 {
		return 1, nil
	}
	// The sequence sought is in [lo, hi]: the first message at or after hi
	// ends at or after from (the head does), those before lo lead to
	// messages that end before it.
	lo, hi := uint64(1), h.seq
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := s.nextOn(ctx, subj, mid)
		if err != nil {
			return 0, err
		}
		if m == nil || m.head().last >= from {
			hi = mid
		} else {
			lo = m.seq + 1 // every sequence up to m's leads to m
		}
	}
	return lo, nil
}

// messageAt returns the message of subj whose first event has revision rev,
// nil when no message starts there; h and last are the subject's head.
func (s *Store) messageAt(ctx context.Context, subj string, rev uint64, h head, last *stored) (*stored, error) {
	var found *stored
	err := s.scan(ctx, subj, rev, h, last, func(m *stored) bool {
		if m.batch.revision == rev {
			found = m
		}
		return false
	})
	return found, err
}

// ReadStream returns up to max events of stream from revision from on.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	if err := s.checkRead(max); err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	out, err := s.readStream(ctx, stream, from, max)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	return out, nil
}

func (s *Store) readStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	subj := s.subjectOf(stream)
	h, last, err := s.head(ctx, subj)
	if err != nil {
		return nil, err
	}
	if !h.exists {
		return nil, domain.ErrStreamNotFound
	}
	var out []domain.RecordedEvent
	err = s.scan(ctx, subj, from, h, last, func(m *stored) bool {
		for _, e := range m.recorded() {
			if e.Revision >= from && len(out) < max {
				out = append(out, e)
			}
		}
		return len(out) < max
	})
	return out, err
}

// ReadAll returns up to max events after position after, in position
// order, reading the log's messages one request each from the one whose
// slot holds after. The messages of deleted streams are gone: a sequence
// that holds none is skipped with one request for the next message there
// is.
func (s *Store) ReadAll(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error) {
	if err := s.checkRead(max); err != nil {
		return nil, fmt.Errorf("read all after %d: %w", after, err)
	}
	out, err := s.readAll(ctx, after, max)
	if err != nil {
		return nil, fmt.Errorf("read all after %d: %w", after, err)
	}
	return out, nil
}

func (s *Store) readAll(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error) {
	var out []domain.RecordedEvent
	err := s.eachMessage(ctx, after, func(m *stored) bool {
		for _, e := range m.recorded() {
			if e.Position > after && len(out) < max {
				out = append(out, e)
			}
		}
		return len(out) < max
	})
	return out, err
}

func (s *Store) checkRead(max int) error {
	if max <= 0 {
		return &domain.InvalidInputError{Field: "max", Reason: fmt.Sprintf("%d is not positive", max)}
	}
	return s.checkOpen()
}

// LastEvent returns the newest event of stream, in one read: what a proof
// needs of the checkpoints' stream. A stream with no events returns
// domain.ErrStreamNotFound, a deleted one domain.ErrStreamDeleted.
func (s *Store) LastEvent(ctx context.Context, stream string) (domain.RecordedEvent, error) {
	if err := s.checkOpen(); err != nil {
		return domain.RecordedEvent{}, err
	}
	h, last, err := s.head(ctx, s.subjectOf(stream))
	if err != nil {
		return domain.RecordedEvent{}, fmt.Errorf("read the last event of %s: %w", stream, err)
	}
	if !h.exists {
		return domain.RecordedEvent{}, fmt.Errorf("read the last event of %s: %w", stream, domain.ErrStreamNotFound)
	}
	events := last.recorded()
	return events[len(events)-1], nil
}
