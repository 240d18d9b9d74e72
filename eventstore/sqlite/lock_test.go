package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/sqlitedsn"
	"github.com/relayhq/relay/internal/testwait"
)

// TestAppendWaitsForTheWriteLock: the writer's transactions begin
// DEFERRED; an append that reads the stream head first must still wait for
// a write lock held elsewhere (a RESTART checkpoint holds it) instead of
// failing with SQLITE_BUSY on its first insert.
func TestAppendWaitsForTheWriteLock(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	defer s.Close()
	first, err := s.Append(ctx, "s-1", domain.NoStream(), event("a"))
	if err != nil {
		t.Fatal(err)
	}
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

// TestHeldAppendCommitsWithTheNext: an append queued with a commit hold
// waits for the next append and commits in its transaction; alone, it
// still commits once its hold is up.
func TestHeldAppendCommitsWithTheNext(t *testing.T) {
	ctx := t.Context()
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	defer s.Close()
	before := s.commits.Load()
	wait, err := s.QueueAppend(domain.WithCommitHold(ctx, time.Minute), "d-1", domain.NoStream(), event("receipt"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Append(ctx, "d-1", domain.Exact(0), event("outcome"))
	if err != nil {
		t.Fatal(err)
	}
	held, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if held.Position+1 != first.Position {
		t.Errorf("held append at %d, the next at %d", held.Position, first.Position)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Errorf("%d commits for a held append and the next, want 1", n)
	}

	before = s.commits.Load()
	if _, err := s.Append(domain.WithCommitHold(ctx, time.Millisecond), "d-2", domain.NoStream(), event("alone")); err != nil {
		t.Fatalf("held append alone: %v", err)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Errorf("%d commits for a held append alone, want 1", n)
	}
}

// TestRefusedHeldAppendIsAnsweredAtOnce: a held append is inserted before
// it waits for company, so one that is refused is answered then, not once
// its hold is up.
func TestRefusedHeldAppendIsAnsweredAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // well short of the hold
	defer cancel()
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	defer s.Close()
	wait, err := s.QueueAppend(domain.WithCommitHold(ctx, time.Hour), "d-1", domain.Exact(4), event("receipt"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = wait()
	var wrong *domain.WrongExpectedRevisionError
	if !errors.As(err, &wrong) {
		t.Fatalf("held append at a revision the stream does not have: %v, want a wrong expected revision", err)
	}
	// The writer is free again: the next append commits.
	if _, err := s.Append(ctx, "d-1", domain.NoStream(), event("receipt")); err != nil {
		t.Fatal(err)
	}
}

// TestHeldAppendIsInsertedBeforeItWaits: while a held append waits for
// company, its rows are already in the writer's open transaction (the
// log's write lock is taken: another writer is refused at once), so the
// company's commit has only its own insert left; both then commit
// together.
func TestHeldAppendIsInsertedBeforeItWaits(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	defer s.Close()
	before := s.commits.Load()
	wait, err := s.QueueAppend(domain.WithCommitHold(ctx, time.Minute), "d-1", domain.NoStream(), event("receipt"))
	if err != nil {
		t.Fatal(err)
	}
	other := otherWriter(t, path)
	other.SetMaxOpenConns(1)
	if _, err := other.ExecContext(ctx, `PRAGMA busy_timeout = 0`); err != nil { // refused at once, not waited for
		t.Fatal(err)
	}
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		tx, err := other.BeginTx(ctx, nil) // IMMEDIATE: asks for the write lock
		if err != nil {
			return nil // busy: the held append's transaction has it
		}
		_ = tx.Rollback()
		return errors.New("the log's write lock is free while an append is held")
	})
	if _, err := s.Append(ctx, "d-1", domain.Exact(0), event("outcome")); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Errorf("%d commits for a held append and its company, want 1", n)
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
