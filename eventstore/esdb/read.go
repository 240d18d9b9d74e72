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
	rs, err := s.client.ReadStream(ctx, stream, esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(from)}, uint64(max))
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, translate(ctx, err))
	}
	defer rs.Close()
	var out []domain.RecordedEvent
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read stream %s: %w", stream, translate(ctx, err))
		}
		rec, err := toRecorded(ev.OriginalEvent())
		if err != nil {
			return nil, fmt.Errorf("read stream %s: %w", stream, err)
		}
		out = append(out, rec)
	}
}

// ReadAll returns up to max of the port's events after position after, in
// $all order. A page never ends inside a group of events sharing a commit
// position unless that group alone fills it: a caller resuming after the
// page's last position would otherwise skip the group's rest.
func (s *Store) ReadAll(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error) {
	if err := s.checkRead(max); err != nil {
		return nil, fmt.Errorf("read all after %d: %w", after, err)
	}
	// One more than asked, to see whether the last one's group goes on.
	out, err := s.readAll(ctx, after, max+1)
	if err != nil {
		return nil, fmt.Errorf("read all after %d: %w", after, err)
	}
	return trimPage(out, max), nil
}

// trimPage cuts a page read with one extra event down to max events without
// splitting a commit-position group, unless the group fills the whole page.
func trimPage(evs []domain.RecordedEvent, max int) []domain.RecordedEvent {
	if len(evs) <= max {
		return evs
	}
	cut := max
	for cut > 0 && evs[cut-1].Position == evs[max].Position {
		cut--
	}
	if cut == 0 {
		cut = max
	}
	return evs[:cut]
}

// readAll collects up to n non-system events after position after, paging
// through $all because system events may fill whole pages. Each page starts
// at the previous page's last record, which reads include, so it is skipped.
func (s *Store) readAll(ctx context.Context, after uint64, n int) ([]domain.RecordedEvent, error) {
	var out []domain.RecordedEvent
	from := allPosition(after)
	var prev *esdb.Position
	for {
		rs, err := s.client.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Forwards, From: from}, uint64(n))
		if err != nil {
			return nil, translate(ctx, err)
		}
		read, lastSeen, err := collect(rs, after, prev, n, &out)
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
func collect(rs *esdb.ReadStream, after uint64, prev *esdb.Position, n int, out *[]domain.RecordedEvent) (int, esdb.Position, error) {
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
		if (prev != nil && rec.Position == *prev) || rec.Position.Commit <= after || isSystem(rec) {
			continue
		}
		e, err := toRecorded(rec)
		if err != nil {
			return read, lastSeen, err
		}
		*out = append(*out, e)
	}
	return read, lastSeen, nil
}

func (s *Store) checkRead(max int) error {
	if max <= 0 {
		return &domain.InvalidInputError{Field: "max", Reason: fmt.Sprintf("%d is not positive", max)}
	}
	return s.checkOpen()
}
