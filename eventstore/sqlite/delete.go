package sqlite

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
)

// DeleteStream removes every event of stream if expected matches, and
// leaves a tombstone (a domain.StreamDeleted event at revision 0 of the
// stream, with a new position) in their place, in one transaction of the
// writer's commit order. A stream deleted before is domain.ErrStreamDeleted;
// a condition that does not match is a *domain.WrongExpectedRevisionError.
func (s *Store) DeleteStream(ctx context.Context, stream string, expected domain.ExpectedRevision) (domain.DeleteResult, error) {
	if stream == "" {
		return domain.DeleteResult{}, fmt.Errorf("delete stream: %w", &domain.InvalidInputError{Field: "stream", Reason: "must not be empty"})
	}
	req := &appendRequest{ctx: ctx, stream: stream, expected: expected, deleteStream: true, reply: make(chan appendReply, 1)}
	if err := s.enqueue(ctx, req); err != nil {
		return domain.DeleteResult{}, fmt.Errorf("delete stream %s: %w", stream, err)
	}
	wait := sync.OnceValues(func() (domain.AppendResult, error) {
		select {
		case rep := <-req.reply:
			return rep.res, rep.err
		case <-ctx.Done():
			return domain.AppendResult{}, fmt.Errorf("delete stream %s: gave up waiting, outcome unknown: %w", stream, ctx.Err())
		}
	})
	res, err := wait()
	if err != nil {
		return domain.DeleteResult{}, err
	}
	return domain.DeleteResult{Position: res.Position}, nil
}

// applyDelete runs a DeleteStream inside the batch's transaction. The
// tombstone is inserted before the stream's rows go, so it takes a position
// above every one of them: positions are the rowid (max+1) and are never
// reused, even when the deleted stream held the newest event. It is
// inserted at the highest revision and moved to revision 0 once the other
// rows are gone, where it keeps NoStream appends refused by the index.
func applyDelete(ctx context.Context, st writeStmts, r *appendRequest) (rep appendReply, wrote bool, fatal error) {
	head, exists, deleted, err := streamHead(ctx, st, r.stream, true)
	if err != nil {
		return appendReply{}, false, fmt.Errorf("delete stream %s: %w", r.stream, err)
	}
	if deleted {
		return appendReply{err: fmt.Errorf("delete stream %s: %w", r.stream, domain.ErrStreamDeleted)}, false, nil
	}
	if !r.expected.Matches(head, exists) {
		return appendReply{err: &domain.WrongExpectedRevisionError{Stream: r.stream, Expected: r.expected, Actual: head, Exists: exists}}, false, nil
	}
	var (
		tomb         domain.StreamDeleted
		lastPosition int64
	)
	if err := st.streamSize.QueryRowContext(ctx, r.stream).Scan(&tomb.Events, &tomb.LastRevision, &lastPosition); err != nil {
		return appendReply{}, false, fmt.Errorf("delete stream %s: count events: %w", r.stream, err)
	}
	tomb.Stream, tomb.LastPosition = r.stream, uint64(lastPosition)
	tr, err := tombstoneRow(tomb, time.Now())
	if err != nil {
		return appendReply{}, false, fmt.Errorf("delete stream %s: %w", r.stream, err)
	}
	pos, err := insertChained(ctx, st, tr, r.stream, math.MaxInt64, 0)
	if err != nil {
		return appendReply{}, false, fmt.Errorf("delete stream %s: tombstone: %w", r.stream, err)
	}
	// The removed events' links stay, so the chain still verifies.
	if _, err := st.keepLinks.ExecContext(ctx, r.stream, int64(pos)); err != nil {
		return appendReply{}, false, fmt.Errorf("delete stream %s: keep links: %w", r.stream, err)
	}
	if _, err := st.deleteRows.ExecContext(ctx, r.stream, int64(pos)); err != nil {
		return appendReply{}, false, fmt.Errorf("delete stream %s: %w", r.stream, err)
	}
	if _, err := st.settle.ExecContext(ctx, int64(pos)); err != nil {
		return appendReply{}, false, fmt.Errorf("delete stream %s: place tombstone: %w", r.stream, err)
	}
	r.rows = []row{tr}
	return appendReply{res: domain.AppendResult{NextRevision: 0, Position: pos}}, true, nil
}

func tombstoneRow(tomb domain.StreamDeleted, now time.Time) (row, error) {
	e, err := envelope.Tombstone(tomb, now)
	if err != nil {
		return row{}, err
	}
	enc, err := envelope.EncodeMetadata(e.Metadata)
	if err != nil {
		return row{}, fmt.Errorf("encode tombstone: %w", err)
	}
	return newRow(e.ID, e.Type, e.Data, enc, e.Metadata, nil), nil
}

// deleted reports whether a committed batch deleted a stream.
func deleted(batch []*appendRequest, replies []appendReply) bool {
	for i, r := range batch {
		if r.deleteStream && replies[i].err == nil && replies[i].wrote {
			return true
		}
	}
	return false
}
