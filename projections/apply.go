package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// batch is the state of one applied batch: its transaction, the event being
// applied and the deliveries it touched (for watchers, published after
// commit so nobody hears about a change that may still roll back).
type batch struct {
	ctx     context.Context
	tx      *sql.Tx
	stmts   *stmtCache
	txStmts map[string]*sql.Stmt // stmts bound to tx, bound once per batch
	event   domain.RecordedEvent

	// known holds the deliveries this batch has created or changed, by ID:
	// what watchers hear once it commits, and what lets later events of the
	// same delivery skip the lookup and defer their update of the
	// deliveries row to flush (see updateDelivery); pending lists the
	// deferred ones in the order they were first deferred.
	known   map[string]*knownDelivery
	pending []*knownDelivery

	// activity holds the latest delivery time of each address the batch
	// received deliveries for, stored once by flush (see noteActivity).
	activity      map[addressKey]int64
	activityOrder []addressKey

	// owners caches the account owning each stream the batch saw ("" for
	// none), see indexStream.
	owners map[string]string

	// For the address cache once the batch commits: the addresses whose
	// row changed other than by activity, and the activity times stored.
	addressesChanged []string
	activityStored   map[string]int64

	// stored holds the change of each inspector's stored bytes, made once
	// per inspector by flush, and told to the address cache.
	stored      map[string]int64
	storedDone  map[string]int64 // the part of stored already written
	storedOrder []string
}

// knownDelivery is a delivery row the batch created or changed, with the
// update that flush still owes it when dirty.
type knownDelivery struct {
	dpos        int64            // its position (rowid)
	address     string           // its address
	change      readmodel.Change // what watchers are told
	dirty       bool             // an update is deferred
	pos         int64            // position of the latest event that changed it
	answered    any              // latest DeliveryAnswered status of the batch, or nil
	answeredPos any              // its position, or nil
	// outcomes is false only for a delivery this batch created and gave no
	// attempt outcome: flush then knows no attempt decides its status.
	outcomes bool
	response *logRef // latest ForwardResponded of the batch, or nil
	dropped  bool    // its stream was deleted later in the batch: nothing to update
}

// logRef locates an event in the log as the deliveries row stores it:
// stream is nil for the delivery's own stream, else the stream's name.
type logRef struct {
	stream   any
	revision int64
}

// addressKey names an inspector or an Endpoint.
type addressKey struct {
	kind domain.AddressKind
	id   string
}

func (b *batch) stmt(query string) (*sql.Stmt, error) {
	if s, ok := b.txStmts[query]; ok {
		return s, nil
	}
	s, err := b.stmts.get(b.ctx, b.tx, query)
	if err != nil {
		return nil, err
	}
	b.txStmts[query] = s
	return s, nil
}

func (b *batch) exec(query string, args ...any) (int64, error) {
	s, err := b.stmt(query)
	if err != nil {
		return 0, err
	}
	res, err := s.ExecContext(b.ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (b *batch) queryRow(query string, args ...any) (*sql.Row, error) {
	s, err := b.stmt(query)
	if err != nil {
		return nil, err
	}
	return s.QueryRowContext(b.ctx, args...), nil
}

// touched records that the current event changed k, the delivery deliveryID.
func (b *batch) touched(k *knownDelivery, deliveryID string, isNew bool) {
	k.change.DeliveryID = deliveryID
	k.change.Position = b.event.Position
	k.change.New = k.change.New || isNew
}

// at is the current event's occurred-at time as stored (Unix nanoseconds).
func (b *batch) at() int64 { return b.event.Metadata.OccurredAt.UnixNano() }

// pos is the current event's position as stored.
func (b *batch) pos() int64 { return int64(b.event.Position) }

// applyBatch applies the events above the checkpoint and moves the
// checkpoint in the same transaction, then wakes WaitFor and watchers.
// The caller holds writeMu.
func (v *Runner) applyBatch(ctx context.Context, events []domain.RecordedEvent) error {
	from := v.Position()
	last, lastID := from, ""
	var todo []domain.RecordedEvent
	for _, e := range events {
		if e.Position <= last {
			continue // at or below the checkpoint: already applied
		}
		todo = append(todo, e)
		last, lastID = e.Position, e.ID
	}
	if len(todo) == 0 {
		return nil
	}
	tx, err := v.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin batch after %d: %w", from, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	// Statements run without ctx's cancellation: the driver would arm a
	// watcher goroutine per statement. The transaction still rolls back when
	// ctx ends (database/sql watches it once per transaction), and ctx is
	// checked between events.
	b := &batch{ctx: context.WithoutCancel(ctx), tx: tx, stmts: &v.stmts, txStmts: map[string]*sql.Stmt{},
		known: map[string]*knownDelivery{}, activity: map[addressKey]int64{}, owners: map[string]string{}}
	for _, e := range todo {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("apply batch after %d: %w", from, err)
		}
		b.event = e
		if err := v.applyEvent(b); err != nil {
			return fmt.Errorf("apply %s at position %d: %w", e.Type, e.Position, err)
		}
		if err := b.indexStream(); err != nil {
			return fmt.Errorf("index %s at position %d: %w", e.Stream, e.Position, err)
		}
	}
	if err := b.flush(); err != nil {
		return fmt.Errorf("apply batch after %d: %w", from, err)
	}
	if _, err := b.exec(qCheckpoint, int64(last), lastID); err != nil {
		return fmt.Errorf("store checkpoint %d: %w", last, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit batch %d..%d: %w", todo[0].Position, last, err)
	}
	v.Addresses.cache.committed(b.addressesChanged, b.activityStored, b.stored)
	v.setPosition(last)
	v.History.hub.publish(groupChanges(b.known))
	return nil
}

// indexStream adds the current event to account_events when an account
// owns its stream: events of every type, decodable or not, as the log holds
// them. The owner is taken from the views (the handlers ran first, so a
// DeliveryReceived or EndpointCreated already created its row) once per
// stream and batch.
func (b *batch) indexStream() error {
	stream := b.event.Stream
	owner, ok := b.owners[stream]
	if !ok {
		var err error
		if owner, err = b.streamOwner(stream); err != nil {
			return err
		}
		b.owners[stream] = owner
	}
	if owner == "" {
		return nil
	}
	_, err := b.exec(qAccountEvent, owner, b.pos(), stream, int64(b.event.Revision))
	return err
}

// streamOwner is the account owning a stream, "" for none (inspectors,
// their deliveries, unknown streams).
func (b *batch) streamOwner(stream string) (string, error) {
	kind, id, _ := domain.ParseStream(stream)
	var query string
	switch kind {
	case domain.StreamAccount:
		return id, nil
	case domain.StreamEndpoint, domain.StreamAgent, domain.StreamRefusals: // agent and refusals streams are named by an Endpoint's (address's) id
		query = qEndpointOwner
	case domain.StreamDelivery:
		query = qDeliveryOwner
	default:
		return "", nil
	}
	row, err := b.queryRow(query, id)
	if err != nil {
		return "", err
	}
	var owner string
	if err := row.Scan(&owner); errors.Is(err, sql.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("owner of %s: %w", stream, err)
	}
	return owner, nil
}

// groupChanges sorts a batch's changes by address, each in position order.
func groupChanges(known map[string]*knownDelivery) map[string][]readmodel.Change {
	out := map[string][]readmodel.Change{}
	for _, k := range known {
		out[k.address] = append(out[k.address], k.change)
	}
	for _, cs := range out {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Position < cs[j].Position })
	}
	return out
}

