package domain

import (
	"context"
	"fmt"
	"strings"
)

// StreamKind is the aggregate, or record, a stream holds: the part of its
// name before the first "-".
type StreamKind string

// The kinds of stream the names below make.
const (
	StreamInspector StreamKind = "inspector"
	StreamAccount   StreamKind = "account"
	StreamEndpoint  StreamKind = "endpoint"
	StreamDelivery  StreamKind = "delivery"
	StreamAgent     StreamKind = "agent"    // named by its Endpoint's id
	StreamRefusals  StreamKind = "refusals" // named by its address's id
	StreamLog       StreamKind = "log"      // the log's own records: its checkpoints
	StreamDevice    StreamKind = "device"   // a device code (RFC 8628)
	StreamInvite    StreamKind = "invite"   // an invite to sign up
	StreamLogin     StreamKind = "login"    // a login's claim, named by its key's hash
)

// Stream names, one per aggregate.
func InspectorStream(id string) string             { return streamName(StreamInspector, id) }
func AccountStream(id string) string               { return streamName(StreamAccount, id) }
func EndpointStream(id string) string              { return streamName(StreamEndpoint, id) }
func DeliveryStream(id string) string              { return streamName(StreamDelivery, id) }
func AgentStream(endpointID string) string         { return streamName(StreamAgent, endpointID) }
func RefusalsStream(addressID string) string       { return streamName(StreamRefusals, addressID) }
func DeviceStream(id string) string                { return streamName(StreamDevice, id) }
func InviteStream(id string) string                { return streamName(StreamInvite, id) }
func LoginStream(keyHash string) string            { return streamName(StreamLogin, keyHash) }
func streamName(kind StreamKind, id string) string { return string(kind) + "-" + id }

// CheckpointStream holds the log's signed checkpoints.
const CheckpointStream = string(StreamLog) + "-checkpoints"

// ParseStream is the inverse of the names above: the kind of a stream and
// the id it was named from. ok is false for a name none of them makes (an
// unknown kind or an empty id).
func ParseStream(name string) (kind StreamKind, id string, ok bool) {
	k, id, found := strings.Cut(name, "-")
	if !found || id == "" {
		return "", "", false
	}
	switch kind = StreamKind(k); kind {
	case StreamInspector, StreamAccount, StreamEndpoint, StreamDelivery, StreamAgent, StreamRefusals, StreamLog, StreamDevice, StreamInvite, StreamLogin:
		return kind, id, true
	}
	return "", "", false
}

// streamPage is how many events one ReadStream call of LoadStream asks for.
const streamPage = 512

// LoadStream reads the whole of stream and decodes its events, in revision
// order: recs[i] holds the envelope of events[i]. A stream with no events
// returns an error matching ErrStreamNotFound.
func LoadStream(ctx context.Context, store EventStore, codec *Codec, stream string) (recs []RecordedEvent, events []Event, err error) {
	return LoadStreamFrom(ctx, store, codec, stream, 0)
}

// LoadStreamFrom is LoadStream from revision from on: what a caller that
// folded the events before it still needs.
func LoadStreamFrom(ctx context.Context, store EventStore, codec *Codec, stream string, from uint64) (recs []RecordedEvent, events []Event, err error) {
	for {
		batch, err := store.ReadStream(ctx, stream, from+uint64(len(recs)), streamPage)
		if err != nil {
			return nil, nil, fmt.Errorf("load %s: %w", stream, err)
		}
		for _, r := range batch {
			e, err := codec.Decode(r.Type, r.Data)
			if err != nil {
				return nil, nil, fmt.Errorf("load %s revision %d: %w", stream, r.Revision, err)
			}
			events = append(events, e)
		}
		recs = append(recs, batch...)
		if len(batch) < streamPage {
			return recs, events, nil
		}
	}
}
