package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/sqlitedsn"
)

// TestWALStartsOverUnderContinuousAppends appends without a pause from
// several goroutines, so that the checkpointer never finds the WAL fully
// copied, and checks that the WAL still starts over from its beginning:
// its file stays near startOverFrames pages instead of growing with
// everything appended (which made every commit extend the file), and every
// acknowledged event is still read back, from the store and from a copy of
// its files as a crash would leave them.
func TestWALStartsOverUnderContinuousAppends(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{CheckpointEvery: 10 * time.Millisecond})
	defer s.Close()

	const (
		appenders = 8
		total     = 32 << 20 // bytes of event data appended in all
		pageSize  = 4096
	)
	random := make([]byte, 3<<10)
	_, _ = rand.Read(random)
	data := []byte(fmt.Sprintf("%q", base64.StdEncoding.EncodeToString(random))) // compression cannot shrink it

	var appended, events, peak atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, appenders)
	for g := range appenders {
		wg.Go(func() {
			for i := 0; appended.Load() < total; i++ {
				e := domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: data}
				if _, err := s.Append(ctx, fmt.Sprintf("delivery-%d-%d", g, i), domain.NoStream(), e); err != nil {
					errs <- err
					return
				}
				appended.Add(int64(len(data)))
				events.Add(1)
				if g == 0 {
					if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > peak.Load() {
						peak.Store(fi.Size())
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Before the change the WAL grew with every byte appended (here to
	// more than 32 MiB); now it starts over once the checkpointer has
	// copied startOverFrames pages, plus what was committed meanwhile.
	t.Logf("peak WAL %d bytes, %d appended", peak.Load(), appended.Load())
	if limit := int64(3 * startOverFrames * pageSize); peak.Load() > limit {
		t.Errorf("the WAL file reached %d bytes while %d were appended; want it to start over under %d", peak.Load(), appended.Load(), limit)
	}

	want := events.Load()
	if got := countEvents(t, s); got != want {
		t.Fatalf("the store reads back %d events, want the %d acknowledged", got, want)
	}
	crashed := filepath.Join(t.TempDir(), "events.db")
	for _, suffix := range []string{"-wal", ""} { // the WAL first: it is what a commit writes
		copyFile(t, path+suffix, crashed+suffix)
	}
	c := openAt(t, crashed, Options{})
	defer c.Close()
	if got := countEvents(t, c); got != want {
		t.Fatalf("a copy of the files holds %d events, want the %d acknowledged", got, want)
	}
}

// countEvents reads the whole log in pages and counts its events.
func countEvents(t *testing.T, s *Store) int64 {
	t.Helper()
	var n int64
	var after uint64
	for {
		page, err := s.ReadAll(t.Context(), after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return n
		}
		n += int64(len(page))
		after = page[len(page)-1].Position
	}
}

// TestAPinnedWALHoldsNoAppendBack: a reader that keeps an old snapshot
// open (a long read of another process, a slow query) keeps the WAL from
// starting over, so the WAL grows, past journal_size_limit. Appends must go
// on meanwhile. A RESTART checkpoint there (as the checkpointer ran past
// 16 384 pages before) took the log's write lock and held it while it
// waited for that reader: appends waited the busy timeout, 10 s, and then
// failed with SQLITE_BUSY, every account's deliveries with them. Once the reader lets go, the WAL
// starts over and is cut back to journal_size_limit. The operator is told,
// once, that a reader keeps the WAL growing.
func TestAPinnedWALHoldsNoAppendBack(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	warned := &warnings{}
	s := openAt(t, path, Options{CheckpointEvery: 10 * time.Millisecond, Logger: slog.New(warned)})
	defer s.Close()
	if _, err := s.Append(ctx, "first", domain.NoStream(), domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}

	reader, err := sql.Open("sqlite", sqlitedsn.Build(path, true, sqlitedsn.Full))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	pin, err := reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Rollback()
	var n int
	if err := pin.QueryRowContext(ctx, `SELECT COUNT(*) FROM events`).Scan(&n); err != nil { // takes the snapshot
		t.Fatal(err)
	}

	random := make([]byte, 24<<10) // several pages an append: fewer commits to fill the WAL
	_, _ = rand.Read(random)
	data := []byte(fmt.Sprintf("%q", base64.StdEncoding.EncodeToString(random)))
	walSize := func() int64 {
		t.Helper()
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	// Eight appenders fill the WAL past journal_size_limit and 1 024
	// pages more, then append 300 more; slowest is the longest one of
	// those took.
	past := int64(walSizeLimit + startOverFrames*4096)
	var (
		mu      sync.Mutex
		slowest time.Duration
		beyond  atomic.Int64
		wg      sync.WaitGroup
	)
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := 0; beyond.Load() < 300; i++ {
				start, full := time.Now(), walSize() > past
				e := domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: data}
				if _, err := s.Append(ctx, fmt.Sprintf("delivery-%d-%d", g, i), domain.NoStream(), e); err != nil {
					errs <- err
					return
				}
				if full {
					mu.Lock()
					slowest = max(slowest, time.Since(start))
					mu.Unlock()
					beyond.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A wait for the reader lasts the busy timeout; an append alone, a
	// few milliseconds.
	t.Logf("WAL %d bytes behind the pinned reader; the slowest append past %d bytes took %v", walSize(), past, slowest)
	if slowest > pinnedAppendLimit {
		t.Errorf("an append waited %v while a reader pinned the WAL; appends must not wait for readers", slowest)
	}

	if n := warned.n.Load(); n != 1 {
		t.Errorf("%d warnings that a reader keeps the WAL from starting over, want 1", n)
	}
	if err := pin.Rollback(); err != nil {
		t.Fatal(err)
	}
	for i := 0; walSize() > walSizeLimit; i++ {
		if i == 4096 {
			t.Fatalf("the WAL is still %d bytes, 4096 appends after the reader let go; want it cut back to %d", walSize(), walSizeLimit)
		}
		e := domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: []byte(`{}`)}
		if _, err := s.Append(ctx, fmt.Sprintf("after-%d", i), domain.NoStream(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// pinnedAppendLimit is far above an append's own time and far below the
// busy timeout (10 s) a wait for a reader would last.
const pinnedAppendLimit = 3 * time.Second

// warnings counts the warning records logged to it.
type warnings struct{ n atomic.Int64 }

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(context.Context, slog.Record) error {
	w.n.Add(1)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }
