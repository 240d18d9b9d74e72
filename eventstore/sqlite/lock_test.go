package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/sqlitedsn"
)

// TestAppendWaitsForTheWriteLock: an append that reads the stream head
// first must wait for a write lock held elsewhere (another process on the
// same file) instead of failing with SQLITE_BUSY: the writer's transactions
// begin IMMEDIATE, and wait for the lock there.
func TestAppendWaitsForTheWriteLock(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	first, err := s.Append(ctx, "s-1", domain.NoStream(), event("a"))
	if err != nil {
		t.Fatal(err)
	}
	// Opened again, the writer knows no stream head: the append reads it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	defer s.Close()
	other := otherWriter(t, path)
	tx, err := other.BeginTx(ctx, nil) // IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, "s-1", domain.Exact(first.NextRevision), event("b"))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // the append reaches the lock
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("append while another connection held the write lock: %v", err)
	}
}

// otherWriter opens the log at path as a second writer would, beside the
// store's own connections; its transactions begin IMMEDIATE.
func otherWriter(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqlitedsn.Build(path, false, sqlitedsn.Full))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
