package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
)

// applyBatch applies the events above the checkpoint to every read model's
// writer and moves the checkpoint, all in one transaction, then tells the
// models' readers and wakes WaitFor. The caller holds writeMu.
func (v *Runner) applyBatch(ctx context.Context, events []domain.RecordedEvent) error {
	from := v.Position()
	todo, last := above(events, from)
	if len(todo) == 0 {
		return nil
	}
	tx, err := v.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin batch after %d: %w", from, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	writers, err := v.applyIn(ctx, tx, &v.stmts, todo)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit batch %d..%d: %w", todo[0].Position, last, err)
	}
	v.committed(writers, last)
	return nil
}

// above returns the events after the checkpoint from, and the last one's
// position.
func above(events []domain.RecordedEvent, from uint64) ([]domain.RecordedEvent, uint64) {
	last := from
	var todo []domain.RecordedEvent
	for _, e := range events {
		if e.Position <= last {
			continue // at or below the checkpoint: already applied
		}
		todo = append(todo, e)
		last = e.Position
	}
	return todo, last
}

// committed tells the models' readers of a committed batch, then moves the
// position: readers hear of the batch before WaitFor does, so one that
// waited for this position finds no cached address older than it. The
// quotas' ledger of receipts not yet applied lets go of the batch's only
// once the caches count them (see unapplied.applied).
func (v *Runner) committed(writers []modelWriter, last uint64) {
	for _, w := range writers {
		w.committed()
	}
	v.unapplied.applied(last)
	v.setPosition(last)
}

// applyIn applies todo (events above the checkpoint, in order) to every
// read model's writer inside tx, with statements from stmts, and stores
// the checkpoint there. The caller commits and then calls committed.
func (v *Runner) applyIn(ctx context.Context, tx *sql.Tx, stmts *stmtCache, todo []domain.RecordedEvent) ([]modelWriter, error) {
	from := todo[0].Position
	// Statements run without ctx's cancellation: the driver would arm a
	// watcher goroutine per statement. The transaction still rolls back when
	// ctx ends (database/sql watches it once per transaction), and ctx is
	// checked between events.
	t := &txn{ctx: context.WithoutCancel(ctx), tx: tx, stmts: stmts, txStmts: map[string]*sql.Stmt{}}
	// The history runs first: the others follow what it tells of deliveries
	// (txn.moved). The accounts run last: they index each event under the
	// account owning its stream, which the others' rows name.
	history := v.History.writer()
	writers := []modelWriter{history, &queueWriter{watch: &v.queue}, v.Addresses.writer(), v.Accounts.writer()}
	if err := history.prepare(t, todo); err != nil {
		return nil, fmt.Errorf("apply batch from %d: %w", from, err)
	}
	for _, e := range todo {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("apply batch from %d: %w", from, err)
		}
		t.event, t.moved, t.owned = e, nil, nil
		if err := v.applyEvent(t, writers); err != nil {
			return nil, fmt.Errorf("apply %s at position %d: %w", e.Type, e.Position, err)
		}
	}
	for _, w := range writers {
		if err := w.flush(t); err != nil {
			return nil, fmt.Errorf("apply batch from %d: %w", from, err)
		}
	}
	lastEv := todo[len(todo)-1]
	if _, err := t.exec(qCheckpoint, int64(lastEv.Position), lastEv.ID); err != nil {
		return nil, fmt.Errorf("store checkpoint %d: %w", lastEv.Position, err)
	}
	return writers, nil
}

// applyEvent decodes the current event and gives it to every writer. An
// event of an unknown type (an older relay reading a newer log) or one that
// does not decode is given as nil: no model applies it, and it is still
// indexed under its stream's account.
func (v *Runner) applyEvent(t *txn, writers []modelWriter) error {
	e := t.event
	payload, err := v.decode(e)
	if errors.Is(err, domain.ErrUnknownEventType) {
		v.log.DebugContext(t.ctx, "projections skip unknown event type", "type", e.Type, "position", e.Position)
		payload = nil
	} else if err != nil {
		// A payload that does not decode cannot be applied now or on any
		// rebuild; skipping it keeps the views deterministic and running.
		v.log.ErrorContext(t.ctx, "projections skip undecodable event", "type", e.Type, "position", e.Position, "error", err)
		payload = nil
	}
	var (
		changed int64
		handled bool
	)
	for _, w := range writers {
		n, ok, err := w.apply(t, payload)
		if err != nil {
			return err
		}
		changed += n
		handled = handled || ok
	}
	if handled && changed == 0 {
		v.log.DebugContext(t.ctx, "projections event changed nothing", "type", e.Type, "stream", e.Stream, "position", e.Position)
	}
	return nil
}

// decode returns the payload of an event: the lean rows of the events that
// carry headers and bodies (see lean.go), the codec's payload otherwise.
func (v *Runner) decode(e domain.RecordedEvent) (any, error) {
	// An event the writer in this process has just committed comes with
	// the payload it was encoded from (domain.EventData.Payload): the two
	// delivery events take their rows from it instead of decoding.
	switch e.Type {
	case domain.TypeDeliveryReceived:
		if p, ok := e.Payload.(domain.DeliveryReceived); ok {
			return receivedRowOf(p), nil
		}
		return decodeReceived(e.Data)
	case domain.TypeForwardResponded:
		if p, ok := e.Payload.(domain.ForwardResponded); ok {
			return respondedRowOf(p), nil
		}
		return decodeResponded(e.Data)
	}
	return v.codec.Decode(e.Type, e.Data)
}
