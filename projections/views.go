package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/sqlitedsn"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrClosed is returned by WaitFor once the views are closed.
var ErrClosed = errors.New("projections closed")

// rebuildBatch is how many events Rebuild reads and applies per transaction.
const rebuildBatch = 1000

// defaultWatchBacklog bounds a watcher's queue, see Watch.
const defaultWatchBacklog = 10000

// Options configures Open.
type Options struct {
	Logger *slog.Logger  // nil discards logs
	Codec  *domain.Codec // nil uses domain.NewCodec()
	// WatchBacklog is how many undelivered changes a watcher may have queued
	// before it is dropped (its channel closed); 0 means 10000.
	WatchBacklog int
	// Linger is how long Run waits after applying a batch before it takes
	// the next one; 0 means DefaultLinger, a negative value no wait. See
	// DefaultLinger.
	Linger time.Duration
}

// DefaultLinger lets events gather for a moment between two batches under
// continuous load, like a group commit: one transaction then applies more of
// them (less cost per event), and the request handlers woken by the log's
// commit get the cores before the views do. An idle relay is not slowed:
// the first event after a pause is applied at once. Views lag the log by
// this much more under load, which no reader notices, and WaitFor (what
// read-your-writes callers use) cuts the wait short.
const DefaultLinger = 2 * time.Millisecond

// Views holds the read models in their own SQLite file. Run is its only
// writer; every read method is safe for concurrent use.
type Views struct {
	store   domain.EventStore
	codec   *domain.Codec
	log     *slog.Logger
	backlog int

	w  *sql.DB   // the writer: one connection, used only under writeMu
	r  *sql.DB   // readers: a small pool that never writes
	rs readStmts // hot reads, prepared on r

	writeMu sync.Mutex // serialises Run's batches and Rebuild
	stmts   stmtCache  // writer statements, used only under writeMu

	mu       sync.Mutex
	pos      uint64        // checkpoint: last applied position
	advanced chan struct{} // closed and replaced whenever pos changes

	closed    chan struct{}
	closeOnce sync.Once

	hub hub

	addresses addressCache // rows read by Address, see addrcache.go

	linger time.Duration // see DefaultLinger
	hurry  chan struct{} // a WaitFor is waiting: stop lingering
}

