package sqlite

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
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
