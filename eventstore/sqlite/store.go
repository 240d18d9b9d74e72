package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/groupcommit"
	"github.com/relayhq/relay/internal/sqlitedsn"
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("event store is closed")

// DefaultMaxBatch is how many appends one transaction takes when
// Options.MaxBatch is zero.
const DefaultMaxBatch = 256

// readConns bounds the read pool; WAL lets these readers run beside the
// writer without blocking it.
const readConns = 4

// Options tune a Store. The zero value is ready to use.
type Options struct {
	// Logger receives the store's diagnostics; nil discards them.
	Logger *slog.Logger
	// MaxBatch caps how many waiting appends share one transaction (and one
	// fsync); 0 means DefaultMaxBatch.
	MaxBatch int
	// Linger is how long the writer may wait for more appends before a
	// commit while many senders append at once (groupcommit.Linger); 0
	// means groupcommit.DefaultWait, less than 0 never waits.
	Linger time.Duration
	// CheckpointEvery is how often the background checkpointer may copy the
	// WAL into the database file; 0 means checkpointEvery (500 ms).
	CheckpointEvery time.Duration
}

// Store is the embedded event log: one SQLite file in WAL mode, written by a
// single goroutine that group-commits, read through a separate pool.
// It implements domain.EventStore and is safe for concurrent use.
type Store struct {
	log     *slog.Logger
	writeDB *sql.DB // exactly one connection, owned by the writer goroutine
	// writeConn is that connection, held for the store's life: the writer
	// begins and commits its batches with statements prepared on it, not
	// through database/sql's Tx, which would start a goroutine, wrap every
	// statement again and prepare BEGIN and COMMIT anew for each batch.
	writeConn *sql.Conn
	readDB    *sql.DB // query-only connections
	// checkpointDB is the background checkpointer's one connection.
	checkpointDB *sql.DB
	stmts        writeStmts
	reads        readStmts
	maxBatch     int
	// linger is the writer's wait for company before a commit; only the
	// writer goroutine uses it.
	linger groupcommit.Linger[*appendRequest]

	// mu guards closed; Append holds it for reading while it queues, so Close
	// cannot close reqs under a sender.
	mu         sync.RWMutex
	closed     bool
	reqs       chan *appendRequest
	writerDone chan struct{}

	stopCheckpointer context.CancelFunc
	checkpointerDone chan struct{}
	checkpointEvery  time.Duration
	// startOver is the checkpointer's request that the writer copy the rest
	// of a long WAL and start it over (finishCheckpoint).
	startOver atomic.Bool
	// pinnedWarn spaces the checkpointer's warnings that a reader keeps
	// the WAL from starting over: one a minute.
	pinnedWarn rate.Sometimes

	chain    chainHead       // the newest chain row; the writer's only
	heads    *headCache      // committed stream heads; the writer's only
	pending  map[string]head // the heads of the batch in progress
	leaves   []evidence.Hash // the batch's leaves (reused); the writer's only
	treeMu   sync.Mutex
	tree     *chainTree    // the chain's Merkle tree, nil until ChainTree is first called
	last     atomic.Uint64 // newest committed position
	tail     tail          // the newest committed events, for live subscriptions
	commits  atomic.Uint64 // transactions committed: appends/commits is the batching achieved
	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced after each commit
	done     chan struct{} // closed once the store is closed

	closeOnce sync.Once
	closeErr  error
}

var (
	_ domain.EventStore   = (*Store)(nil)
	_ domain.AppendQueuer = (*Store)(nil)
)

