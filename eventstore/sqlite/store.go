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

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/relayhq/relay/domain"
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
}

// Store is the embedded event log: one SQLite file in WAL mode, written by a
// single goroutine that group-commits, read through a separate pool.
// It implements domain.EventStore and is safe for concurrent use.
type Store struct {
	log      *slog.Logger
	writeDB  *sql.DB // exactly one connection, owned by the writer goroutine
	readDB   *sql.DB // query-only connections
	stmts    writeStmts
	maxBatch int

	// mu guards closed; Append holds it for reading while it queues, so Close
	// cannot close reqs under a sender.
	mu         sync.RWMutex
	closed     bool
	reqs       chan *appendRequest
	writerDone chan struct{}

	last     atomic.Uint64 // newest committed position
	commits  atomic.Uint64 // transactions committed: appends/commits is the batching achieved
	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced after each commit
	done     chan struct{} // closed once the store is closed

	closeOnce sync.Once
	closeErr  error
}

var _ domain.EventStore = (*Store)(nil)

// Open opens (creating if needed) the log in the SQLite file at path and
// starts its writer. ctx bounds the opening only; the store lives until Close.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}

	writeDB, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	// One connection: the writer goroutine is the only writer, so SQLite's
	// write lock is never contended inside the process.
	writeDB.SetMaxOpenConns(1)
	writeDB.SetMaxIdleConns(1)
	writeDB.SetConnMaxLifetime(0)
	writeDB.SetConnMaxIdleTime(0)
	if err := migrate(ctx, writeDB); err != nil {
		writeDB.Close()
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	stmts, err := prepareWriteStmts(ctx, writeDB)
	if err != nil {
		writeDB.Close()
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}

	readDB, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		stmts.close()
		writeDB.Close()
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	readDB.SetMaxOpenConns(readConns)
	readDB.SetMaxIdleConns(readConns)

	var last int64
	if err := readDB.QueryRowContext(ctx, `SELECT COALESCE(MAX(position), 0) FROM events`).Scan(&last); err != nil {
		stmts.close()
		writeDB.Close()
		readDB.Close()
		return nil, fmt.Errorf("open event store %s: read last position: %w", path, err)
	}

	s := &Store{
		log:        opts.Logger,
		writeDB:    writeDB,
		readDB:     readDB,
		stmts:      stmts,
		maxBatch:   opts.MaxBatch,
		reqs:       make(chan *appendRequest, opts.MaxBatch),
		writerDone: make(chan struct{}),
		notify:     make(chan struct{}),
		done:       make(chan struct{}),
	}
	s.last.Store(uint64(last))
	// The writer outlives Open's ctx: it stops when Close drains it.
	go s.runWriter(context.WithoutCancel(ctx))
	s.log.Debug("event store opened", slog.String("path", abs), slog.Uint64("position", uint64(last)))
	return s, nil
}

// dsn: synchronous=FULL, so a commit is on disk before Append returns.
func dsn(path string, readOnly bool) string {
	return sqlitedsn.Build(path, readOnly, sqlitedsn.Full)
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
		s.closeErr = errors.Join(s.stmts.close(), s.writeDB.Close(), s.readDB.Close())
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