// Open opens (or creates) the views file at path and reads its checkpoint.
// It does not subscribe: call Run for that.
func Open(ctx context.Context, path string, store domain.EventStore, opts Options) (*Views, error) {
	if store == nil {
		return nil, errors.New("open projections: nil event store")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Codec == nil {
		opts.Codec = domain.NewCodec()
	}
	if opts.WatchBacklog <= 0 {
		opts.WatchBacklog = defaultWatchBacklog
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open projections %s: %w", path, err)
	}
	w, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("open projections %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	linger := opts.Linger
	if linger == 0 {
		linger = DefaultLinger
	}
	v := &Views{
		store: store, codec: opts.Codec, log: opts.Logger, backlog: opts.WatchBacklog,
		w: w, advanced: make(chan struct{}), closed: make(chan struct{}),
		linger: linger, hurry: make(chan struct{}, 1),
	}
	v.hub.init()
	if err := v.openWriter(ctx, path); err != nil {
		_ = w.Close()
		return nil, err
	}
	// Opened after the writer so the file exists and is already in WAL mode.
	r, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		v.stmts.close()
		_ = w.Close()
		return nil, fmt.Errorf("open projections readers %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	v.r = r
	if err := v.rs.prepare(ctx, r); err != nil {
		v.stmts.close()
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("open projections readers %s: %w", path, err)
	}
	return v, nil
}

// dsn: synchronous=NORMAL is enough: the views can always be rebuilt from
// the log, and the checkpoint commits with the rows it describes, so a lost
// tail after a power cut is simply applied again.
func dsn(path string, readOnly bool) string {
	return sqlitedsn.Build(path, readOnly, sqlitedsn.Normal)
}

func (v *Views) openWriter(ctx context.Context, path string) error {
	reset, err := migrate(ctx, v.w)
	if err != nil {
		return fmt.Errorf("open projections %s: %w", path, err)
	}
	if reset {
		v.log.InfoContext(ctx, "projections schema changed, views will be rebuilt from the log", "path", path)
		// The dropped views may have held copies of every body: give their
		// pages back to the file system rather than keep them as free pages.
		if _, err := v.w.ExecContext(ctx, "VACUUM"); err != nil {
			return fmt.Errorf("open projections %s: vacuum after schema change: %w", path, err)
		}
	}
	var pos int64
	if err := v.w.QueryRowContext(ctx, "SELECT position FROM checkpoint WHERE id = 1").Scan(&pos); err != nil {
		return fmt.Errorf("open projections %s: read checkpoint: %w", path, err)
	}
	v.pos = uint64(pos)
	if err := v.stmts.prepare(ctx, v.w, writeQueries); err != nil {
		return fmt.Errorf("open projections %s: %w", path, err)
	}
	return nil
}

// Close releases the database handles, closes every Watch channel and wakes
// WaitFor callers with ErrClosed. Stop Run (cancel its context and wait for
// it) before closing; a Run still going fails on its next batch.
func (v *Views) Close() error {
	var err error
	v.closeOnce.Do(func() {
		close(v.closed)
		v.hub.closeAll()
		v.writeMu.Lock()
		defer v.writeMu.Unlock()
		v.stmts.close()
		err = errors.Join(v.rs.close(), v.r.Close(), v.w.Close())
	})
	if err != nil {
		return fmt.Errorf("close projections: %w", err)
	}
	return nil
}

// Position is the checkpoint: the last log position the views reflect.
func (v *Views) Position() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.pos
}

func (v *Views) setPosition(pos uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if pos == v.pos {
		return
	}
	v.pos = pos
	close(v.advanced) // broadcast to every WaitFor
	v.advanced = make(chan struct{})
}

// WaitFor returns once the views reflect position (read-your-writes: pass
// the AppendResult.Position of a command). It returns ctx's error when ctx
// ends first and ErrClosed when the views are closed.
func (v *Views) WaitFor(ctx context.Context, position uint64) error {
	for {
		v.mu.Lock()
		pos, advanced := v.pos, v.advanced
		v.mu.Unlock()
		if pos >= position {
			return nil
		}
		select {
		case v.hurry <- struct{}{}:
		default: // Run is already told
		}
		select {
		case <-advanced:
		case <-ctx.Done():
			return ctx.Err()
		case <-v.closed:
			return ErrClosed
		}
	}
}

// Run subscribes to the log after the checkpoint and applies every batch it
// receives, until ctx ends (then it returns nil) or an error stops it. Only
// one Run may be active at a time.
func (v *Views) Run(ctx context.Context) error {
	from := v.Position()
	sub, err := v.store.SubscribeAll(ctx, from)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("projections: subscribe after %d: %w", from, err)
	}
	defer sub.Close()
	v.log.DebugContext(ctx, "projections subscribed", "position", from)
	var pause *time.Timer
	if v.linger > 0 {
		pause = time.NewTimer(v.linger)
		defer pause.Stop()
	}
	for {
		if pause != nil {
			// Linger before the next batch (see DefaultLinger).
			pause.Reset(v.linger)
			select {
			case <-pause.C:
			case <-v.hurry:
			case <-ctx.Done():
				return nil
			}
		}
		events, err := sub.Recv(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("projections: receive: %w", err)
		}
		v.writeMu.Lock()
		err = v.applyBatch(ctx, events)
		v.writeMu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("projections: %w", err)
		}
	}
}

// Rebuild drops every view and the checkpoint and applies the whole log again
// from position 0, up to its end at the time of the call (a running Run
// picks up from there). Readers see the views fill up again meanwhile.
func (v *Views) Rebuild(ctx context.Context) error {
	v.writeMu.Lock()
	defer v.writeMu.Unlock()
	if err := v.reset(ctx); err != nil {
		return fmt.Errorf("rebuild projections: %w", err)
	}
	v.log.InfoContext(ctx, "projections rebuilding from position 0")
	for {
		events, err := v.store.ReadAll(ctx, v.Position(), rebuildBatch)
		if err != nil {
			return fmt.Errorf("rebuild projections: read after %d: %w", v.Position(), err)
		}
		if len(events) == 0 {
			break
		}
		if err := v.applyBatch(ctx, events); err != nil {
			return fmt.Errorf("rebuild projections: %w", err)
		}
	}
	v.log.InfoContext(ctx, "projections rebuilt", "position", v.Position())
	return nil
}

// reset empties every view and sets the checkpoint to 0 in one transaction.
func (v *Views) reset(ctx context.Context) error {
	tx, err := v.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin reset: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if err := dropViews(ctx, tx); err != nil {
		return err
	}
	if err := createViews(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit reset: %w", err)
	}
	v.addresses.clear()
	v.setPosition(0)
	return nil
}
