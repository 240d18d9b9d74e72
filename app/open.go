package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/esdb"
	"github.com/relayhq/relay/eventstore/jetstream"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/internal/datalock"
	"github.com/relayhq/relay/internal/sqlitedsn"
)

// LockData creates the data folder if needed and locks it.
func LockData(dir string) (*datalock.Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, notWritable(dir, fmt.Errorf("create data folder: %w", err))
	}
	l, err := datalock.Acquire(dir)
	if err != nil {
		return nil, notWritable(dir, err)
	}
	return l, nil
}

// notWritable leads err with what to do when it is the data folder this
// user may not write (permissions, a read-only file system); other errors
// are returned as they are.
func notWritable(dir string, err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("data folder %s: this user may not write there; give --data a folder it may write, or run relay as its owner (%w)", dir, err)
	}
	return err
}

// logDamaged turns a damaged event log into a clear refusal: the log is the
// only copy of what was received, so it is never repaired or replaced here.
func logDamaged(dir string, err error) error {
	if !sqlitedsn.Damaged(err) {
		return err
	}
	return fmt.Errorf("the event log %s is damaged (%w); it is never repaired automatically: keep a copy of the file, "+
		"find the first bad position with `relay events verify --data %s`, and restore the data folder from a backup",
		filepath.Join(dir, "events.db"), err, dir)
}

// OpenStore opens the event log: NATS JetStream for nats:// and tls://
// URLs, EventStoreDB for any other URL, else the embedded SQLite log under
// dir.
func OpenStore(ctx context.Context, dir, eventstoreURL string, log *slog.Logger) (domain.EventStore, error) {
	if jetstream.IsURL(eventstoreURL) {
		servers, opts, err := jetstream.ParseURL(eventstoreURL)
		if err != nil {
			return nil, fmt.Errorf("open event log: %w", err)
		}
		opts.Logger = log
		s, err := jetstream.Open(ctx, servers, opts)
		if err != nil {
			return nil, fmt.Errorf("open event log: %w", err)
		}
		return s, nil
	}
	if eventstoreURL != "" {
		s, err := esdb.Open(ctx, eventstoreURL, esdb.Options{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open event log: %w", err)
		}
		return s, nil
	}
	s, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), sqlite.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	return s, nil
}
