package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
)

// guard bounds every test so a broken adapter fails instead of hanging; it is
// a safety net, not a timing assertion.
const guard = 30 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	t.Cleanup(cancel)
	return ctx
}

// newStream returns a stream name no other test (or earlier run against a
// shared server) uses.
func newStream(kind string) string { return kind + "-" + uuid.NewString() }

// newEvent returns an event with a fresh ID and a small JSON payload.
func newEvent(label string) domain.EventData {
	return domain.EventData{
		ID:   uuid.NewString(),
		Type: "storetest.happened.v1",
		Data: []byte(fmt.Sprintf(`{"label":%q}`, label)),
		Metadata: domain.Metadata{
			SchemaVersion: 1,
			OccurredAt:    time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		},
	}
}

func newEvents(n int, label string) []domain.EventData {
	out := make([]domain.EventData, n)
	for i := range out {
		out[i] = newEvent(fmt.Sprintf("%s-%d", label, i))
	}
	return out
}

// expectedBefore is the condition for appending the event of revision i when
// the stream holds exactly the events before it.
func expectedBefore(i int) domain.ExpectedRevision {
	if i == 0 {
		return domain.NoStream()
	}
	return domain.Exact(uint64(i - 1))
}

func mustAppend(t *testing.T, ctx context.Context, s domain.EventStore, stream string, expected domain.ExpectedRevision, events ...domain.EventData) domain.AppendResult {
	t.Helper()
	res, err := s.Append(ctx, stream, expected, events...)
	if err != nil {
		t.Fatalf("Append(%s, %s): %v", stream, expected, err)
	}
	return res
}

func mustLast(t *testing.T, ctx context.Context, s domain.EventStore) uint64 {
	t.Helper()
	last, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatalf("LastPosition: %v", err)
	}
	return last
}

func mustReadStream(t *testing.T, ctx context.Context, s domain.EventStore, stream string, from uint64, max int) []domain.RecordedEvent {
	t.Helper()
	evs, err := s.ReadStream(ctx, stream, from, max)
	if err != nil {
		t.Fatalf("ReadStream(%s, %d, %d): %v", stream, from, max, err)
	}
	return evs
}

// readOwn reads the whole log after `after` page by page and keeps the events
// of the given streams, so it works on a shared store too.
func readOwn(t *testing.T, ctx context.Context, s domain.EventStore, after uint64, streams ...string) []domain.RecordedEvent {
	t.Helper()
	want := make(map[string]bool, len(streams))
	for _, st := range streams {
		want[st] = true
	}
	var out []domain.RecordedEvent
	for {
		page, err := s.ReadAll(ctx, after, 100)
		if err != nil {
			t.Fatalf("ReadAll(%d, 100): %v", after, err)
		}
		if len(page) == 0 {
			return out
		}
		for _, e := range page {
			if e.Position <= after {
				t.Fatalf("ReadAll(%d) returned position %d, not after it", after, e.Position)
			}
			if want[e.Stream] {
				out = append(out, e)
			}
		}
		after = page[len(page)-1].Position
	}
}

// checkIncreasing fails unless every position lies after `after` and the
// positions follow the log's order (see orderErr).
func (s *suite) checkIncreasing(t *testing.T, after uint64, evs []domain.RecordedEvent) {
	t.Helper()
	prev := after
	for i, e := range evs {
		if msg := orderErr(after, prev, e.Position, s.f.Guarantees.GapFreePositions); msg != "" {
			t.Fatalf("event %d: %s", i, msg)
		}
		prev = e.Position
	}
}

// orderErr describes how position pos, read after prev in a read or
// subscription that starts after `after`, breaks the log's order, or returns
// "" when it does not. Positions strictly increase (the port's rule, events
// of one append included); with gap-free positions each is exactly one more
// than the one before.
func orderErr(after, prev, pos uint64, gapFree bool) string {
	switch {
	case pos <= after:
		return fmt.Sprintf("position %d, want after %d", pos, after)
	case gapFree && pos != prev+1:
		return fmt.Sprintf("position %d after %d, want %d (gap-free)", pos, prev, prev+1)
	case pos <= prev:
		return fmt.Sprintf("position %d after %d, want strictly increasing", pos, prev)
	}
	return ""
}

