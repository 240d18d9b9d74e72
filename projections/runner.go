package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/sqlitedsn"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrClosed is returned by WaitFor once the views are closed.
var ErrClosed = errors.New("projections closed")

// rebuildBatch is how many events Rebuild reads and applies per transaction.
const rebuildBatch = 1000

// defaultWatchBacklog bounds a watcher's queue, see Watch: twice the most
// changes of one address a batch (rebuildBatch events) can give.
const defaultWatchBacklog = 2 * rebuildBatch

// DefaultWatchBudget bounds the change notes all watchers hold queued, see
// Watch: 262 144 notes of about 32 bytes (8 MiB, at most twice that with
// the queues' spare capacity).
const DefaultWatchBudget = 1 << 18

// Options configures Open.
type Options struct {
	Logger *slog.Logger  // nil discards logs
	Codec  *domain.Codec // nil uses domain.NewCodec()
	// WatchBacklog is how many undelivered changes a watcher may have queued
	// before it is dropped (its channel closed); 0 means 2000.
	WatchBacklog int
	// WatchBudget is how many undelivered changes all watchers together
	// may have queued; past it, a watcher that is behind is dropped (see
	// Watch). 0 means DefaultWatchBudget.
	WatchBudget int
	// Linger is how long Run waits after applying a batch before it takes
	// the next one; 0 means DefaultLinger, a negative value no wait. See
	// DefaultLinger.
	Linger time.Duration
	// SearchLogBytes bounds the bytes of events a filtered page reads from
	// the log to match headers and bodies; 0 means DefaultSearchLogBytes.
	SearchLogBytes int64
	// SearchLogRate bounds the bytes per second all searches together read
	// from the log to match headers and bodies; 0 means
	// DefaultSearchLogRate, a negative value no bound.
	SearchLogRate int64
	// StallAfter, when positive, is how long Run's subscription may
	// deliver nothing while the log holds events past the views before Run
	// subscribes anew (see NATSStallAfter); 0 trusts the subscription.
	StallAfter time.Duration
}

// NATSStallAfter is StallAfter for a log on NATS JetStream. A consumer
// placed on a server that was killed, or on one whose copy of the log
// stopped advancing, can go quiet without an error for as long as the
// cluster takes to notice (the client's heartbeats and resets took 21 s
// after a SIGKILL under load); a new subscription is a new consumer,
// placed anew.
const NATSStallAfter = 5 * time.Second

// DefaultLinger lets events gather for a moment between two batches under
// continuous load, like a group commit: one transaction then applies more of
// them (less cost per event, fewer pages written), and the request handlers
// woken by the log's commit get the cores before the views do. An idle
// relay is not slowed: the first event after a pause is applied at once,
// and views a full batch behind the log (domain.SubscriptionBatch) take the
// next one without lingering. The views lag the log by this much more
// under load, which no reader notices, and WaitFor (what read-your-writes callers
// use) cuts the wait short. The storage quotas do not wait for it: they
// count a receipt from its commit (unapplied.go). A longer linger writes
// less per event, but views lagging more than the log's tail of recent
// commits holds (256 to 512 events) read back from the database what the
// tail had in memory: 30 ms passes that at about 10 000 events a second
// (docs/projections.md).
const DefaultLinger = 10 * time.Millisecond

// Runner keeps the read models (History, Addresses, Accounts) in their own
// SQLite file: it opens and migrates the file, applies each batch of events
// to every read model in one transaction with the checkpoint, and owns
// WaitFor, Health, retries and Rebuild. Run is the only writer. The read
// models are embedded, so a Runner offers every reader method; each is
// safe for concurrent use.
type Runner struct {
	*History
	*Addresses
	*Accounts

	store domain.EventStore
	codec *domain.Codec
	log   *slog.Logger

	w  *sql.DB   // the writer: one connection, used only under writeMu
	r  *readPool // readers: a small pool that never writes (readpool.go)
	sr *sql.DB   // searches' readers, apart from r (see searchConns)
	rs readStmts // hot reads, prepared on r

	writeMu sync.Mutex // serialises Run's batches and Rebuild
	stmts   stmtCache  // writer statements, used only under writeMu

	mu       sync.Mutex
	pos      uint64        // checkpoint: last applied position
	advanced chan struct{} // closed and replaced whenever pos or failure changes
	// The runner's state, see Health.
	failure      error
	failingSince time.Time
	retries      int

	closed    chan struct{}
	closeOnce sync.Once

	linger time.Duration // see DefaultLinger
	// unapplied counts recorded deliveries the views have not applied yet
	// for the storage quotas (unapplied.go).
	unapplied  unapplied
	stallAfter time.Duration // see Options.StallAfter
	hurry      chan struct{} // a WaitFor is waiting: stop lingering

	path string // the views file, absolute

	// queue tells the queue driver when the queue view moved (QueueVersion,
	// QueueChanged).
	queue queueWatch
}

