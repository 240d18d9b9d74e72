package esdb

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
)

// toProposed encodes events for the client. Data that is valid JSON is
// marked as JSON so the server's projections and UI can read it; anything
// else is binary. The bytes are sent unchanged either way.
func toProposed(events []domain.EventData) ([]esdb.EventData, error) {
	out := make([]esdb.EventData, len(events))
	for i, e := range events {
		id, err := uuid.Parse(e.ID)
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", e.ID, err)
		}
		md, err := envelope.EncodeMetadata(e.Metadata)
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", e.ID, err)
		}
		contentType := esdb.ContentTypeBinary
		if len(e.Data) > 0 && json.Valid(e.Data) {
			contentType = esdb.ContentTypeJson
		}
		out[i] = esdb.EventData{EventID: id, EventType: e.Type, ContentType: contentType, Data: e.Data, Metadata: md}
	}
	return out, nil
}

// unknownPosition is what the client reports as the commit position of an
// event read from a stream rather than from $all, on servers that do not
// know it there.
const unknownPosition = ^uint64(0)

// toRecorded decodes an event read from the server, at port position
// position (see positioner; 0 when the server did not say).
func toRecorded(r *esdb.RecordedEvent, position uint64) (domain.RecordedEvent, error) {
	if r.EventType == serverTombstone {
		return tombstoneOf(r, position)
	}
	md, err := envelope.DecodeMetadata(r.UserMetadata)
	if err != nil {
		return domain.RecordedEvent{}, fmt.Errorf("event %s in %s: %w", r.EventID, r.StreamID, err)
	}
	return domain.RecordedEvent{
		EventData: domain.EventData{ID: r.EventID.String(), Type: r.EventType, Data: r.Data, Metadata: md},
		Stream:    r.StreamID,
		Revision:  r.EventNumber,
		Position:  position,
	}, nil
}

// isSystem reports events the port never wrote: EventStoreDB's own streams
// and event types start with "$", and so do links; and the records the
// adapter's deletions leave of what they removed (chain.go). The one exception is the
// tombstone the server writes into a user stream on DeleteStream, which the
// port hands on as its own tombstone.
func isSystem(r *esdb.RecordedEvent) bool {
	if r == nil || strings.HasPrefix(r.StreamID, "$") || strings.HasPrefix(r.StreamID, removedPrefix) {
		return true
	}
	return strings.HasPrefix(r.EventType, "$") && r.EventType != serverTombstone
}

// serverTombstone is the type of the event EventStoreDB writes at the end
// of a tombstoned stream.
const serverTombstone = "$streamDeleted"

// tombstoneOf turns the server's tombstone into the port's: a
// domain.StreamDeleted naming the stream. The server does not say how many
// events went, so Events and LastRevision are -1 (unknown).
func tombstoneOf(r *esdb.RecordedEvent, position uint64) (domain.RecordedEvent, error) {
	data, err := json.Marshal(domain.StreamDeleted{Stream: r.StreamID, Events: -1, LastRevision: -1})
	if err != nil {
		return domain.RecordedEvent{}, fmt.Errorf("tombstone of %s: %w", r.StreamID, err)
	}
	return domain.RecordedEvent{
		EventData: domain.EventData{ID: r.EventID.String(), Type: domain.TypeStreamDeleted, Data: data,
			Metadata: domain.Metadata{SchemaVersion: 1, OccurredAt: r.CreatedDate.UTC()}},
		Stream:   r.StreamID,
		Revision: r.EventNumber,
		Position: position,
	}, nil
}
