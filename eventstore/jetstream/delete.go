package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
	"github.com/relayhq/relay/evidence"
)

// ErrDeletesDenied reports a DeleteStream on a log whose JetStream stream
// does not allow roll-ups: one created by an earlier relay with deny_purge,
// which JetStream never lets an update lift (see Open).
var ErrDeletesDenied = errors.New("the log's JetStream stream denies purges or roll-ups, so streams cannot be deleted")

// DeleteStream replaces every message of stream with a tombstone, if
// expected matches, in one publish: the tombstone (a domain.StreamDeleted
// event at revision 0) goes onto the stream's own subject with
// Nats-Rollup: sub, and the server stores it and purges the subject's
// earlier messages as one step, on every replica. No request can fail
// between the two and leave deleted events readable.
//
// The publish carries Nats-Expected-Last-Subject-Sequence like an append,
// so an append that lands between the head read and the tombstone makes
// the server refuse the tombstone: Any reads the head again and counts that
// append in, Exact reports the conflict. An append after the tombstone
// finds it as the subject's head and fails with domain.ErrStreamDeleted
// (see head), and so do reads and a second delete. The tombstone takes a
// new message sequence, so its position is above every deleted event's.
func (s *Store) DeleteStream(ctx context.Context, stream string, expected domain.ExpectedRevision) (domain.DeleteResult, error) {
	if err := s.checkOpen(); err != nil {
		return domain.DeleteResult{}, fmt.Errorf("delete stream %s: %w", stream, err)
	}
	if stream == "" {
		return domain.DeleteResult{}, fmt.Errorf("delete stream: %w", &domain.InvalidInputError{Field: "stream", Reason: "must not be empty"})
	}
	if !s.canDelete {
		return domain.DeleteResult{}, fmt.Errorf("delete stream %s: %w", stream, ErrDeletesDenied)
	}
	res, err := s.deleteStream(ctx, stream, expected)
	var wrong *domain.WrongExpectedRevisionError
	if err != nil && !errors.As(err, &wrong) {
		return domain.DeleteResult{}, fmt.Errorf("delete stream %s: %w", stream, err)
	}
	return res, err
}

func (s *Store) deleteStream(ctx context.Context, stream string, expected domain.ExpectedRevision) (domain.DeleteResult, error) {
	subj := s.subjectOf(stream)
	for range maxConflictRetries {
		h, last, err := s.head(ctx, subj) // domain.ErrStreamDeleted once a tombstone is there
		if err != nil {
			return domain.DeleteResult{}, err
		}
		seq, ok := expectedSubjectSeq(expected, h)
		if !ok {
			return domain.DeleteResult{}, &domain.WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: h.last, Exists: h.exists}
		}
		tomb := domain.StreamDeleted{Stream: stream, LastRevision: -1}
		if h.exists {
			tomb.Events, tomb.LastRevision, tomb.LastPosition = int64(h.last)+1, int64(h.last), last.result().Position
		}
		e, err := envelope.Tombstone(tomb, time.Now())
		if err != nil {
			return domain.DeleteResult{}, err
		}
		// The tombstone chains to the stream's head and records the
		// links of what it removes (chain.go).
		removed, err := s.removedLinks(ctx, subj, h, last)
		if err != nil {
			return domain.DeleteResult{}, err
		}
		msg, err := chainMessage(subj, batch{stream: stream, revision: 0, events: []domain.EventData{e}}, last.headLink())
		if err != nil {
			return domain.DeleteResult{}, err
		}
		if len(removed) > 0 {
			msg.Header.Set(headerRemoved, evidence.FormatRemoved(removed))
		}
		msg.Header.Set(natsjs.MsgRollup, natsjs.MsgRollupSubject)
		var ack *natsjs.PubAck
		err = s.retry(ctx, func(try context.Context) (err error) {
			// A repeat of a try that was stored after all finds the
			// subject moved on, and the loop then finds the tombstone.
			ack, err = s.js.PublishMsg(try, msg, natsjs.WithExpectStream(s.name), natsjs.WithExpectLastSequencePerSubject(seq))
			return err
		})
		if errors.Is(translate(ctx, err), domain.ErrWrongExpectedRevision) {
			continue // the stream moved on: read its head again
		}
		if err != nil {
			return domain.DeleteResult{}, translate(ctx, err)
		}
		return domain.DeleteResult{Position: position(ack.Sequence, 0, 1)}, nil
	}
	return domain.DeleteResult{}, fmt.Errorf("%w: stream %s kept moving over %d tries", domain.ErrWrongExpectedRevision, stream, maxConflictRetries)
}

// isTombstone reports whether m is a DeleteStream's tombstone. Appends
// cannot write one: envelope.Validate refuses types starting with "$".
func (m *stored) isTombstone() bool {
	return len(m.batch.events) == 1 && m.batch.events[0].Type == domain.TypeStreamDeleted
}