// Open opens (creating if needed) the log in the SQLite file at path and
// starts its writer. ctx bounds the opening only; the store lives until Close.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Linger == 0 {
		opts.Linger = groupcommit.DefaultWait
	}
	if opts.CheckpointEvery <= 0 {
		opts.CheckpointEvery = checkpointEvery
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	s := &Store{
		log:              opts.Logger,
		maxBatch:         opts.MaxBatch,
		linger:           groupcommit.Linger[*appendRequest]{Wait: opts.Linger},
		reqs:             make(chan *appendRequest, opts.MaxBatch),
		writerDone:       make(chan struct{}),
		checkpointerDone: make(chan struct{}),
		checkpointEvery:  opts.CheckpointEvery,
		pinnedWarn:       rate.Sometimes{Interval: time.Minute},
		notify:           make(chan struct{}),
		done:             make(chan struct{}),
		heads:            newHeadCache(),
		pending:          make(map[string]head),
	}
	if err := s.open(ctx, abs); err != nil {
		_ = s.closeDBs()
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	// The writer and the checkpointer outlive Open's ctx: Close stops them.
	go s.runWriter(context.WithoutCancel(ctx))
	cpCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopCheckpointer = stop
	go s.runCheckpointer(cpCtx)
	s.log.Debug("event store opened", slog.String("path", abs), slog.Uint64("position", s.last.Load()))
	return s, nil
}

// open opens the connections, migrates, prepares the statements and reads
// the last position. On error the caller closes whatever was opened.
func (s *Store) open(ctx context.Context, path string) error {
	var err error
	if s.writeDB, err = sql.Open("sqlite", dsn(path, false)); err != nil {
		return err
	}
	// One connection: the writer goroutine is the only writer, so SQLite's
	// write lock is never contended inside the process.
	oneConn(s.writeDB)
	if err := migrate(ctx, s.writeDB); err != nil {
		return err
	}
	if s.writeConn, err = s.writeDB.Conn(ctx); err != nil {
		return fmt.Errorf("take the writer's connection: %w", err)
	}
	if s.stmts, err = prepareWriteStmts(ctx, s.writeConn); err != nil {
		return err
	}

	if s.readDB, err = sql.Open("sqlite", dsn(path, true)); err != nil {
		return err
	}
	s.readDB.SetMaxOpenConns(readConns)
	s.readDB.SetMaxIdleConns(readConns)
	if s.reads, err = prepareReadStmts(ctx, s.readDB); err != nil {
		return err
	}

	// Checkpoints need a connection that may write to the database file.
	if s.checkpointDB, err = sql.Open("sqlite", sqlitedsn.Build(path, false, sqlitedsn.Full)); err != nil {
		return err
	}
	oneConn(s.checkpointDB)

	var last int64
	if err := s.readDB.QueryRowContext(ctx, `SELECT COALESCE(MAX(position), 0) FROM events`).Scan(&last); err != nil {
		return fmt.Errorf("read last position: %w", err)
	}
	s.last.Store(uint64(last))
	if s.chain, err = readChainHead(ctx, s.writeConn); err != nil {
		return err
	}
	return nil
}

func oneConn(db *sql.DB) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// closeDBs closes the statements and connections that are open. The writer's
// connection goes last: as the file's last connection it checkpoints the
// whole WAL and removes it.
func (s *Store) closeDBs() error {
	var errs []error
	errs = append(errs, s.stmts.close(), s.reads.close())
	if s.writeConn != nil {
		errs = append(errs, s.writeConn.Close())
	}
	for _, db := range []*sql.DB{s.readDB, s.checkpointDB, s.writeDB} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// dsn: synchronous=FULL, so a commit is on disk before Append returns. The
// writer does not checkpoint after its commits (wal_autocheckpoint=0): the
// checkpointer does, so no commit waits for a checkpoint.
func dsn(path string, readOnly bool) string {
	if readOnly {
		return sqlitedsn.Build(path, true, sqlitedsn.Full)
	}
	// The writer's transactions begin IMMEDIATE: they take the log's write
	// lock before anything reads, waiting (busy_timeout) while another
	// process on the same file holds it, where a read that later needed it
	// would fail with SQLITE_BUSY at once.
	return sqlitedsn.Build(path, false, sqlitedsn.Full, "wal_autocheckpoint(0)", fmt.Sprintf("journal_size_limit(%d)", walSizeLimit))
}

// LastPosition returns the position of the newest committed event, 0 when
// the log is empty. It is answered from memory: the writer updates it after
// every commit.
func (s *Store) LastPosition(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("last position: %w", err)
	}
	if s.isClosed() {
		return 0, fmt.Errorf("last position: %w", ErrClosed)
	}
	return s.last.Load(), nil
}

// Close lets the writer commit every append already queued, then closes the
// database. Appends and subscriptions that come later fail with ErrClosed or
// domain.ErrSubscriptionClosed. Calling Close again returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.reqs)
		s.mu.Unlock()
		<-s.writerDone
		close(s.done)
		s.stopCheckpointer()
		<-s.checkpointerDone
		s.closeErr = s.closeDBs()
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("close event store: %w", s.closeErr)
		}
		s.log.Debug("event store closed", slog.Uint64("position", s.last.Load()), slog.Uint64("commits", s.commits.Load()))
	})
	return s.closeErr
}

func (s *Store) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// published records a commit and wakes every subscription waiting for it.
func (s *Store) published(position uint64) {
	s.last.Store(position)
	s.notifyMu.Lock()
	close(s.notify)
	s.notify = make(chan struct{})
	s.notifyMu.Unlock()
}

// changed returns a channel closed by the next commit. Taking it before
// looking at the last position means no commit can slip in between unseen.
func (s *Store) changed() <-chan struct{} {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	return s.notify
}
