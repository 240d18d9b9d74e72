package projections

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/domain"
)

// maxInlineGap is how many events the inline projection reads back from
// the log to catch up inside a batch; views further behind are left to Run.
const maxInlineGap = 1024

// inlineCheckpointEvery is how often the views' WAL is checkpointed while
// the log's writer writes the views (its connection never checkpoints).
const inlineCheckpointEvery = 500 * time.Millisecond

// Inline applies the views inside the embedded log's own transactions
// (eventstore/sqlite.Inline): the log's writer attaches views.db to its
// connection and gives each batch of appends to the read models before it
// commits, so a delivery costs one commit instead of two (the log's, then
// the views'), and WaitFor returns at once.
//
// The two files do not commit atomically (SQLite's ATTACH in WAL mode is
// atomic per file only), and need not: the log's file commits first (the
// main database is committed before attached ones), and the views'
// checkpoint is in the views' own file with their rows. A crash between the
// two leaves the views behind the log, which Run catches up as always.
//
// Run keeps following the log: the events it receives were applied inline
// already and are skipped, unless a batch was not taken here (Run or
// Rebuild held the views, or a batch deleted a stream); the next batch then
// reads what the views missed from the log and applies it first.
type Inline struct {
	v       *Runner
	min     int       // see Inline's minEvents
	stmts   stmtCache // prepared on the log's writer connection
	commits atomic.Uint64
}

// Inline returns the runner's inline projection, to hand to the embedded
// log's SetInline once. Call it after Open, before Run.
//
// A batch of fewer than minEvents events is left to Run: each commit rewrites every page it touches, in
// the views' WAL too, so applying one delivery per commit (an idle relay,
// one sender) costs more than Run's lingering batches, and lengthens the
// writer's critical section on the sender's path; the next larger batch
// catches up whatever Run has not applied yet.
func (v *Runner) Inline(minEvents int) *Inline {
	v.inline = &Inline{v: v, min: minEvents}
	return v.inline
}

// Attach attaches the views file to the log's writer connection as schema
// "views" and prepares the writers' statements there. The views' tables
// share no name with the log's, so the statements' unqualified names
// resolve to them.
func (in *Inline) Attach(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `ATTACH DATABASE ? AS views`, in.v.path); err != nil {
		return fmt.Errorf("attach views %s: %w", in.v.path, err)
	}
	// Like the views' own connection (see dsn): they can be rebuilt.
	if _, err := db.ExecContext(ctx, `PRAGMA views.synchronous = NORMAL`); err != nil {
		return fmt.Errorf("attach views: %w", err)
	}
	if err := in.stmts.prepare(ctx, db, allWriteQueries()); err != nil {
		return fmt.Errorf("attach views: %w", err)
	}
	go in.checkpoint()
	return nil
}

// Apply applies a batch of the log's events (those after position after)
// to the views inside the log's transaction tx, when the views are at the
// log's head or a little behind it (read returns what they missed) and no
// one else is writing them; otherwise it returns nil, nil and leaves the
// batch to Run. done is to be called once tx has committed or failed.
func (in *Inline) Apply(ctx context.Context, tx *sql.Tx, after uint64, events []domain.RecordedEvent,
	read func(after uint64, max int) ([]domain.RecordedEvent, error)) (done func(committed bool), err error) {
	v := in.v
	if !v.writeMu.TryLock() {
		return nil, nil
	}
	select {
	case <-v.closed:
		v.writeMu.Unlock()
		return nil, nil
	default:
	}
	pos := v.Position()
	if len(events) < in.min {
		v.writeMu.Unlock() // a small batch: Run's lingering batches cost less
		return nil, nil
	}
	if pos > after {
		v.writeMu.Unlock() // views ahead of the log: Reconcile's business
		return nil, nil
	}
	if pos < after {
		missed, err := read(pos, maxInlineGap)
		if err != nil {
			v.writeMu.Unlock()
			return nil, fmt.Errorf("read the log after %d: %w", pos, err)
		}
		if len(missed) == 0 || missed[len(missed)-1].Position != after {
			v.writeMu.Unlock() // too far behind: Run catches up
			return nil, nil
		}
		events = append(missed, events...)
	}
	todo, last := above(events, pos)
	if len(todo) == 0 {
		v.writeMu.Unlock()
		return nil, nil
	}
	writers, err := v.applyIn(ctx, tx, &in.stmts, todo)
	if err != nil {
		v.writeMu.Unlock()
		return nil, err
	}
	return func(ok bool) {
		if ok {
			v.committed(writers, last)
			in.commits.Add(1)
		}
		v.writeMu.Unlock()
	}, nil
}

// checkpoint copies the views' WAL into their file now and then while the
// log's writer writes them: that connection never checkpoints
// (wal_autocheckpoint=0), and the views' own commits, which would, are
// rare. A PASSIVE checkpoint blocks no writer or reader.
func (in *Inline) checkpoint() {
	t := time.NewTicker(inlineCheckpointEvery)
	defer t.Stop()
	done := in.commits.Load()
	for {
		select {
		case <-in.v.closed:
			return
		case <-t.C:
		}
		if n := in.commits.Load(); n != done {
			done = n
			_, err := in.v.w.Exec("PRAGMA wal_checkpoint(PASSIVE)")
			select {
			case <-in.v.closed: // closed meanwhile: nothing to report
				return
			default:
			}
			if err != nil {
				in.v.log.Warn("views wal checkpoint failed", "error", err)
			}
		}
	}
}