// decode returns the payload of an event: the lean rows of the events that
// carry headers and bodies (see lean.go), the codec's payload otherwise.
func (v *Runner) decode(e domain.RecordedEvent) (any, error) {
	switch e.Type {
	case domain.TypeDeliveryReceived:
		return decodeReceived(e.Data)
	case domain.TypeForwardResponded:
		return decodeResponded(e.Data)
	}
	return v.codec.Decode(e.Type, e.Data)
}

// applyEvent decodes the current event and updates the views it concerns.
// Unknown types are skipped so an older relay can read a newer log.
func (v *Runner) applyEvent(b *batch) error {
	e := b.event
	payload, err := v.decode(e)
	if errors.Is(err, domain.ErrUnknownEventType) {
		v.log.DebugContext(b.ctx, "projections skip unknown event type", "type", e.Type, "position", e.Position)
		return nil
	}
	if err != nil {
		// A payload that does not decode cannot be applied now or on any
		// rebuild; skipping it keeps the views deterministic and running.
		v.log.ErrorContext(b.ctx, "projections skip undecodable event", "type", e.Type, "position", e.Position, "error", err)
		return nil
	}
	var n int64 // rows changed; 0 means the event names something unknown
	switch p := payload.(type) {
	case domain.InspectorCreated:
		b.addressesChanged = append(b.addressesChanged, p.InspectorID)
		n, err = b.inspectorCreated(p)
	case domain.InspectorExpired:
		b.addressesChanged = append(b.addressesChanged, p.InspectorID)
		n, err = b.exec(qInspectorExpired, p.InspectorID)
	case domain.InspectorPurged:
		b.addressesChanged = append(b.addressesChanged, p.InspectorID)
		n, err = b.inspectorPurged(p)
	case domain.AddressRateLimited:
		n, err = b.rateLimited(p)
	case domain.StreamDeleted:
		n, err = b.streamDeleted(p)
	case domain.AccountCreated:
		n, err = b.exec(qAccountCreated, p.AccountID, p.Name, b.at(), b.pos())
	case domain.TokenIssued:
		n, err = b.exec(qTokenIssued, p.TokenHash, p.TokenID, p.AccountID, b.at())
	case domain.TokenRevoked:
		n, err = b.exec(qTokenRevoked, p.AccountID, p.TokenID)
	case domain.EndpointCreated:
		b.addressesChanged = append(b.addressesChanged, p.EndpointID)
		n, err = b.endpointCreated(p)
	case domain.EndpointReconfigured:
		b.addressesChanged = append(b.addressesChanged, p.EndpointID)
		n, err = b.exec(qEndpointReconfigured, p.Name, string(p.Mode), p.Target, p.ResponseCapture, b.pos(), p.EndpointID)
	case domain.EndpointDeleted:
		b.addressesChanged = append(b.addressesChanged, p.EndpointID)
		n, err = b.exec(qEndpointDeleted, b.pos(), p.EndpointID)
	case domain.AgentConnected:
		n, err = b.agentConnected(p)
	case domain.AgentDisconnected:
		n, err = b.exec(qAgentDisconnected, b.at(), p.Reason, p.AgentID, p.EndpointID)
	case receivedRow:
		n, err = b.deliveryReceived(p)
	case domain.DeliveryAnswered:
		n, err = b.deliveryAnswered(p)
	case domain.ForwardRequested:
		n, err = b.forwardRequested(p)
	case respondedRow:
		n, err = b.forwardResponded(p)
	case domain.ForwardFailed:
		n, err = b.forwardFailed(p)
	default:
		// RetryRequested and future events that change no view: the
		// ForwardRequested that follows a retry carries the attempt.
		return nil
	}
	if err != nil {
		return err
	}
	if n == 0 {
		v.log.DebugContext(b.ctx, "projections event changed nothing", "type", e.Type, "stream", e.Stream, "position", e.Position)
	}
	return nil
}
