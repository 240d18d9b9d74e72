package record

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/keyedlock"
)

// writeTimeout bounds an append made after its caller's context ended (a
// sender who hung up, a session's end, a forward cut short by shutdown):
// once decided, the event must still land.
const writeTimeout = 10 * time.Second

// Config holds the Recorder's dependencies; only Store is required.
type Config struct {
	Store  domain.EventStore
	Codec  *domain.Codec    // default domain.NewCodec()
	Now    func() time.Time // clock of recorded events; default time.Now
	NewID  func() string    // event and attempt IDs; default NewEventID
	Logger *slog.Logger     // default discards
	// Node names the relay node recording, in the agent sessions it
	// starts (domain.AgentConnected.Node); empty for a single process.
	Node string
	// Usage, when set, is told of every delivery's receipt once it is
	// durable, so the storage quotas count it before the views apply it.
	Usage Usage
	// WhyNotStored tells why an account may store no more: its storage
	// quota is used up (domain.NotCapturedStorageQuota), so is the
	// relay's storage for sign-ups it is in (its network's share,
	// domain.NotCapturedSignupStorage), the relay's disk is below its
	// reserve (domain.NotCapturedDiskReserve); "" when it may. The answer to a retry, a queued attempt or a copy of an account
	// that may not is recorded without its body, saying why
	// (ForwardResponded.NotCaptured). Nil: every account may.
	WhyNotStored func(ctx context.Context, accountID string) string
}

// Usage learns of deliveries recorded: the address and account a receipt
// belongs to, the bytes its event stores in the log, and its position
// there (0 when the store cannot tell).
type Usage interface {
	Recorded(address, accountID string, bytes int64, position uint64)
}

// Recorder appends the events the aggregates decide. It is safe for
// concurrent use.
type Recorder struct {
	store domain.EventStore
	// queuer is store when it queues appends (domain.AppendQueuer), else
	// nil: the one answer to whether appends are queued, and receipts held.
	queuer domain.AppendQueuer
	codec  *domain.Codec
	now    func() time.Time
	newID  func() string
	log    *slog.Logger
	node   string
	usage  Usage
	// whyNotStored is Config.WhyNotStored (withinQuota).
	whyNotStored func(ctx context.Context, accountID string) string
	// listeners keeps each Endpoint's agent sessions folded (ReconcilePrimary).
	listeners foldedStates[listenerState]
	// deliveries keeps each delivery's state folded for its next attempt
	// (loadDelivery).
	deliveries foldedStates[deliveryState]
	// held are the receipts waiting for their first attempt's answer, by
	// attempt (ReceiptHold).
	heldMu sync.Mutex
	held   map[string]*heldReceipt
	// turns orders the appends to one delivery's stream on this node that
	// would otherwise refuse one another (Turn).
	turns keyedlock.Locks
}

// Turn waits for deliveryID's turn among this node's writers of its stream
// that take turns (a retry's request, a copy, an outcome that met other
// writers) and returns its end: together they refused one another's
// appends at the stream's next revision past their tries (64 retries at
// once to 9 listeners left 17 to 44 refused and 16 to 20 outcomes
// unrecorded). A delivery's first outcome takes no turn; another node's
// writers are not ordered by it. A writer whose ctx ends while it waits
// gets ctx's error and holds no turn: a retry whose client has gone does
// not wait out the writers before it.
func (r *Recorder) Turn(ctx context.Context, deliveryID string) (end func(), err error) {
	return r.turns.Lock(ctx, deliveryID)
}

// TurnsHeld is how many deliveries have a writer in turn or waiting for one.
func (r *Recorder) TurnsHeld() int { return r.turns.Held() }

