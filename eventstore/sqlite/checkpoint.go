package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"
)

// checkpointEvery bounds how often the background checkpointer copies the
// WAL into the database file. Rarer checkpoints copy a page changed by many
// commits once instead of many times; the WAL grows by what the writer
// commits in this time.
const checkpointEvery = 500 * time.Millisecond

// restartFrames is the WAL length (in pages) past which the checkpointer
// also makes the writer start the WAL over. The writer does so on its own
// whenever it finds the WAL fully copied; only a long unbroken stream of
// commits keeps it growing, and then a RESTART checkpoint, which briefly
// holds appends back, lets the next commit write from the WAL's beginning
// again. RESTART rather than TRUNCATE: overwriting the file in place is much
// cheaper for the writer than extending it; journal_size_limit on the
// writer's connection bounds what the file keeps.
const restartFrames = 16384

// walSizeLimit is the writer's journal_size_limit in bytes: what a restarted
// WAL file is cut back to.
const walSizeLimit = restartFrames * 4096

// runCheckpointer keeps WAL checkpoints out of the commit path: the writer's
// connection has wal_autocheckpoint=0, and this goroutine, on its own
// connection, runs a PASSIVE checkpoint (which never blocks the writer or the
// readers) after commits, at most once per checkpointEvery. It returns when
// ctx ends (Close).
func (s *Store) runCheckpointer(ctx context.Context) {
	defer close(s.checkpointerDone)
	timer := time.NewTimer(checkpointEvery)
	defer timer.Stop()
	checkpointed := s.last.Load()
	for {
		changed := s.changed()
		if s.last.Load() == checkpointed {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return
			}
		}
		checkpointed = s.last.Load()
		if err := s.checkpoint(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("wal checkpoint failed", slog.Any("error", err))
		}
		timer.Reset(checkpointEvery)
		select {
		case <-timer.C:
		case <-ctx.Done():
			return
		}
	}
}

// checkpoint runs one PASSIVE checkpoint and, when the WAL has grown past
// restartFrames, a RESTART one.
func (s *Store) checkpoint(ctx context.Context) error {
	frames, copied, err := walCheckpoint(ctx, s.checkpointDB, "PASSIVE")
	if err != nil {
		return err
	}
	s.log.Debug("wal checkpoint", slog.Int64("frames", frames), slog.Int64("copied", copied))
	if frames < restartFrames {
		return nil
	}
	frames, copied, err = walCheckpoint(ctx, s.checkpointDB, "RESTART")
	if err != nil {
		return err
	}
	s.log.Debug("wal restarted", slog.Int64("frames", frames), slog.Int64("copied", copied))
	return nil
}

// walCheckpoint runs PRAGMA wal_checkpoint in the given mode and returns the
// WAL's length and how much of it is now in the database file, in pages.
func walCheckpoint(ctx context.Context, db *sql.DB, mode string) (frames, copied int64, err error) {
	var busy int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &frames, &copied); err != nil {
		return 0, 0, fmt.Errorf("wal checkpoint %s: %w", mode, err)
	}
	return frames, copied, nil
}
