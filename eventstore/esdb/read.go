package esdb

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/relayhq/relay/domain"
)

// ReadStream returns up to max events of stream from revision from on.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	if err := s.checkRead(max); err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	raw, err := s.readStreamRaw(ctx, stream, from, max)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	out := make([]domain.RecordedEvent, len(raw))
	for i, p := range raw {
		if out[i], err = toRecorded(p.rec, p.pos); err != nil {
			return nil, fmt.Errorf("read stream %s: %w", stream, err)
		}
	}
	return out, nil
}

// placed is an event as the server stored it, at its port position.
type placed struct {
	rec *esdb.RecordedEvent
	pos uint64
}

// readStreamRaw reads up to max events of stream from revision from on, as
// stored.
func (s *Store) readStreamRaw(ctx context.Context, stream string, from uint64, max int) ([]placed, error) {
	rs, err := s.client.ReadStream(ctx, stream, esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(from)}, uint64(max))
	if err != nil {
		return nil, translate(ctx, err)
	}
	defer rs.Close()
	var (
		out   []placed
		place positioner
	)
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, translate(ctx, err)
		}
		r := ev.OriginalEvent()
		if len(out) == 0 && from > 0 && r.Position.Commit != unknownPosition {
			// The read may start inside an append: count its events before.
			n, err := s.eventsBefore(ctx, stream, from, r.Position.Commit)
			if err != nil {
				return nil, err
			}
			place.skip(r.Position.Commit, n)
		}
		pos, err := place.place(r.Position.Commit)
		if err != nil {
			return nil, err
		}
		out = append(out, placed{rec: r, pos: pos})
	}
}

// eventsBefore counts the events of stream just before revision rev that
// its append (at commit position commit) wrote, reading backwards.
func (s *Store) eventsBefore(ctx context.Context, stream string, rev, commit uint64) (uint64, error) {
	const page = 64
	var n uint64
	for rev > 0 {
		rs, err := s.client.ReadStream(ctx, stream, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.Revision(rev - 1)}, page)
		if err != nil {
			return 0, translate(ctx, err)
		}
		read, same, err := countSameCommit(rs, commit)
		rs.Close()
		if err != nil {
			return 0, translate(ctx, err)
		}
		n += same
		if same < read || read < page {
			return n, nil
		}
		rev -= read
	}
	return n, nil
}

// countSameCommit reads a backward page and counts its leading events at
// commit position commit.
func countSameCommit(rs *esdb.ReadStream, commit uint64) (read, same uint64, err error) {
	counting := true
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return read, same, nil
		}
		if err != nil {
			return read, same, err
		}
		read++
		if counting && ev.OriginalEvent().Position.Commit == commit {
			same++
		} else {
			counting = false
		}
	}
}

// ReadAll returns up to max of the port's events after position after, in
// $all order.
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

// readAll collects up to n non-system events after position after, paging
// through $all because system events may fill whole pages. It starts at the
// append that holds after, to place its events (see allPosition). Each page
// starts at the previous page's last record, which reads include, so it is
// skipped.
func (s *Store) readAll(ctx context.Context, after uint64, n int) ([]domain.RecordedEvent, error) {
	raw, err := s.readAllRaw(ctx, after, n)
	if err != nil {
		return nil, err
	}
	out := make([]domain.RecordedEvent, len(raw))
	for i, p := range raw {
		if out[i], err = toRecorded(p.rec, p.pos); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readAllRaw is readAll's events as stored.
func (s *Store) readAllRaw(ctx context.Context, after uint64, n int) ([]placed, error) {
	var (
		out   []placed
		place positioner
		prev  *esdb.Position
	)
	from := allPosition(after)
	for {
		rs, err := s.client.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Forwards, From: from}, uint64(n))
		if err != nil {
			return nil, translate(ctx, err)
		}
		read, lastSeen, err := collect(rs, after, prev, &place, n, &out)
		rs.Close()
		if err != nil {
			return nil, translate(ctx, err)
		}
		if len(out) >= n || read < n || (prev != nil && lastSeen == *prev) {
			return out, nil // full, or the end of $all
		}
		prev, from = &lastSeen, lastSeen
	}
}

// collect reads one page into out and reports how many records it read and
// the position of the last one.
func collect(rs *esdb.ReadStream, after uint64, prev *esdb.Position, place *positioner, n int, out *[]placed) (int, esdb.Position, error) {
	read := 0
	var lastSeen esdb.Position
	for len(*out) < n {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return read, lastSeen, err
		}
		read++
		rec := ev.OriginalEvent()
		if rec == nil {
			continue
		}
		lastSeen = rec.Position
		if (prev != nil && rec.Position == *prev) || isSystem(rec) {
			continue
		}
		pos, err := place.place(rec.Position.Commit)
		if err != nil {
			return read, lastSeen, err
		}
		if pos <= after {
			continue // earlier events of the append that holds after
		}
		*out = append(*out, placed{rec: rec, pos: pos})
	}
	return read, lastSeen, nil
}

func (s *Store) checkRead(max int) error {
	if max <= 0 {
		return &domain.InvalidInputError{Field: "max", Reason: fmt.Sprintf("%d is not positive", max)}
	}
	return s.checkOpen()
}
