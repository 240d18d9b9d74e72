package domain

import (
	"context"
	"fmt"
	"time"
)

// EventData is an event ready to append: its payload is already encoded.
// ID makes appends idempotent: appending the same IDs again at the same place
// succeeds without writing anything.
type EventData struct {
	ID       string   // UUID
	Type     string   // versioned type name, e.g. "delivery.received.v1"
	Data     []byte   // JSON payload
	Metadata Metadata // envelope fields
	// Payload is the event Data was encoded from, when Codec.Encode made it
	// in this process; nil for an event read back. No store keeps it: the
	// embedded log hands it, with Data, to subscribers in the same process
	// (its tail of recent commits), so they need not decode what was just
	// encoded. It must not be modified.
	Payload Event
}

// Metadata is the envelope every event carries besides its payload.
type Metadata struct {
	SchemaVersion int       `json:"schema_version"`
	OccurredAt    time.Time `json:"occurred_at"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	CausationID   string    `json:"causation_id,omitempty"`
}

// RecordedEvent is an event as the store holds it.
type RecordedEvent struct {
	EventData
	Stream   string
	Revision uint64 // 0-based position inside its stream
	// Position is global and strictly increasing: no two events share one,
	// not even the events of one append, so a reader that keeps the last
	// position it applied resumes after it without losing or repeating an
	// event. Gaps are allowed; the first event's is at least 1.
	Position uint64
}

// ExpectedRevision is the optimistic-concurrency condition of an append,
// with the semantics of EventStoreDB.
type ExpectedRevision struct {
	kind expectedKind
	rev  uint64
}

type expectedKind uint8

const (
	expectAny expectedKind = iota
	expectNoStream
	expectStreamExists
	expectExact
)

// Any accepts the append whatever the stream holds.
func Any() ExpectedRevision { return ExpectedRevision{kind: expectAny} }

// NoStream accepts the append only if the stream has no event yet.
func NoStream() ExpectedRevision { return ExpectedRevision{kind: expectNoStream} }

// StreamExists accepts the append only if the stream has at least one event.
func StreamExists() ExpectedRevision { return ExpectedRevision{kind: expectStreamExists} }

// Exact accepts the append only if the stream's last event has revision rev.
func Exact(rev uint64) ExpectedRevision { return ExpectedRevision{kind: expectExact, rev: rev} }

// IsAny, IsNoStream, IsStreamExists and ExactRevision let adapters map the
// condition to their own representation in one place.
func (e ExpectedRevision) IsAny() bool          { return e.kind == expectAny }
func (e ExpectedRevision) IsNoStream() bool     { return e.kind == expectNoStream }
func (e ExpectedRevision) IsStreamExists() bool { return e.kind == expectStreamExists }

// ExactRevision returns the revision and true when the condition is Exact.
func (e ExpectedRevision) ExactRevision() (uint64, bool) { return e.rev, e.kind == expectExact }

// Matches reports whether a stream whose last revision is last (exists=false
// for an empty stream) satisfies the condition.
func (e ExpectedRevision) Matches(last uint64, exists bool) bool {
	switch e.kind {
	case expectNoStream:
		return !exists
	case expectStreamExists:
		return exists
	case expectExact:
		return exists && last == e.rev
	default:
		return true
	}
}

func (e ExpectedRevision) String() string {
	switch e.kind {
	case expectNoStream:
		return "no stream"
	case expectStreamExists:
		return "stream exists"
	case expectExact:
		return fmt.Sprintf("revision %d", e.rev)
	default:
		return "any"
	}
}

// AppendResult tells where an append landed.
type AppendResult struct {
	NextRevision uint64 // revision of the last event appended to the stream
	Position     uint64 // global position of the last event appended
}

// DeleteResult tells where a stream's tombstone landed. Position is 0 when
// the adapter cannot tell (EventStoreDB reports none).
type DeleteResult struct {
	Position uint64
}

// EventStore is the port every log adapter implements (embedded SQLite,
// EventStoreDB). It is the single source of truth: components learn about
// events only through SubscribeAll, never from whoever appended them.
type EventStore interface {
	// Append writes events to stream atomically if expected matches, and
	// returns once they are durable. Appending events whose IDs are already
	// in the stream at that place succeeds again without writing (retries
	// are safe); a WrongExpectedRevisionError reports a conflict. The
	// store may keep the events' Data and hand it to subscribers: the
	// caller must not change it once Append (or QueueAppend) is called.
	Append(ctx context.Context, stream string, expected ExpectedRevision, events ...EventData) (AppendResult, error)
	// ReadStream returns up to max events of stream from revision from on.
	// A stream with no events returns ErrStreamNotFound.
	ReadStream(ctx context.Context, stream string, from uint64, max int) ([]RecordedEvent, error)
	// LastEvent returns the newest event of stream in one read, whatever
	// the stream's length: a reader that needs only its end (the newest
	// snapshot of a long stream, a proof's checkpoint) starts there. A
	// stream with no events returns ErrStreamNotFound, a deleted one
	// ErrStreamDeleted.
	LastEvent(ctx context.Context, stream string) (RecordedEvent, error)
	// ReadAll returns up to max events with positions greater than after,
	// in position order.
	ReadAll(ctx context.Context, after uint64, max int) ([]RecordedEvent, error)
	// SubscribeAll delivers every event with a position greater than after:
	// first the stored ones (catch-up), then new ones as they are appended,
	// with no gap and no duplicate at the seam.
	SubscribeAll(ctx context.Context, after uint64) (Subscription, error)
	// LastPosition is the position of the newest event, 0 for an empty log.
	LastPosition(ctx context.Context) (uint64, error)
	// DeleteStream removes every event of stream for good, if expected
	// matches (EventStoreDB's tombstone, a hard delete), and leaves in their
	// place a tombstone: one event of type TypeStreamDeleted, payload
	// StreamDeleted, at the returned position, readable through ReadAll and
	// SubscribeAll. Positions are never reused. Reading or appending to the
	// stream afterwards fails with ErrStreamDeleted, and so does deleting it
	// again. Events of the stream a subscriber received before the
	// deletion stay received; readers that keep views drop them on the
	// tombstone.
	DeleteStream(ctx context.Context, stream string, expected ExpectedRevision) (DeleteResult, error)
	Close() error
}

// AppendQueuer is an optional EventStore capability. QueueAppend takes an
// append into the store's commit order before it returns, and wait blocks
// until that append is durable or refused, with what Append would have
// returned. Any append queued or started after QueueAppend returns is
// checked and committed after this one. Ingress uses it to hand a request to
// its agent while the request's record is being made durable: the sender is
// still answered only once every append of the delivery has returned.
type AppendQueuer interface {
	QueueAppend(ctx context.Context, stream string, expected ExpectedRevision, events ...EventData) (wait func() (AppendResult, error), err error)
	// Accepting reports why an append queued now would be refused at once
	// (the store is closed), nil when it would be taken. A caller that
	// appends a little later (record.ReceiptHold) asks first.
	Accepting() error
}

// SubscriptionBatch is the most events a Subscription's Recv returns, in
// every store: a reader given this many is behind the log (see
// projections.DefaultLinger).
const SubscriptionBatch = 512

// Subscription is a stream of events in position order.
type Subscription interface {
	// Recv blocks until at least one event is available and returns a batch
	// of them in order, or returns ctx's error, or ErrSubscriptionClosed.
	Recv(ctx context.Context) ([]RecordedEvent, error)
	Close() error
}
