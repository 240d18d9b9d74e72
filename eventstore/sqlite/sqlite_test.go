package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
	"github.com/relayhq/relay/eventstore/storetest"
	"github.com/relayhq/relay/internal/groupcommit"
	"github.com/relayhq/relay/internal/testwait"
)

func openAt(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

// paths remembers each store's file so Reopen can find it again.
type paths map[domain.EventStore]string

func TestConformance(t *testing.T) {
	files := paths{}
	storetest.Run(t, storetest.Factory{
		Open: func(t *testing.T) domain.EventStore {
			path := filepath.Join(t.TempDir(), "events.db")
			s := openAt(t, path, Options{})
			files[s] = path
			return s
		},
		Reopen: func(t *testing.T, old domain.EventStore) domain.EventStore {
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			s := openAt(t, files[old], Options{})
			files[s] = files[old]
			return s
		},
		Guarantees: storetest.Guarantees{
			EmptyOnOpen:         true,
			GapFreePositions:    true,
			UniqueEventIDs:      true,
			StreamReadPositions: true,
		},
	})
}

func event(label string) domain.EventData {
	return domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: []byte(fmt.Sprintf("%q", label))}
}

// TestGroupCommitIsolatesFailures sends one batch holding good appends, a
// conflict and a duplicate, and checks that only the bad ones fail. MaxBatch
// is large and the appends are queued while the writer is busy, so they
// share a transaction whenever they arrive together.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	ctx := t.Context()
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{MaxBatch: 64})
	defer s.Close()
	taken := event("taken")
	if _, err := s.Append(ctx, "delivery-taken", domain.NoStream(), taken); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "delivery-head", domain.NoStream(), event("head")); err != nil {
		t.Fatal(err)
	}

	type call struct {
		stream   string
		expected domain.ExpectedRevision
		events   []domain.EventData
		want     error // nil for success
	}
	var calls []call
	for i := range 20 {
		calls = append(calls, call{fmt.Sprintf("delivery-%d", i), domain.NoStream(), []domain.EventData{event("a"), event("b")}, nil})
		calls = append(calls, call{"delivery-head", domain.NoStream(), []domain.EventData{event("conflict")}, domain.ErrWrongExpectedRevision})
		calls = append(calls, call{fmt.Sprintf("delivery-dup-%d", i), domain.NoStream(), []domain.EventData{event("new"), taken}, domain.ErrDuplicateEventID})
	}
	errs := make(chan error, len(calls))
	for _, c := range calls {
		go func() {
			_, err := s.Append(ctx, c.stream, c.expected, c.events...)
			if !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
				errs <- fmt.Errorf("append to %s = %v, want %v", c.stream, err, c.want)
				return
			}
			errs <- nil
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	all, err := s.ReadAll(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2+20*2 {
		t.Fatalf("log holds %d events, want %d", len(all), 2+20*2)
	}
	for i, e := range all {
		if e.Position != uint64(i+1) {
			t.Fatalf("event %d at position %d: the log has a gap", i, e.Position)
		}
	}
}

// TestRecvBatchIsBounded checks that a subscription far behind reads the
// log in bounded batches rather than all at once.
func TestRecvBatchIsBounded(t *testing.T) {
	ctx := t.Context()
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	defer s.Close()
	const n = SubscriptionBatch*2 + 10
	evs := make([]domain.EventData, 0, 100)
	for i := range n {
		evs = append(evs, event(fmt.Sprint(i)))
		if len(evs) == cap(evs) || i == n-1 {
			if _, err := s.Append(ctx, "bulk", domain.Any(), evs...); err != nil {
				t.Fatal(err)
			}
			evs = evs[:0]
		}
	}
	sub, err := s.SubscribeAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var sizes []int
	for total := 0; total < n; {
		batch, err := sub.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(batch))
		total += len(batch)
	}
	want := []int{SubscriptionBatch, SubscriptionBatch, 10}
	if fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Fatalf("batch sizes = %v, want %v", sizes, want)
	}
}

func TestAppendAfterCloseIsErrClosed(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := s.Append(ctx, "delivery-1", domain.Any(), event("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if _, err := s.ReadAll(ctx, 0, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadAll after Close = %v, want ErrClosed", err)
	}
	if _, err := s.LastPosition(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("LastPosition after Close = %v, want ErrClosed", err)
	}
}

