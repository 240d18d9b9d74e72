package commands_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
)

// diskWriters append deliveries concurrently, so the embedded log's group
// commit shares transactions between them as it does under real traffic.
const diskWriters = 32

// TestRetentionDiskSpace measures the data folder (the log and views.db)
// when RELAY_RETENTION_DISK deliveries are written, deleted by an
// Endpoint's retention, written again and deleted again: what SQLite does
// with the pages retention frees (docs/operations.md, "Retention"). Off
// unless the variable is set (RELAY_RETENTION_DISK=100000: a few minutes).
func TestRetentionDiskSpace(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RELAY_RETENTION_DISK"))
	if n <= 0 {
		t.Skip("set RELAY_RETENTION_DISK=100000 to measure the data folder around a retention run")
	}
	cfg := defaultConfig()
	cfg.Retention = domain.RetentionLimits{Default: time.Hour, Min: time.Second, Max: time.Hour}
	e := newEnv(t, cfg)
	acc, _ := e.account(t, "disk")
	ep := e.endpoint(t, acc.ID, domain.EndpointSettings{Name: "disk", Mode: domain.ModeLog, Retention: time.Minute})
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}

	write := func(at time.Time) {
		t.Helper()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, diskWriters)
		for w := range diskWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += diskWriters {
					id := commands.NewDeliveryID()
					d, err := domain.ReceiveAndAnswer(id, ep.ID, domain.AddressEndpoint, acc.ID,
						domain.CapturedRequest{Method: "POST", Target: "/hook", Host: "h", Proto: "HTTP/1.1", Body: body, BodySize: int64(len(body)), Complete: true}, 204, "")
					if err == nil {
						var data []domain.EventData
						if data, _, err = e.codec.EncodeAll(nil, commands.NewEventID, d.Changes(), at, domain.Trace{}); err == nil {
							_, err = e.store.Append(ctx(t), domain.DeliveryStream(id), domain.NoStream(), data...)
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if err := e.views.WaitFor(ctx(t), e.lastPosition(t)); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d deliveries of %d bytes in %v", n, len(body), time.Since(start).Round(time.Millisecond))
	}
	sweep := func(now time.Time) {
		t.Helper()
		start := time.Now()
		var decided, deleted int
		for {
			res, err := e.svc.SweepEndpointRetention(t.Context(), now)
			if err != nil {
				t.Fatal(err)
			}
			decided, deleted = decided+res.Decided, deleted+res.Deleted
			if res.Deleted == 0 {
				break
			}
		}
		if deleted != n || decided != 1 {
			t.Fatalf("retention decided %d times and deleted %d streams, want 1 and %d", decided, deleted, n)
		}
		t.Logf("retention deleted %d delivery streams in %v", deleted, time.Since(start).Round(time.Millisecond))
	}

	at := time.Now().UTC().Add(-time.Hour)
	e.measure(t, "empty")
	write(at)
	e.measure(t, "written")
	idle := func(now time.Time) {
		t.Helper()
		start := time.Now()
		if res, err := e.svc.SweepEndpointRetention(t.Context(), now); err != nil || res.Decided != 0 || res.Deleted != 0 {
			t.Fatalf("sweep before the window ran out: %+v, %v", res, err)
		}
		t.Logf("a sweep with nothing to delete over %d deliveries took %v", n, time.Since(start).Round(time.Millisecond))
	}
	idle(at.Add(30 * time.Second))
	sweep(at.Add(2 * time.Minute))
	e.measure(t, "after retention")
	write(at.Add(10 * time.Minute))
	e.measure(t, "written again")
	idle(at.Add(10*time.Minute + 30*time.Second)) // after a decision: its cutoff is read too
	sweep(at.Add(12 * time.Minute))
	e.measure(t, "after retention again")
}

// measure logs the size of every file in the data folder and, for the
// SQLite files, how many of their pages are free.
func (e *env) measure(t *testing.T, when string) {
	t.Helper()
	var total int64
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	line := ""
	for _, de := range entries {
		info, err := de.Info()
		if err != nil || info.IsDir() {
			continue
		}
		total += info.Size()
		line += fmt.Sprintf(" %s=%.1fMiB", de.Name(), float64(info.Size())/(1<<20))
		if filepath.Ext(de.Name()) == ".db" {
			line += freePages(t, filepath.Join(e.dir, de.Name()))
		}
	}
	t.Logf("%-22s total %.1f MiB:%s", when, float64(total)/(1<<20), line)
}

// freePages reads a SQLite file's page count and free list, read-only.
func freePages(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return ""
	}
	defer db.Close()
	var pages, free int64
	if db.QueryRow("PRAGMA page_count").Scan(&pages) != nil || db.QueryRow("PRAGMA freelist_count").Scan(&free) != nil {
		return ""
	}
	return fmt.Sprintf(" (%d pages, %d free)", pages, free)
}
