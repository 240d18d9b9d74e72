// Package logexport writes the event log as JSON lines, in order: every
// event with its metadata and, for a log that keeps the hash chain, its
// leaf and link and a line for each event retention removed (so that the
// export verifies offline, package evidence). relay events export and the
// relay's GET /log/export write the same lines.
package logexport

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
)

// Line is one line of an export.
type Line struct {
	Position      uint64          `json:"position"`
	ID            string          `json:"id"`
	Stream        string          `json:"stream"`
	Revision      uint64          `json:"revision"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schema_version"`
	OccurredAt    time.Time       `json:"occurred_at"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	CausationID   string          `json:"causation_id,omitempty"`
	Data          json.RawMessage `json:"data,omitempty"`
	// The chain (embedded log only): the metadata as stored, the event's
	// leaf and link; Removed marks the link of an event a stream deletion
	// removed (the line has nothing else).
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Removed  bool            `json:"removed,omitempty"`
	Leaf     string          `json:"leaf,omitempty"`
	Link     string          `json:"link,omitempty"`
	// A log with a chain per stream (JetStream): Chain is "stream" on every
	// line, Append the position of the first event of the append the event
	// is part of, and Leaf and Link are the stream's chain.
	Chain  string `json:"chain,omitempty"`
	Append uint64 `json:"append,omitempty"`
}

// UnreadableError names where reading the log failed.
type UnreadableError struct {
	after uint64 // the last event read
	err   error
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("the log cannot be read past position %d: the first bad event follows it (position %d in the embedded log): %v",
		e.after, e.after+1, e.err)
}

func (e *UnreadableError) Unwrap() error { return e.err }

func Each(ctx context.Context, s domain.EventStore, fn func(domain.RecordedEvent) error) error {
	var after uint64
	for {
		batch, err := s.ReadAll(ctx, after, 1000)
		if err != nil {
			// Read one event at a time up to the failure, so the error
			// names the first bad event rather than a batch.
			for {
				one, err := s.ReadAll(ctx, after, 1)
				if err != nil {
					return &UnreadableError{after: after, err: err}
				}
				if len(one) == 0 {
					break
				}
				if err := fn(one[0]); err != nil {
					return err
				}
				after = one[0].Position
			}
			return &UnreadableError{after: after, err: err}
		}
		for _, e := range batch {
			if err := fn(e); err != nil {
				return err
			}
		}
		if len(batch) == 0 {
			return nil
		}
		after = batch[len(batch)-1].Position
	}
}

func WriteEvents(ctx context.Context, s domain.EventStore, w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	err := Each(ctx, s, func(e domain.RecordedEvent) error {
		return enc.Encode(Line{
			Position: e.Position, ID: e.ID, Stream: e.Stream, Revision: e.Revision, Type: e.Type,
			SchemaVersion: e.Metadata.SchemaVersion, OccurredAt: e.Metadata.OccurredAt,
			CorrelationID: e.Metadata.CorrelationID, CausationID: e.Metadata.CausationID, Data: e.Data,
		})
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// Chained is a log that keeps the chain (the embedded one).
type Chained interface {
	ReadChain(ctx context.Context, after uint64, limit int) ([]evidence.ChainLink, error)
	ReadStored(ctx context.Context, after uint64, limit int) ([]evidence.Event, error)
}

// WriteChained writes the embedded log with its chain: every event as
// stored (its metadata too) with its leaf and link, and for each event a
// stream deletion removed, a line with its link only ("removed": true), so
// that the export verifies offline.
func WriteChained(ctx context.Context, l Chained, w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // data and metadata are written as stored
	var (
		links  []evidence.ChainLink
		events []evidence.Event
		after  uint64
	)
	for {
		var err error
		if links, err = l.ReadChain(ctx, after, 1000); err != nil {
			return err
		}
		if len(links) == 0 {
			break
		}
		last := links[len(links)-1].Position
		// The events of the same span of positions: every stored event has
		// a link (the writer makes both in one transaction).
		events = events[:0]
		for from := after; ; {
			page, err := l.ReadStored(ctx, from, 1000)
			if err != nil {
				return err
			}
			for _, e := range page {
				if e.Position <= last {
					events = append(events, e)
				}
			}
			if len(page) < 1000 || page[len(page)-1].Position >= last {
				break
			}
			from = page[len(page)-1].Position
		}
		i := 0
		for _, link := range links {
			line := Line{Position: link.Position, Stream: link.Stream, Leaf: link.Leaf.String(), Link: link.Link.String()}
			if i < len(events) && events[i].Position == link.Position {
				e := events[i]
				i++
				var md domain.Metadata
				_ = json.Unmarshal(e.Metadata, &md)
				line.ID, line.Revision, line.Type = e.ID, e.Revision, e.Type
				line.SchemaVersion, line.OccurredAt, line.CorrelationID, line.CausationID = md.SchemaVersion, md.OccurredAt, md.CorrelationID, md.CausationID
				line.Data, line.Metadata = e.Data, e.Metadata
			} else {
				line.Removed = true
			}
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
		after = last
	}
	return bw.Flush()
}

// StreamChained is a log that keeps a chain per stream (JetStream).
type StreamChained interface {
	Messages(ctx context.Context, after uint64, limit int) ([]evidence.Message, error)
}

// WriteStreamChained writes a log with a chain per stream: every event as
// stored with its leaf and link and the append it is part of, and before a
// stream deletion's tombstone a line for each message it removed (its last
// position and the stream's link after it, "removed": true).
func WriteStreamChained(ctx context.Context, l StreamChained, w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // data and metadata are written as stored
	for after := uint64(0); ; {
		ms, err := l.Messages(ctx, after, 1000)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			return bw.Flush()
		}
		for _, m := range ms {
			for _, r := range m.Removed {
				if err := enc.Encode(Line{Position: r.Position, Stream: m.Stream, Removed: true, Link: r.Link.String(), Chain: "stream"}); err != nil {
					return err
				}
			}
			for i, e := range m.Events {
				var md domain.Metadata
				_ = json.Unmarshal(e.Metadata, &md)
				line := Line{Position: e.Position, ID: e.ID, Stream: e.Stream, Revision: e.Revision, Type: e.Type,
					SchemaVersion: md.SchemaVersion, OccurredAt: md.OccurredAt, CorrelationID: md.CorrelationID, CausationID: md.CausationID,
					Data: e.Data, Metadata: e.Metadata, Chain: "stream", Append: m.Events[0].Position}
				if i < len(m.Leaves) && i < len(m.Links) {
					line.Leaf, line.Link = m.Leaves[i].String(), m.Links[i].String()
				}
				if err := enc.Encode(line); err != nil {
					return err
				}
			}
			after = max(after, m.Events[len(m.Events)-1].Position)
		}
	}
}

// Write exports s: with its chain when it keeps one.
func Write(ctx context.Context, s domain.EventStore, w io.Writer) error {
	if l, ok := s.(Chained); ok {
		return WriteChained(ctx, l, w)
	}
	if l, ok := s.(StreamChained); ok {
		return WriteStreamChained(ctx, l, w)
	}
	return WriteEvents(ctx, s, w)
}
