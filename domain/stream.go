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
	StreamTokenUse  StreamKind = "tokenuse" // the uses of an account's tokens, named by the account's id
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
func TokenUseStream(accountID string) string       { return streamName(StreamTokenUse, accountID) }
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
	case StreamInspector, StreamAccount, StreamEndpoint, StreamDelivery, StreamAgent, StreamRefusals, StreamLog, StreamDevice, StreamInvite, StreamLogin, StreamTokenUse:
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

// tailWindow is how many events LoadStreamTail reads at a time, going back
// from a stream's end: more than the snapshots' spacing (SnapshotAfter,
// AccountSnapshotAfter), so that one read usually holds the newest.
const tailWindow = 2 * SnapshotAfter

// LoadStreamTail reads stream from its newest event of type snapshotType
// (or from its start when it holds none) and decodes only that event and
// what follows it: it reads the stream's last event, then windows of
// tailWindow events going back until one holds a snapshot. An aggregate
// that appends a snapshot every so many events is so read in about that
// many, whatever its stream's length. A stream with no events returns an
// error matching ErrStreamNotFound.
func LoadStreamTail(ctx context.Context, store EventStore, codec *Codec, stream, snapshotType string) (recs []RecordedEvent, events []Event, err error) {
	last, err := store.LastEvent(ctx, stream)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", stream, err)
	}
	// The windows read, newest first, the oldest cut at its snapshot.
	var windows [][]RecordedEvent
	found := last.Type == snapshotType
	if found {
		windows = append(windows, []RecordedEvent{last})
	}
	for end := last.Revision + 1; !found && end > 0; {
		from := end - min(end, tailWindow)
		w, err := readRange(ctx, store, stream, from, end)
		if err != nil {
			return nil, nil, err
		}
		for i := len(w) - 1; i >= 0 && !found; i-- {
			if found = w[i].Type == snapshotType; found {
				w = w[i:]
			}
		}
		windows = append(windows, w)
		end = from
	}
	for i := len(windows) - 1; i >= 0; i-- {
		for _, r := range windows[i] {
			e, err := codec.Decode(r.Type, r.Data)
			if err != nil {
				return nil, nil, fmt.Errorf("load %s revision %d: %w", stream, r.Revision, err)
			}
			recs, events = append(recs, r), append(events, e)
		}
	}
	return recs, events, nil
}

// readRange reads the events of stream at revisions [from, end).
func readRange(ctx context.Context, store EventStore, stream string, from, end uint64) ([]RecordedEvent, error) {
	out := make([]RecordedEvent, 0, end-from)
	for next := from; next < end; {
		batch, err := store.ReadStream(ctx, stream, next, int(end-next))
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", stream, err)
		}
		if len(batch) == 0 {
			return nil, fmt.Errorf("load %s: no event at revision %d, before its last event at %d", stream, next, end-1)
		}
		out = append(out, batch...)
		next = batch[len(batch)-1].Revision + 1
	}
	return out, nil
}
