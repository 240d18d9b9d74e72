package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/relayhq/relay/domain"
)

func TestHeadCacheIsBounded(t *testing.T) {
	c := newHeadCache()
	total := 3*headsPerGeneration + 7
	for i := range total {
		c.put(fmt.Sprintf("s-%d", i), head{rev: uint64(i)})
	}
	if n := len(c.cur) + len(c.old); n > 2*headsPerGeneration {
		t.Fatalf("cache holds %d heads, want at most %d", n, 2*headsPerGeneration)
	}
	// The newest generation's worth is always kept.
	for i := total - headsPerGeneration; i < total; i++ {
		if h, ok := c.get(fmt.Sprintf("s-%d", i)); !ok || h.rev != uint64(i) {
			t.Fatalf("get(s-%d) = %v, %v; want revision %d", i, h, ok, i)
		}
	}
	if _, ok := c.get("s-0"); ok {
		t.Fatal("the oldest head is still cached")
	}
}

// TestStreamHeadsFollowTheLog queues appends to one stream back to back,
// so that they share batches and read the heads the batch itself wrote,
// then checks the heads after a delete and after reopening (nothing
// cached).
func TestStreamHeadsFollowTheLog(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	type step struct {
		expected domain.ExpectedRevision
		wantRev  uint64
		wantErr  error
	}
	steps := []step{
		{domain.NoStream(), 0, nil},
		{domain.Exact(0), 1, nil},
		{domain.Exact(0), 0, domain.ErrWrongExpectedRevision},
		{domain.NoStream(), 0, domain.ErrWrongExpectedRevision},
		{domain.Exact(1), 2, nil},
		{domain.Any(), 3, nil},
		{domain.Exact(3), 4, nil},
	}
	var waits []func() (domain.AppendResult, error)
	for _, st := range steps {
		w, err := s.QueueAppend(ctx, "s", st.expected, event("e"))
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
	}
	for i, w := range waits {
		res, err := w()
		st := steps[i]
		switch {
		case st.wantErr != nil && !errors.Is(err, st.wantErr):
			t.Fatalf("step %d (%s): %v, want %v", i, st.expected, err, st.wantErr)
		case st.wantErr == nil && (err != nil || res.NextRevision != st.wantRev):
			t.Fatalf("step %d (%s): %+v, %v; want revision %d", i, st.expected, res, err, st.wantRev)
		}
	}
	var wrong *domain.WrongExpectedRevisionError
	if _, err := s.Append(ctx, "s", domain.Exact(2), event("late")); !errors.As(err, &wrong) || wrong.Actual != 4 {
		t.Fatalf("Exact(2) at head 4: %v, want a conflict naming revision 4", err)
	}

	// Reopened, the store has no heads in memory: it reads them.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	defer s.Close()
	if _, err := s.Append(ctx, "s", domain.Exact(3), event("stale")); !errors.As(err, &wrong) || wrong.Actual != 4 {
		t.Fatalf("Exact(3) at head 4 after reopening: %v, want a conflict naming revision 4", err)
	}
	if res, err := s.Append(ctx, "s", domain.Exact(4), event("next")); err != nil || res.NextRevision != 5 {
		t.Fatalf("Exact(4) after reopening: %+v, %v; want revision 5", res, err)
	}
	if _, err := s.DeleteStream(ctx, "s", domain.Exact(5)); err != nil {
		t.Fatal(err)
	}
	for _, e := range []domain.ExpectedRevision{domain.Any(), domain.Exact(5), domain.Exact(0)} {
		if _, err := s.Append(ctx, "s", e, event("after delete")); !errors.Is(err, domain.ErrStreamDeleted) {
			t.Fatalf("append (%s) to a deleted stream: %v, want %v", e, err, domain.ErrStreamDeleted)
		}
	}
}
