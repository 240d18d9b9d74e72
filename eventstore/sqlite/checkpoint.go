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

// startOverFrames is the WAL length (in pages) past which the writer starts
// the WAL over from its beginning. A commit that extends the WAL file costs
// its fsync more than one that overwrites pages of it (the file system
// records the file's new size and blocks: 100 against 67 µs of CPU back to
// back, 357 against 299 paced as one sender's commits come, and the wait
// with it; BenchmarkFsync), and under continuous appends the WAL never
// starts over by itself: the writer starts it over only when it finds
// every frame copied, and the checkpointer, copying beside it, never
// catches up with the frames committed meanwhile. So once the checkpointer
// has copied a WAL this long, the writer, between two batches, copies the
// few frames committed since (a PASSIVE checkpoint on its own connection,
// which waits for no reader) and its next commit writes from the WAL's
// beginning. The WAL file then stays about this long (or as long as what
// is committed between two checkpoints, when that is more) and is written
// in place.
const startOverFrames = 1024

// walSizeLimit is the writer's journal_size_limit in bytes: what the WAL
// file is cut back to when it starts over after a reader kept it growing.
// No checkpoint ever waits for readers to start the WAL over: a RESTART
// would hold the log's write lock while it waited, and every append with
// it (until busy_timeout, then failing), for as long as one reader kept an
// old snapshot. Such a reader costs the WAL disk space for its time
// instead (TestAPinnedWALHoldsNoAppendBack).
const walSizeLimit = 64 << 20

// runCheckpointer keeps WAL checkpoints out of the commit path: the writer's
// connection has wal_autocheckpoint=0, and this goroutine, on its own
// connection, runs a PASSIVE checkpoint (which never blocks the writer or the
// readers) after commits, at most once per checkpointEvery. It returns when
// ctx ends (Close).
func (s *Store) runCheckpointer(ctx context.Context) {
	defer close(s.checkpointerDone)
	timer := time.NewTimer(s.checkpointEvery)
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
		timer.Reset(s.checkpointEvery)
		select {
		case <-timer.C:
		case <-ctx.Done():
			return
		}
	}
}

// checkpoint runs one PASSIVE checkpoint. Past startOverFrames it asks the
// writer to start the WAL over.
func (s *Store) checkpoint(ctx context.Context) error {
	frames, copied, err := walCheckpoint(ctx, s.checkpointDB, "PASSIVE")
	if err != nil {
		return err
	}
	s.log.Debug("wal checkpoint", slog.Int64("frames", frames), slog.Int64("copied", copied))
	if frames >= startOverFrames {
		s.startOver.Store(true)
	}
	if frames*4096 > walSizeLimit && copied < frames {
		s.pinnedWarn.Do(func() {
			s.log.Warn("the event log's WAL cannot start over: a reader keeps an old snapshot of events.db (another process reading it?); it grows by what is appended until that reader ends",
				slog.Int64("wal_pages", frames), slog.Int64("copied_pages", copied))
		})
	}
	return nil
}

// finishCheckpoint runs on the writer goroutine between two batches when
// the checkpointer asked for it (startOver): it copies what the checkpointer
// left of the WAL, so that the writer's next commit starts the WAL over.
// PASSIVE: it waits for no reader and gives up at once if the checkpointer
// is copying; a frame a reader still needs stays, and the checkpointer asks
// again.
func (s *Store) finishCheckpoint(ctx context.Context) {
	if !s.startOver.Swap(false) {
		return
	}
	start := time.Now()
	frames, copied, err := walCheckpoint(ctx, s.writeConn, "PASSIVE")
	if err != nil {
		s.log.Warn("wal checkpoint before starting the WAL over failed", slog.Any("error", err))
		return
	}
	if frames <= 0 || frames != copied { // a busy checkpoint reports -1 for both
		s.log.Debug("wal copied in part: readers or the checkpointer hold the rest", slog.Int64("frames", frames), slog.Int64("copied", copied), slog.Duration("took", time.Since(start)))
		return
	}
	s.log.Debug("wal copied: the writer starts it over", slog.Int64("frames", frames), slog.Duration("took", time.Since(start)))
}

// querier is a connection or a pool: the checkpointer's, the writer's.
type querier interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// walCheckpoint runs PRAGMA wal_checkpoint in the given mode and returns the
// WAL's length and how much of it is now in the database file, in pages.
func walCheckpoint(ctx context.Context, db querier, mode string) (frames, copied int64, err error) {
	var busy int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &frames, &copied); err != nil {
		return 0, 0, fmt.Errorf("wal checkpoint %s: %w", mode, err)
	}
	return frames, copied, nil
}
