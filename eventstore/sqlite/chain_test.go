package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
)

// chainSource reads the store as evidence does.
type chainSource struct{ s *Store }

func (c chainSource) Chain(ctx context.Context, after uint64, limit int) ([]evidence.ChainLink, error) {
	return c.s.ReadChain(ctx, after, limit)
}

func (c chainSource) Events(ctx context.Context, after uint64, limit int) ([]evidence.Event, error) {
	return c.s.ReadStored(ctx, after, limit)
}

func appendN(t *testing.T, s *Store, stream string, n int) {
	t.Helper()
	for i := range n {
		e := domain.EventData{ID: uuid.NewString(), Type: "delivery.received.v1", Data: []byte(`{"i":1}`),
			Metadata: domain.Metadata{SchemaVersion: 1, OccurredAt: time.Now()}}
		exp := domain.Any()
		if i == 0 {
			exp = domain.NoStream()
		}
		if _, err := s.Append(t.Context(), stream, exp, e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChainSurvivesRetention: deleting a stream removes its events but not
// their links, so the chain still verifies, and the report counts what the
// deletion removed.
func TestChainSurvivesRetention(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	t.Cleanup(func() { s.Close() })
	appendN(t, s, "delivery-a", 3)
	appendN(t, s, "delivery-b", 2)
	if _, err := s.DeleteStream(t.Context(), "delivery-a", domain.Any()); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, "delivery-c", 1)
	r, err := evidence.Verify(t.Context(), chainSource{s}, evidence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Removed != 3 || r.Deletions != 1 || r.Head != 7 {
		t.Fatalf("report %+v, want OK with 3 events removed by 1 deletion, head 7", r)
	}
}

// TestChainOfConcurrentAppends: the writer links what it wrote from
// memory; appends of several events, shared batches, refused appends and
// idempotent retries must leave every link equal to what the stored events
// give.
func TestChainOfConcurrentAppends(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	t.Cleanup(func() { s.Close() })
	md := domain.Metadata{SchemaVersion: 1, OccurredAt: time.Now()}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				stream := fmt.Sprintf("delivery-%d-%d", g, i)
				evs := make([]domain.EventData, 1+i%3)
				for j := range evs {
					evs[j] = domain.EventData{ID: uuid.NewString(), Type: "delivery.received.v1", Data: []byte(fmt.Sprintf(`{"g":%d,"j":%d}`, g, j)), Metadata: md}
				}
				if _, err := s.Append(t.Context(), stream, domain.NoStream(), evs...); err != nil {
					t.Error(err)
					return
				}
				// The same append again (an idempotent retry) and one the
				// stream's head refuses: neither writes, neither is linked.
				if _, err := s.Append(t.Context(), stream, domain.NoStream(), evs...); err != nil {
					t.Error(err)
					return
				}
				_, _ = s.Append(t.Context(), stream, domain.NoStream(), domain.EventData{ID: uuid.NewString(), Type: "delivery.received.v1", Data: []byte(`{}`), Metadata: md})
			}
		}()
	}
	wg.Wait()
	r, err := evidence.Verify(t.Context(), chainSource{s}, evidence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 16 × (7 × 1 + 7 × 2 + 6 × 3) events
	if !r.OK() || r.Events != 16*39 || r.Head != 16*39 {
		t.Fatalf("report %+v, want OK with %d events", r, 16*39)
	}
}

// TestChainOfAnOlderLog: a log written before the chain existed (schema 2)
// is chained as it stands when a relay of this version opens it.
func TestChainOfAnOlderLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	appendN(t, s, "delivery-a", 4)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DROP TABLE removed_links", "ALTER TABLE events DROP COLUMN leaf", "ALTER TABLE events DROP COLUMN link", "PRAGMA user_version = 2"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s = openAt(t, path, Options{})
	t.Cleanup(func() { s.Close() })
	r, err := evidence.Verify(t.Context(), chainSource{s}, evidence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Events != 4 || r.Head != 4 {
		t.Fatalf("report %+v, want 4 events chained", r)
	}
	appendN(t, s, "delivery-b", 1)
	if r, _ := evidence.Verify(t.Context(), chainSource{s}, evidence.Options{}); !r.OK() || r.Head != 5 {
		t.Fatalf("after a new append: %+v", r)
	}
}

// TestCheckRevisions: a stream whose revisions skip one, or do not start
// at 0, is reported; whole streams and tombstones are not; the same
// whatever the number of streams a query reads.
func TestCheckRevisions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	t.Cleanup(func() { s.Close() })
	appendN(t, s, "delivery-a", 3)
	appendN(t, s, "delivery-b", 2)
	appendN(t, s, "delivery-c", 2)
	if _, err := s.DeleteStream(t.Context(), "delivery-c", domain.Any()); err != nil {
		t.Fatal(err)
	}
	for _, page := range []int{1, 2, 3, revisionPage} {
		streams, problems, err := s.checkRevisions(t.Context(), 10, page)
		if err != nil || streams != 3 || len(problems) != 0 {
			t.Fatalf("whole log, %d streams a query: %d streams, problems %v, err %v", page, streams, problems, err)
		}
	}
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`UPDATE events SET revision = 7 WHERE stream = 'delivery-a' AND revision = 1`,
		`UPDATE events SET revision = revision + 5 WHERE stream = 'delivery-b'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, page := range []int{1, 2, 3, revisionPage} {
		streams, problems, err := s.checkRevisions(t.Context(), 10, page)
		if err != nil || streams != 3 || len(problems) != 2 || !strings.HasPrefix(problems[0], "delivery-a: 3 events with revisions 0 to 7") || !strings.HasPrefix(problems[1], "delivery-b:") {
			t.Fatalf("%d streams a query: %d streams, problems %q, err %v", page, streams, problems, err)
		}
		if _, problems, _ := s.checkRevisions(t.Context(), 1, page); len(problems) != 1 {
			t.Fatalf("%d streams a query, at most 1 problem: %q", page, problems)
		}
	}
}

// treeFromLinks builds the head ChainTree should return from the links the
// log holds.
func treeFromLinks(t *testing.T, s *Store) evidence.Head {
	t.Helper()
	var tree evidence.Tree
	var h evidence.Head
	for {
		links, err := s.ReadChain(t.Context(), h.Position, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(links) == 0 {
			break
		}
		for _, l := range links {
			tree.Add(l.Leaf)
			h.Position, h.Link = l.Position, l.Link
		}
	}
	h.TreeSize, h.Root = tree.Size(), tree.Root()
	return h
}

// TestChainTreeFollowsTheLog checks the tree the writer keeps against one
// built from the links read back, through concurrent batches, an append
// refused halfway (its savepoint takes its leaves back), a deleted stream
// and a reopening.
func TestChainTreeFollowsTheLog(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	check := func(when string) {
		t.Helper()
		got, err := s.ChainTree(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := treeFromLinks(t, s); got != want {
			t.Fatalf("%s: ChainTree = %+v, want %+v", when, got, want)
		}
		pos, link, err := s.ChainHead(ctx)
		if err != nil || pos != got.Position || link != got.Link {
			t.Fatalf("%s: ChainHead = %d %s %v, ChainTree's head %d %s", when, pos, link, err, got.Position, got.Link)
		}
	}
	check("empty log")
	appendN(t, s, "delivery-a", 3)
	check("first appends")

	taken := event("taken")
	if _, err := s.Append(ctx, "delivery-b", domain.NoStream(), taken); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			// Every fourth append fails at its second event, after its
			// first was inserted.
			evs := []domain.EventData{event("one"), event("two")}
			if i%4 == 0 {
				evs[1] = taken
			}
			_, _ = s.Append(ctx, fmt.Sprintf("delivery-c%d", i), domain.NoStream(), evs...)
		})
	}
	wg.Wait()
	check("concurrent batches")
	if _, err := s.DeleteStream(ctx, "delivery-a", domain.Any()); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, "delivery-d", 2)
	check("after a deleted stream")

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	defer s.Close()
	appendN(t, s, "delivery-e", 2)
	check("reopened")
	appendN(t, s, "delivery-f", 2)
	check("reopened, later appends")
}