// TestCloseDrainsQueuedAppends closes the store while appends are queued and
// checks that every append that was answered with success is in the file.
func TestCloseDrainsQueuedAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{MaxBatch: 4})
	ctx := t.Context()
	const n = 64
	type outcome struct {
		id  string
		err error
	}
	results := make(chan outcome, n)
	started := make(chan struct{}, n)
	for i := range n {
		go func() {
			e := event(fmt.Sprint(i))
			started <- struct{}{}
			_, err := s.Append(ctx, fmt.Sprintf("delivery-%d", i), domain.NoStream(), e)
			results <- outcome{e.ID, err}
		}()
	}
	for range n {
		<-started
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	for range n {
		o := <-results
		switch {
		case o.err == nil:
			acked[o.id] = true
		case !errors.Is(o.err, ErrClosed):
			t.Fatalf("append during Close = %v, want success or ErrClosed", o.err)
		}
	}
	s = openAt(t, path, Options{})
	defer s.Close()
	all, err := s.ReadAll(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(acked) {
		t.Fatalf("file holds %d events, %d appends were acknowledged", len(all), len(acked))
	}
	for _, e := range all {
		if !acked[e.ID] {
			t.Fatalf("event %s is stored but its append failed", e.ID)
		}
	}
}

// newRequest builds what Append would queue for one new event on a new
// stream, so a test can queue it directly and know when it is queued.
func newRequest(t *testing.T, ctx context.Context, stream string) *appendRequest {
	t.Helper()
	md, err := envelope.EncodeMetadata(domain.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	return &appendRequest{
		ctx: ctx, stream: stream, expected: domain.NoStream(),
		rows:  []row{newRow(uuid.NewString(), "t", []byte("{}"), md, domain.Metadata{}, nil)},
		reply: make(chan appendReply, 1),
	}
}

// TestCloseCommitsQueuedAppends queues appends and closes the store at once:
// Close promises to commit everything queued before it, so every one must
// succeed and be in the file after a reopen. (TestCloseDrainsQueuedAppends
// races Append with Close, so it accepts ErrClosed and cannot show this.)
func TestCloseCommitsQueuedAppends(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{MaxBatch: 4})
	const n = 32
	reqs := make([]*appendRequest, n)
	for i := range reqs {
		reqs[i] = newRequest(t, ctx, fmt.Sprintf("delivery-%d", i))
		if err := s.enqueue(ctx, reqs[i]); err != nil {
			t.Fatalf("queue append %d: %v", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		select {
		case rep := <-r.reply:
			if rep.err != nil {
				t.Fatalf("append %d queued before Close: %v", i, rep.err)
			}
		default:
			t.Fatalf("append %d queued before Close was not answered by the time Close returned", i)
		}
	}
	s = openAt(t, path, Options{})
	defer s.Close()
	all, err := s.ReadAll(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("file holds %d events, want the %d queued before Close", len(all), n)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	if _, err := s.writeConn.ExecContext(t.Context(), `PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(t.Context(), path, Options{}); err == nil {
		s.Close()
		t.Fatal("Open accepted a file with a newer schema")
	}
}

// TestRetryResult: stored events count as a retry only where an append with
// the same condition could have written them.
func TestRetryResult(t *testing.T) {
	tests := []struct {
		expected domain.ExpectedRevision
		first    uint64
		want     bool
	}{
		{domain.Any(), 0, true},
		{domain.Any(), 7, true},
		{domain.NoStream(), 0, true},
		{domain.NoStream(), 1, false},
		{domain.StreamExists(), 0, false},
		{domain.StreamExists(), 3, true},
		{domain.Exact(2), 3, true},
		{domain.Exact(2), 2, false},
		{domain.Exact(2), 4, false},
		{domain.Exact(^uint64(0)), 0, false},
	}
	for _, tt := range tests {
		r := &appendRequest{stream: "s", expected: tt.expected, rows: []row{{id: "e1"}}}
		_, err := retryResult(r, []place{{found: true, stream: "s", revision: tt.first, position: 9}})
		if got := err == nil; got != tt.want {
			t.Errorf("retry of events stored from %d with %s: err %v, want a retry: %v", tt.first, tt.expected, err, tt.want)
		}
		if err != nil && !errors.Is(err, domain.ErrDuplicateEventID) {
			t.Errorf("refused retry: %v, want ErrDuplicateEventID", err)
		}
	}
}

// TestPragmas checks the settings durability and concurrency rest on: WAL,
// an fsync per commit (synchronous=FULL is 2), no checkpoint inside a
// commit, and query-only readers.
func TestPragmas(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	defer s.Close()
	ctx := t.Context()
	tests := []struct {
		name   string
		db     func() querier
		pragma string
		want   string
	}{
		{"writer journal", func() querier { return s.writeConn }, "journal_mode", "wal"},
		{"writer sync", func() querier { return s.writeConn }, "synchronous", "2"},
		{"writer busy timeout", func() querier { return s.writeConn }, "busy_timeout", "10000"},
		{"writer leaves checkpoints to the checkpointer", func() querier { return s.writeConn }, "wal_autocheckpoint", "0"},
		{"reader journal", func() querier { return s.readDB }, "journal_mode", "wal"},
		{"reader query only", func() querier { return s.readDB }, "query_only", "1"},
		{"reader busy timeout", func() querier { return s.readDB }, "busy_timeout", "10000"},
	}
	for _, tt := range tests {
		var got string
		if err := tt.db().QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: PRAGMA %s = %s, want %s", tt.name, tt.pragma, got, tt.want)
		}
	}
	if _, err := s.readDB.ExecContext(ctx, `DELETE FROM events`); err == nil {
		t.Error("a read connection could write")
	}
}

// holdWriteLock takes the log's write lock on a connection of its own, so
// that the writer stalls on its next commit, until release.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	ctx := t.Context()
	blocker, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = blocker.Close() })
	lock, err := blocker.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Close() })
	if _, err := lock.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := lock.ExecContext(ctx, `ROLLBACK`); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGroupCommitSharesOneTransaction holds SQLite's write lock from another
// connection so the writer stalls on its first append, queues 63 more, then
// releases the lock: all 64 must commit in at most two transactions.
func TestGroupCommitSharesOneTransaction(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{MaxBatch: 256})
	defer s.Close()

	release := holdWriteLock(t, path)

	request := func(i int) *appendRequest { return newRequest(t, ctx, fmt.Sprintf("delivery-%d", i)) }
	reqs := []*appendRequest{request(0)}
	if err := s.enqueue(ctx, reqs[0]); err != nil {
		t.Fatal(err)
	}
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if len(s.reqs) != 0 {
			return errors.New("still waiting for the writer to take the first append")
		}
		return nil
	})
	// The queue holds MaxBatch requests, so these never wait for the writer.
	queueCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := 1; i < 64; i++ {
		reqs = append(reqs, request(i))
		if err := s.enqueue(queueCtx, reqs[i]); err != nil {
			t.Fatalf("queue append %d: %v", i, err)
		}
	}
	release()
	for i, r := range reqs {
		if rep := <-r.reply; rep.err != nil {
			t.Fatalf("append %d: %v", i, rep.err)
		}
	}
	if got := s.commits.Load(); got > 2 {
		t.Fatalf("64 queued appends took %d transactions, want at most 2", got)
	}
	if last, _ := s.LastPosition(ctx); last != 64 {
		t.Fatalf("LastPosition = %d, want 64", last)
	}
}

// TestWriterLingersInCompany checks that once a commit has carried several
// appends, the writer lets the goroutines that are ready to run append
// before it commits the next, instead of committing the first that comes
// (groupcommit.Linger). The test runs on one P, where other goroutines run
// only when the running one blocks or yields: without the wait the first
// append would commit alone.
func TestWriterLingersInCompany(t *testing.T) {
	ctx := t.Context()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{Linger: time.Hour}) // ended by company, not by time
	defer s.Close()
	request := func(i int) *appendRequest { return newRequest(t, ctx, fmt.Sprintf("delivery-%d", i)) }
	wait := func(reqs []*appendRequest) {
		t.Helper()
		for i, r := range reqs {
			select {
			case rep := <-r.reply:
				if rep.err != nil {
					t.Fatalf("append %d: %v", i, rep.err)
				}
			case <-time.After(10 * time.Second):
				// Linger is an hour: a writer that kept waiting fails here.
				t.Fatalf("append %d not answered after 10 s", i)
			}
		}
	}
	// The writer runs only once this goroutine waits: these commit together,
	// and the writer is in company.
	first := make([]*appendRequest, groupcommit.Company)
	for i := range first {
		first[i] = request(i)
		if err := s.enqueue(ctx, first[i]); err != nil {
			t.Fatal(err)
		}
	}
	wait(first)
	before := s.commits.Load()
	if before != 1 {
		t.Fatalf("%d appends queued together took %d commits, want 1", len(first), before)
	}

	next := make([]*appendRequest, 2*groupcommit.Company)
	for i := range next {
		next[i] = request(len(first) + i)
	}
	for _, r := range next[1:] { // ready to run, not yet run
		go func() { _ = s.enqueue(ctx, r) }()
	}
	if err := s.enqueue(ctx, next[0]); err != nil {
		t.Fatal(err)
	}
	wait(next)
	if got := s.commits.Load() - before; got != 1 {
		t.Fatalf("%d appends took %d commits, want 1", len(next), got)
	}
}

// TestCheckpointerCopiesTheWAL checks that committed events reach the
// database file itself while the store is open: the writer never
// checkpoints, so only the background checkpointer can grow the file.
func TestCheckpointerCopiesTheWAL(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	defer s.Close()
	before := fileSize(t, path)
	// Random bytes in base64: data compression cannot shrink it.
	random := make([]byte, 48<<10)
	_, _ = rand.Read(random)
	big := domain.EventData{Type: "test.v1", Data: []byte(fmt.Sprintf("%q", base64.StdEncoding.EncodeToString(random)))}
	for i := range 8 {
		big.ID = uuid.NewString()
		if _, err := s.Append(ctx, fmt.Sprintf("delivery-%d", i), domain.NoStream(), big); err != nil {
			t.Fatal(err)
		}
	}
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if size := fileSize(t, path); size <= before+4*64<<10 {
			return fmt.Errorf("database file %d bytes, %d before: the checkpointer has not copied the WAL into it", size, before)
		}
		return nil
	})
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestAcknowledgedAppendsAreInTheFiles copies the database and its WAL while
// the store is still open, as a crash would leave them, and checks that every
// acknowledged append is in the copy: durability does not wait for Close or
// for the checkpointer.
func TestAcknowledgedAppendsAreInTheFiles(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	s := openAt(t, path, Options{})
	defer s.Close()
	const n = 20
	var acked []string
	for i := range n {
		e := event(fmt.Sprint(i))
		if _, err := s.Append(ctx, fmt.Sprintf("delivery-%d", i%3), domain.Any(), e); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, e.ID)
	}

	crashed := filepath.Join(t.TempDir(), "events.db")
	for _, suffix := range []string{"-wal", ""} { // the WAL first: it is what a commit writes
		copyFile(t, path+suffix, crashed+suffix)
	}
	c := openAt(t, crashed, Options{})
	defer c.Close()
	all, err := c.ReadAll(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("copy holds %d events, want the %d acknowledged", len(all), n)
	}
	for i, e := range all {
		if e.ID != acked[i] {
			t.Fatalf("copy: event %d is %s, want %s", i, e.ID, acked[i])
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestQueuedAppendOrdersLaterAppends queues appends that create streams and,
// before waiting for any of them, appends right after each one from other
// goroutines: every later append must find its stream's first event, the
// waits report what Append would have, and waiting twice gives the same.
func TestQueuedAppendOrdersLaterAppends(t *testing.T) {
	ctx := t.Context()
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	defer s.Close()
	const n = 50
	waits := make([]func() (domain.AppendResult, error), n)
	errs := make(chan error, n)
	for i := range n {
		stream := fmt.Sprintf("delivery-q%d", i)
		wait, err := s.QueueAppend(ctx, stream, domain.NoStream(), event("first"), event("second"))
		if err != nil {
			t.Fatalf("QueueAppend(%s): %v", stream, err)
		}
		waits[i] = wait
		go func() {
			res, err := s.Append(ctx, stream, domain.Exact(1), event("third"))
			if err == nil && res.NextRevision != 2 {
				err = fmt.Errorf("landed at revision %d, want 2", res.NextRevision)
			}
			if err != nil {
				err = fmt.Errorf("append after queued %s: %w", stream, err)
			}
			errs <- err
		}()
	}
	for i, wait := range waits {
		res, err := wait()
		if err != nil || res.NextRevision != 1 {
			t.Errorf("queued append %d = %+v, %v; want revision 1", i, res, err)
		}
		if again, err2 := wait(); again != res || err2 != err {
			t.Errorf("second wait of %d = %+v, %v; first gave %+v, %v", i, again, err2, res, err)
		}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// A queued append is refused like Append would refuse it.
	wait, err := s.QueueAppend(ctx, "delivery-q0", domain.NoStream(), event("conflict"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait(); !errors.Is(err, domain.ErrWrongExpectedRevision) {
		t.Errorf("queued conflicting append: %v, want a wrong expected revision", err)
	}
}

// TestSubscriptionFromTailEqualsTheDatabase receives live while appends of
// every kind commit (several events per append, conflicts, idempotent
// retries), so that subscriber is served from the in-memory tail, and checks
// that it got exactly what ReadAll reads back from the database. A second
// subscriber starts from 0 once the log is longer than the tail, so it reads
// the old part from the database and then switches to the tail.
func TestSubscriptionFromTailEqualsTheDatabase(t *testing.T) {
	ctx := t.Context()
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	defer s.Close()
	const appends = tailMaxEvents + 100 // two events each: more than the tail holds
	receive := func(name string, sub domain.Subscription) <-chan []domain.RecordedEvent {
		out := make(chan []domain.RecordedEvent, 1)
		go func() {
			defer sub.Close()
			var got []domain.RecordedEvent
			for len(got) < 2*appends {
				evs, err := sub.Recv(ctx)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					break
				}
				got = append(got, evs...)
			}
			out <- got
		}()
		return out
	}
	live, err := s.SubscribeAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	liveGot := receive("live", live)

	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			for i := w; i < appends; i += 4 {
				stream := fmt.Sprintf("delivery-t%d", i)
				evs := []domain.EventData{event("a"), event("b")}
				if _, err := s.Append(ctx, stream, domain.NoStream(), evs...); err != nil {
					errs <- err
					return
				}
				// A retry of the same events writes nothing; a conflict neither.
				if _, err := s.Append(ctx, stream, domain.NoStream(), evs...); err != nil {
					errs <- fmt.Errorf("idempotent retry: %w", err)
					return
				}
				if _, err := s.Append(ctx, stream, domain.NoStream(), event("c")); !errors.Is(err, domain.ErrWrongExpectedRevision) {
					errs <- fmt.Errorf("conflict: %v", err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want, err := s.ReadAll(ctx, 0, 2*appends+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 2*appends {
		t.Fatalf("log holds %d events, want %d", len(want), 2*appends)
	}
	late, err := s.SubscribeAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, gotc := range map[string]<-chan []domain.RecordedEvent{"live": liveGot, "late": receive("late", late)} {
		got := <-gotc
		if !reflect.DeepEqual(got, want) {
			for i := range want {
				if i >= len(got) || !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("%s subscriber: event %d differs:\n got %+v\nwant %+v", name, i, got[i], want[i])
				}
			}
			t.Fatalf("%s subscriber got %d events, want %d", name, len(got), len(want))
		}
	}
	if n := len(s.tail.events); n == 0 || n > 2*tailMaxEvents || s.tail.events[n-1].Position != want[len(want)-1].Position {
		t.Errorf("tail holds %d events, up to %d; want at most %d, up to the last", n, s.tail.events[n-1].Position, 2*tailMaxEvents)
	}
	if s.tail.events[0].Position == 1 {
		t.Error("the tail was never trimmed")
	}
}

func TestTailAfter(t *testing.T) {
	var tl tail
	batch := func(from, to uint64) []domain.RecordedEvent {
		var evs []domain.RecordedEvent
		for p := from; p <= to; p++ {
			evs = append(evs, domain.RecordedEvent{Position: p})
		}
		return evs
	}
	tl.add(batch(11, 13))
	tl.add(batch(14, 20))
	tests := []struct {
		after    uint64
		max      int
		from, to uint64 // 0, 0: not held
	}{
		{after: 9, max: 10},                    // 10 is older than the tail
		{after: 10, max: 10, from: 11, to: 20}, // right before the first held
		{after: 12, max: 3, from: 13, to: 15},  // bounded by max
		{after: 19, max: 10, from: 20, to: 20}, // the last one
		{after: 20, max: 10},                   // nothing newer
	}
	for _, tt := range tests {
		evs, ok := tl.after(tt.after, tt.max)
		if ok != (tt.from != 0) {
			t.Errorf("after(%d): ok = %v", tt.after, ok)
			continue
		}
		if ok && (evs[0].Position != tt.from || evs[len(evs)-1].Position != tt.to || len(evs) != int(tt.to-tt.from+1)) {
			t.Errorf("after(%d, %d) = %d..%d (%d), want %d..%d", tt.after, tt.max, evs[0].Position, evs[len(evs)-1].Position, len(evs), tt.from, tt.to)
		}
	}
	// A batch that does not follow replaces the tail instead of leaving a gap.
	tl.add(batch(30, 31))
	if evs, ok := tl.after(29, 10); !ok || len(evs) != 2 {
		t.Errorf("after a gap: %v, %v", evs, ok)
	}
	if _, ok := tl.after(15, 10); ok {
		t.Error("positions before the gap are still served")
	}
}

// TestTailHandsOnPayloads: a subscriber fed from the tail gets the payload
// the event was encoded from (domain.EventData.Payload); a read from the
// database has none, and the stored data is the same either way.
func TestTailHandsOnPayloads(t *testing.T) {
	ctx := t.Context()
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	defer s.Close()
	codec := domain.NewCodec()
	given := domain.InspectorCreated{InspectorID: "insp-1", IdleTTLMs: 1000}
	e, err := codec.Encode(uuid.NewString(), given, time.Now(), domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := s.SubscribeAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := s.Append(ctx, domain.InspectorStream("insp-1"), domain.NoStream(), e); err != nil {
		t.Fatal(err)
	}
	live, err := sub.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0].Payload != domain.Event(given) {
		t.Fatalf("live: %+v, want the payload %+v", live, given)
	}
	read, err := s.ReadAll(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != 1 || read[0].Payload != nil || string(read[0].Data) != string(live[0].Data) {
		t.Fatalf("read back: %+v", read)
	}
}

// TestTailCountsPayloads: an event that carries its payload counts its data
// twice toward the tail's bound in bytes, so the bound holds with the
// payloads in memory: the tail keeps half as many such events.
func TestTailCountsPayloads(t *testing.T) {
	data := make([]byte, 8<<10)
	fill := func(payload domain.Event) int {
		var tl tail
		for i := range 4 * tailMaxEvents {
			tl.add([]domain.RecordedEvent{{Position: uint64(i + 1), EventData: domain.EventData{ID: "e", Type: "t", Data: data, Payload: payload}}})
			if tl.bytes > 2*tailMaxBytes+2*len(data)+256 {
				t.Fatalf("tail holds %d bytes after %d events, over its bound", tl.bytes, i+1)
			}
		}
		return len(tl.events)
	}
	without, with := fill(nil), fill(domain.InspectorCreated{InspectorID: "i"})
	if with >= without || with == 0 {
		t.Errorf("the tail keeps %d events with payloads and %d without: want fewer with", with, without)
	}
}

// TestSubscriptionReadsBackBoundedBatches: a subscription behind the
// in-memory tail reads back from the database at most
// subscriptionBatchBytes of event data a Recv (at least one event), in
// order, until it has every event. Before, it read SubscriptionBatch events
// whatever their size: 24 events of 1 MiB came back in one batch of 24 MiB.
func TestSubscriptionReadsBackBoundedBatches(t *testing.T) {
	ctx := t.Context()
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	defer s.Close()
	const events, size = 24, 1 << 20
	for i := range events {
		data := fmt.Appendf(nil, "%q", strings.Repeat(string(rune('a'+i%26)), size))
		if _, err := s.Append(ctx, fmt.Sprintf("delivery-big%d", i), domain.NoStream(),
			domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := s.SubscribeAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got, largest int
	next := uint64(1)
	for got < events {
		evs, err := sub.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var held int
		for _, e := range evs {
			if e.Position != next {
				t.Fatalf("event at %d, want %d", e.Position, next)
			}
			next++
			held += len(e.Data)
		}
		largest = max(largest, held)
		got += len(evs)
	}
	if largest > subscriptionBatchBytes+size+2 {
		t.Errorf("a Recv returned %d bytes of data, want at most %d and one event", largest, subscriptionBatchBytes)
	}
}