// diffEvent describes how got differs from the event that was appended, or
// returns "" when it matches.
func diffEvent(got domain.RecordedEvent, want domain.EventData) string {
	switch {
	case got.ID != want.ID:
		return fmt.Sprintf("ID %s, want %s", got.ID, want.ID)
	case got.Type != want.Type:
		return fmt.Sprintf("%s: Type %q, want %q", want.ID, got.Type, want.Type)
	case !bytes.Equal(got.Data, want.Data):
		return fmt.Sprintf("%s: Data %q, want %q", want.ID, got.Data, want.Data)
	}
	gm, wm := got.Metadata, want.Metadata
	switch {
	case gm.SchemaVersion != wm.SchemaVersion:
		return fmt.Sprintf("%s: SchemaVersion %d, want %d", want.ID, gm.SchemaVersion, wm.SchemaVersion)
	case !gm.OccurredAt.Equal(wm.OccurredAt):
		return fmt.Sprintf("%s: OccurredAt %s, want %s", want.ID, gm.OccurredAt.Format(time.RFC3339Nano), wm.OccurredAt.Format(time.RFC3339Nano))
	case gm.OccurredAt.Location() != time.UTC:
		return fmt.Sprintf("%s: OccurredAt in %s, want UTC", want.ID, gm.OccurredAt.Location())
	case gm.CorrelationID != wm.CorrelationID:
		return fmt.Sprintf("%s: CorrelationID %q, want %q", want.ID, gm.CorrelationID, wm.CorrelationID)
	case gm.CausationID != wm.CausationID:
		return fmt.Sprintf("%s: CausationID %q, want %q", want.ID, gm.CausationID, wm.CausationID)
	}
	return ""
}

// checkEvents compares a read against what was appended, in order.
func checkEvents(t *testing.T, what string, got []domain.RecordedEvent, want []domain.EventData) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		if d := diffEvent(got[i], want[i]); d != "" {
			t.Fatalf("%s: event %d: %s", what, i, d)
		}
	}
}

// receiver collects a subscription's events of the given streams and checks,
// batch by batch, that positions rise and no event comes twice.
type receiver struct {
	t       *testing.T
	strict  bool // positions rise by one (gap-free); otherwise they only must rise
	sub     domain.Subscription
	streams map[string]bool
	after   uint64 // the subscription's start: nothing at or before it may come
	last    uint64
	seen    map[string]bool
	got     []domain.RecordedEvent
}

func (s *suite) newReceiver(t *testing.T, sub domain.Subscription, after uint64, streams ...string) *receiver {
	r := &receiver{t: t, strict: s.f.Guarantees.GapFreePositions, sub: sub, streams: map[string]bool{}, after: after, last: after, seen: map[string]bool{}}
	for _, st := range streams {
		r.streams[st] = true
	}
	return r
}

// until receives until n events of the receiver's streams have arrived in
// total, and returns them all.
func (r *receiver) until(ctx context.Context, n int) []domain.RecordedEvent {
	r.t.Helper()
	for len(r.got) < n {
		batch, err := r.sub.Recv(ctx)
		if err != nil {
			r.t.Fatalf("Recv after %d of %d events: %v", len(r.got), n, err)
		}
		if len(batch) == 0 {
			r.t.Fatal("Recv returned an empty batch without an error")
		}
		for _, e := range batch {
			if msg := orderErr(r.after, r.last, e.Position, r.strict); msg != "" {
				r.t.Fatalf("Recv: %s", msg)
			}
			r.last = e.Position
			if !r.streams[e.Stream] {
				continue
			}
			if r.seen[e.ID] {
				r.t.Fatalf("Recv: event %s (position %d) delivered twice", e.ID, e.Position)
			}
			r.seen[e.ID] = true
			r.got = append(r.got, e)
		}
	}
	if len(r.got) > n {
		r.t.Fatalf("Recv: %d events, want %d", len(r.got), n)
	}
	return r.got
}

// recvErr runs Recv in a goroutine until it fails and returns that error,
// so the caller can act (cancel, close) while Recv is blocked.
func recvErr(ctx context.Context, sub domain.Subscription) <-chan error {
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := sub.Recv(ctx); err != nil {
				errc <- err
				return
			}
		}
	}()
	return errc
}

func waitErr(t *testing.T, errc <-chan error) error {
	t.Helper()
	timer := time.NewTimer(guard)
	defer timer.Stop()
	select {
	case err := <-errc:
		return err
	case <-timer.C:
		t.Fatal("Recv did not return")
		return nil
	}
}

func wantWrongRevision(t *testing.T, err error, stream string, expected domain.ExpectedRevision, actual uint64, exists bool) {
	t.Helper()
	if !errors.Is(err, domain.ErrWrongExpectedRevision) {
		t.Fatalf("err = %v, want ErrWrongExpectedRevision", err)
	}
	var wrong *domain.WrongExpectedRevisionError
	if !errors.As(err, &wrong) {
		t.Fatalf("err = %v (%T), want a *domain.WrongExpectedRevisionError", err, err)
	}
	if wrong.Stream != stream || wrong.Expected != expected || wrong.Exists != exists || (exists && wrong.Actual != actual) {
		t.Fatalf("conflict = %+v, want stream %s expected %s actual %d exists %v", *wrong, stream, expected, actual, exists)
	}
}