// Open opens (or creates) the views file at path, checks its integrity and
// reads its checkpoint. A damaged file (a bad header, a truncated file, a
// page that fails PRAGMA quick_check) is logged, removed and created anew:
// the views are derived, Run rebuilds them from the log. Open does not
// subscribe: call Run for that.
func Open(ctx context.Context, path string, store domain.EventStore, opts Options) (*Runner, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	v, err := open(ctx, path, store, opts)
	if err == nil {
		if err = v.quickCheck(ctx); err != nil {
			_ = v.Close()
		}
	}
	if err == nil {
		return v, nil
	}
	if !sqlitedsn.Damaged(err) && !errors.Is(err, errDamaged) {
		return nil, err
	}
	opts.Logger.ErrorContext(ctx, "views file damaged: removing it and rebuilding the views from the log", "path", path, "error", err)
	if err := RemoveFiles(path); err != nil {
		return nil, fmt.Errorf("open projections %s: remove damaged file: %w", path, err)
	}
	return open(ctx, path, store, opts)
}

// errDamaged is a views file that opened but failed its integrity check.
var errDamaged = errors.New("views file damaged")

// quickCheck runs PRAGMA quick_check: every page and record is readable
// and well formed (it skips what integrity_check adds: index contents
// against their tables), in time linear in the file's size.
func (v *Runner) quickCheck(ctx context.Context) error {
	rows, err := v.w.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		return fmt.Errorf("check views: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("check views: %w", err)
		}
		if line != "ok" && len(problems) < 3 {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check views: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", errDamaged, strings.Join(problems, "; "))
	}
	return nil
}

// RemoveFiles removes a views file with its WAL and shared-memory files, so
// the next Open starts empty. Only for a file no process has open.
func RemoveFiles(path string) error {
	var errs []error
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func open(ctx context.Context, path string, store domain.EventStore, opts Options) (*Runner, error) {
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
	if opts.WatchBudget <= 0 {
		opts.WatchBudget = DefaultWatchBudget
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
	v := &Runner{
		store: store, codec: opts.Codec, log: opts.Logger,
		w: w, path: abs, advanced: make(chan struct{}), closed: make(chan struct{}),
		linger: linger, hurry: make(chan struct{}, 1), queue: queueWatch{changed: make(chan struct{}, 1)}, stallAfter: opts.StallAfter,
	}
	if opts.SearchLogBytes <= 0 {
		opts.SearchLogBytes = DefaultSearchLogBytes
	}
	pace := rate.NewLimiter(rate.Inf, int(opts.SearchLogBytes))
	switch {
	case opts.SearchLogRate == 0:
		pace.SetLimit(DefaultSearchLogRate)
	case opts.SearchLogRate > 0:
		pace.SetLimit(rate.Limit(opts.SearchLogRate))
	}
	v.History = &History{rs: &v.rs, store: store, codec: opts.Codec, backlog: opts.WatchBacklog,
		searchBytes: opts.SearchLogBytes, searchPace: pace}
	v.History.hub.init(opts.WatchBudget)
	quotas, signups := &quotaCache{}, &networkUsage{}
	v.Addresses = &Addresses{rs: &v.rs, quotas: quotas, signups: signups, unapplied: &v.unapplied}
	v.Accounts = &Accounts{rs: &v.rs, quotas: quotas, signups: signups, unapplied: &v.unapplied}
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
	r.SetMaxOpenConns(readerConns)
	r.SetMaxIdleConns(readerConns)
	v.r = &readPool{db: r}
	v.History.r, v.Addresses.r, v.Accounts.r = v.r, v.r, v.r
	if err := v.rs.prepare(ctx, r); err != nil {
		v.stmts.close()
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("open projections readers %s: %w", path, err)
	}
	sr, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		_ = v.rs.close()
		v.stmts.close()
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("open projections search readers %s: %w", path, err)
	}
	sr.SetMaxOpenConns(searchConns)
	sr.SetMaxIdleConns(searchConns)
	v.sr, v.History.sr = sr, sr
	if err := v.Addresses.guests.load(ctx, v.w, qGuestUsage); err != nil {
		_ = v.Close()
		return nil, fmt.Errorf("open projections %s: guests: %w", path, err)
	}
	if err := v.Accounts.signups.load(ctx, v.w, qSignupUsage); err != nil {
		_ = v.Close()
		return nil, fmt.Errorf("open projections %s: sign-ups: %w", path, err)
	}
	return v, nil
}

// dsn: synchronous=NORMAL is enough: the views can always be rebuilt from
// the log, and the checkpoint commits with the rows it describes, so a lost
// tail after a power cut is simply applied again. The writer keeps its
// temporary files in memory: some of a batch's statements keep a statement
// journal (a copy of each page they change, to undo that statement alone),
// which past 64 KiB SQLite spills to a temporary file, a write system call
// per page.
func dsn(path string, readOnly bool) string {
	if readOnly {
		return sqlitedsn.Build(path, readOnly, sqlitedsn.Normal)
	}
	return sqlitedsn.Build(path, readOnly, sqlitedsn.Normal, "temp_store(MEMORY)")
}

func (v *Runner) openWriter(ctx context.Context, path string) error {
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
	if err := v.stmts.prepare(ctx, v.w, allWriteQueries()); err != nil {
		return fmt.Errorf("open projections %s: %w", path, err)
	}
	return nil
}

// Close releases the database handles, closes every Watch channel and wakes
// WaitFor callers with ErrClosed. Stop Run (cancel its context and wait for
// it) before closing; a Run still going fails on its next batch.
func (v *Runner) Close() error {
	var err error
	v.closeOnce.Do(func() {
		close(v.closed)
		v.History.hub.closeAll()
		v.writeMu.Lock()
		defer v.writeMu.Unlock()
		v.stmts.close()
		err = errors.Join(v.rs.close(), v.r.db.Close(), v.sr.Close(), v.w.Close())
	})
	if err != nil {
		return fmt.Errorf("close projections: %w", err)
	}
	return nil
}

// Position is the checkpoint: the last log position the views reflect.
func (v *Runner) Position() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.pos
}