// New wires a Recorder.
func New(cfg Config) *Recorder {
	r := &Recorder{store: cfg.Store, codec: cfg.Codec, now: cfg.Now, newID: cfg.NewID, log: cfg.Logger, node: cfg.Node, usage: cfg.Usage, whyNotStored: cfg.WhyNotStored,
		listeners: foldedStates[listenerState]{max: maxListenerStates}, deliveries: foldedStates[deliveryState]{max: maxDeliveryStates}}
	r.queuer, _ = cfg.Store.(domain.AppendQueuer)
	if r.codec == nil {
		r.codec = domain.NewCodec()
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.newID == nil {
		r.newID = NewEventID
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// Now is the Recorder's clock, for decisions that compare with the times
// it records.
func (r *Recorder) Now() time.Time { return r.now() }

// Codec is the one codec of the log, for readers that decode it.
func (r *Recorder) Codec() *domain.Codec { return r.codec }

// NewID returns a new event or attempt ID from the Recorder's one source.
func (r *Recorder) NewID() string { return r.newID() }

// Record encodes events (the first causes the others; all carry tr) and
// appends them to stream in one durable append.
func (r *Recorder) Record(ctx context.Context, stream string, expected domain.ExpectedRevision, tr domain.Trace, events ...domain.Event) (domain.AppendResult, error) {
	res, _, err := r.appendIDs(ctx, nil, stream, expected, tr, events)
	return res, err
}

// appendIDs is Record that reuses ids (kept across conflict retries so a
// repeated append stays idempotent) and returns the IDs it used.
func (r *Recorder) appendIDs(ctx context.Context, ids []string, stream string, expected domain.ExpectedRevision, tr domain.Trace, events []domain.Event) (domain.AppendResult, []string, error) {
	if len(events) == 0 {
		return domain.AppendResult{}, ids, nil
	}
	data, ids, err := r.codec.EncodeAll(ids, r.newID, r.stamp(events), r.now(), tr)
	if err != nil {
		return domain.AppendResult{}, ids, fmt.Errorf("append to %s: %w", stream, err)
	}
	res, err := r.store.Append(ctx, stream, expected, data...)
	if err != nil {
		return res, ids, fmt.Errorf("append to %s: %w", stream, err)
	}
	return res, ids, nil
}

// Queued is an append in flight: Wait returns its outcome (any number of
// times); LastID is the ID of its last event.
type Queued struct {
	LastID string
	Wait   func() error
}

// queue starts an append like Record and returns without waiting for it
// when the store can queue appends (domain.AppendQueuer): the append is
// then in the store's commit order. With any other store it is durable on
// return. The append does not end with ctx (see writeTimeout). rc is the
// receipt the append records, if it does (see recorded).
func (r *Recorder) queue(ctx context.Context, stream string, expected domain.ExpectedRevision, tr domain.Trace, events []domain.Event, rc *Receipt) (Queued, error) {
	data, err := r.encode(stream, tr, events)
	if err != nil {
		return Queued{}, err
	}
	lastID := data[len(data)-1].ID
	if r.queuer == nil {
		if err := r.appendData(ctx, stream, expected, data, rc); err != nil {
			return Queued{}, err
		}
		return Queued{LastID: lastID, Wait: func() error { return nil }}, nil
	}
	wait, err := r.queueData(ctx, stream, expected, data, rc)
	if err != nil {
		return Queued{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	// Waited for once: a second Wait returns the same outcome, and Usage
	// hears of the receipt once.
	return Queued{LastID: lastID, Wait: sync.OnceValue(func() error {
		_, err := wait()
		return err
	})}, nil
}

// queueData queues an append of encoded events to a store that can
// (domain.AppendQueuer) and returns the wait for it, which tells Usage of
// rc once it is durable. Wait for it once.
func (r *Recorder) queueData(ctx context.Context, stream string, expected domain.ExpectedRevision, data []domain.EventData, rc *Receipt) (func() (domain.AppendResult, error), error) {
	ctx, cancel := detached(ctx)
	queued, err := r.queuer.QueueAppend(ctx, stream, expected, data...)
	if err != nil {
		cancel()
		return nil, err
	}
	return func() (domain.AppendResult, error) {
		defer cancel()
		res, err := queued()
		if err != nil {
			return res, fmt.Errorf("append to %s: %w", stream, err)
		}
		r.recorded(rc, data, res)
		return res, nil
	}, nil
}

// appendNow is queue followed at once by Wait, without the Queued that
// lets a caller wait later (a closure and a sync.OnceValue per append): the
// append is durable, or has failed, on return.
func (r *Recorder) appendNow(ctx context.Context, stream string, expected domain.ExpectedRevision, tr domain.Trace, events []domain.Event, rc *Receipt) error {
	data, err := r.encode(stream, tr, events)
	if err != nil {
		return err
	}
	return r.appendData(ctx, stream, expected, data, rc)
}

// encode stamps and encodes an append's events.
func (r *Recorder) encode(stream string, tr domain.Trace, events []domain.Event) ([]domain.EventData, error) {
	data, _, err := r.codec.EncodeAll(nil, r.newID, r.stamp(events), r.now(), tr)
	if err != nil {
		return nil, fmt.Errorf("append to %s: %w", stream, err)
	}
	return data, nil
}

// appendData appends encoded events and waits until they are durable,
// bounded by writeTimeout rather than ctx, and tells Usage of rc.
func (r *Recorder) appendData(ctx context.Context, stream string, expected domain.ExpectedRevision, data []domain.EventData, rc *Receipt) error {
	ctx, cancel := detached(ctx)
	defer cancel()
	res, err := r.store.Append(ctx, stream, expected, data...)
	if err != nil {
		return fmt.Errorf("append to %s: %w", stream, err)
	}
	r.recorded(rc, data, res)
	return nil
}

// recorded tells Usage of a durable receipt: the first event of its append
// (the bytes the views count), at the append's last position, which is the
// receipt's own when, as on every path today, it was appended alone.
func (r *Recorder) recorded(rc *Receipt, data []domain.EventData, res domain.AppendResult) {
	if r.usage != nil && rc != nil && len(data) > 0 {
		r.usage.Recorded(rc.Address, rc.AccountID, int64(len(data[0].Data)), res.Position)
	}
}

// stamp names this node in the events that belong to one: an agent session
// it holds, an attempt whose sender waits on it.
func (r *Recorder) stamp(events []domain.Event) []domain.Event {
	if r.node == "" {
		return events
	}
	for i, e := range events {
		switch e := e.(type) {
		case domain.AgentConnected:
			e.Node = r.node
			events[i] = e
		case domain.ForwardRequested:
			e.Node = r.node
			events[i] = e
		case domain.DeliveryReceived:
			if e.Forward != nil {
				f := *e.Forward // a copy: the caller's event is not changed
				f.Node = r.node
				e.Forward = &f
				events[i] = e
			}
		}
	}
	return events
}

// Delete deletes a stream, leaving a tombstone.
func (r *Recorder) Delete(ctx context.Context, stream string, expected domain.ExpectedRevision) (domain.DeleteResult, error) {
	res, err := r.store.DeleteStream(ctx, stream, expected)
	if err != nil {
		return res, fmt.Errorf("delete %s: %w", stream, err)
	}
	return res, nil
}

// detached bounds a write that must outlive its caller's context.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
}

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewAddressID returns a random 16-character id that is a valid hostname label.
// 80 random bits make addresses unguessable, which is what keeps a guest
// inspector private.
func NewAddressID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return lowerBase32.EncodeToString(b)
}

// NewEventID returns a time-ordered UUID (version 7) for an event, an
// attempt or a delivery. Time order keeps the log's unique index on event
// IDs appending at its right edge instead of rewriting random pages on
// every commit.
func NewEventID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