func (v *Runner) setPosition(pos uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if pos == v.pos {
		return
	}
	v.pos = pos
	v.broadcastLocked()
}

// broadcastLocked wakes every WaitFor and CatchUp; v.mu is held.
func (v *Runner) broadcastLocked() {
	close(v.advanced)
	v.advanced = make(chan struct{})
}

// WaitFor returns once the views reflect position (read-your-writes: pass
// the AppendResult.Position of a command). It returns ctx's error when ctx
// ends first and ErrClosed when the views are closed.
func (v *Runner) WaitFor(ctx context.Context, position uint64) error {
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

// Rebuild drops every view and the checkpoint and applies the whole log again
// from position 0, up to its end at the time of the call (a running Run
// picks up from there). Readers see the views fill up again meanwhile.
func (v *Runner) Rebuild(ctx context.Context) error {
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
func (v *Runner) reset(ctx context.Context) error {
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
	v.Addresses.cache.clear()
	v.Addresses.guests.clear()
	v.Accounts.signups.clear()
	v.Addresses.listeners.clear()
	v.Accounts.quotas.clear()
	v.unapplied.reset()
	v.History.horizon = statsHorizon{}
	v.queue.moved()
	v.setPosition(0)
	return nil
}

// MatchLog checks that the log still holds the event the views applied
// last, at the checkpoint's position and with its ID. A log restored from
// an older backup, replaced or lost does not: the views then show rows the
// log no longer holds and skip its new events as already applied. It
// returns "" when they match, else why not.
func (v *Runner) MatchLog(ctx context.Context) (string, error) {
	var (
		pos int64
		id  string
	)
	if err := v.r.QueryRowContext(ctx, "SELECT position, event_id FROM checkpoint WHERE id = 1").Scan(&pos, &id); err != nil {
		return "", fmt.Errorf("read checkpoint: %w", err)
	}
	if pos == 0 {
		return "", nil
	}
	evs, err := v.store.ReadAll(ctx, uint64(pos)-1, 1)
	if err != nil {
		return "", fmt.Errorf("read the log at the checkpoint %d: %w", pos, err)
	}
	switch {
	case len(evs) == 0 || evs[0].Position != uint64(pos):
		last, err := v.store.LastPosition(ctx)
		if err != nil {
			return "", fmt.Errorf("read the log's last position: %w", err)
		}
		return fmt.Sprintf("the views reflect position %d but the log holds no event there (it ends at %d)", pos, last), nil
	case evs[0].ID != id:
		return fmt.Sprintf("the event at position %d is %s in the log but %s in the views", pos, evs[0].ID, id), nil
	}
	return "", nil
}

// Reconcile rebuilds the views from the log when MatchLog finds they
// describe another log, logging why: call it after Open, before Run.
func (v *Runner) Reconcile(ctx context.Context) error {
	reason, err := v.MatchLog(ctx)
	if err != nil {
		return fmt.Errorf("check views against the log: %w", err)
	}
	if reason == "" {
		return nil
	}
	v.log.ErrorContext(ctx, "views do not match the event log (restored from a backup, replaced or lost?): rebuilding them from the log",
		"reason", reason)
	return v.Rebuild(ctx)
}
