package esdb

import (
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/esdbtest"
)

// serveMem runs the in-memory stand-in for the streams service and opens
// the adapter on it.
func serveMem(t *testing.T, opts esdbtest.Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), esdbtest.Start(t, opts).URL(), Options{})
	if err != nil {
		t.Fatalf("open on the in-memory service: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestChainThroughTheClient runs the chain's scenario (checkChain)
// through the real client against the in-memory stand-in
// (internal/esdbtest), which holds nothing else, so the counts are exact.
func TestChainThroughTheClient(t *testing.T) {
	checkChain(t, serveMem(t, esdbtest.Options{}), "", true)
}

// checkChain runs the adapter's chained appends, deletion, Messages,
// LastPosition and LastEvent on s, in streams named with suffix: the log
// verifies with a checkpoint kept from before a deletion, a delivery is
// proved, the port's reads hide the deletion's record, and an event
// appended past the adapter is named. alone: s holds nothing but these
// streams (a server may hold others': only ours are judged then).
func checkChain(t *testing.T, s *Store, suffix string, alone bool) {
	t.Helper()
	ctx := t.Context()
	pub, key, _ := ed25519.GenerateKey(nil)
	a, b := "delivery-a"+suffix, "delivery-b"+suffix
	twice := []domain.EventData{chainEvent("forward.requested.v1", `{"n":1}`), chainEvent("forward.responded.v1", `{"status":200}`)}
	for _, step := range []struct {
		stream   string
		expected domain.ExpectedRevision
		events   []domain.EventData
	}{
		{a, domain.NoStream(), []domain.EventData{chainEvent("delivery.received.v1", `{"body":"aGk="}`)}},
		{a, domain.Exact(0), twice},
		{b, domain.Any(), []domain.EventData{chainEvent("delivery.received.v1", `{"body":"eW8="}`)}},
		{a, domain.Any(), twice}, // a retry: written once
		{b, domain.StreamExists(), []domain.EventData{chainEvent("forward.requested.v1", `{"n":2}`)}},
	} {
		if _, err := s.Append(ctx, step.stream, step.expected, step.events...); err != nil {
			t.Fatalf("append to %s: %v", step.stream, err)
		}
	}
	if _, err := s.Append(ctx, b, domain.Exact(0), chainEvent("forward.requested.v1", `{}`)); !errors.Is(err, domain.ErrWrongExpectedRevision) {
		t.Fatalf("an append behind the head: %v", err)
	}
	if evs, err := s.ReadStream(ctx, a, 0, 10); err != nil || len(evs) != 3 {
		t.Fatalf("%s after a retried append: %d events, %v", a, len(evs), err)
	}
	sign := func() evidence.Checkpoint {
		t.Helper()
		pos, err := s.LastPosition(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var signer evidence.HeadsSigner
		if err := signer.Advance(ctx, s, pos); err != nil {
			t.Fatal(err)
		}
		c := signer.Sign(key)
		if _, err := s.Append(ctx, domain.CheckpointStream, domain.Any(), checkpointEvent(t, c, key)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	kept := sign()
	if _, err := s.DeleteStream(ctx, a, domain.Any()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, b, domain.Any(), chainEvent("forward.responded.v1", `{"status":201}`)); err != nil {
		t.Fatal(err)
	}
	c := sign()
	ours := func(r evidence.Report) []evidence.Problem {
		var out []evidence.Problem
		for _, p := range r.Problems {
			if p.Stream == a || p.Stream == b || p.Stream == "" {
				out = append(out, p)
			}
		}
		return out
	}
	r, err := evidence.VerifyStreams(ctx, s, evidence.Options{PublicKey: pub, Kept: []evidence.Checkpoint{kept}})
	if err != nil || len(ours(r)) > 0 || r.Deletions < 1 {
		t.Fatalf("verify: %+v, %v", r, err)
	}
	// The stand-in keeps a deleted stream's events in $all (a server may
	// until a scavenge; TestChainVerifiesOverWhatTheAdapterWrites has
	// both): 3 of delivery-a, its tombstone, 3 of delivery-b, 2
	// checkpoints.
	if alone && (r.Deletions != 1 || r.Removed != 3 || r.Checkpoints != 2 || r.Events != 9) {
		t.Fatalf("verify counted %+v", r)
	}
	last, err := s.LastEvent(ctx, domain.CheckpointStream)
	if err != nil || last.Type != domain.TypeLogCheckpointed || last.Position <= c.Position {
		t.Fatalf("LastEvent of the checkpoints: %+v, %v", last, err)
	}
	p, err := evidence.ProveStream(ctx, s, b, c, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.VerifyStreamProof(p, pub); err != nil || len(p.Events) != 3 {
		t.Fatalf("a proof of %s: %d events, %v", b, len(p.Events), err)
	}
	if alone { // on a server the log's first hundred events are others'
		all, err := s.ReadAll(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range all {
			if e.Stream == removedStream(a) {
				t.Fatal("ReadAll hands out the deletion's record")
			}
		}
	}

	plain, _ := toProposed([]domain.EventData{chainEvent("forward.failed.v1", `{}`)})
	if _, err := s.client.AppendToStream(ctx, b, esdbRevision(2), plain...); err != nil {
		t.Fatal(err)
	}
	r, err = evidence.VerifyStreams(ctx, s, evidence.Options{PublicKey: pub})
	if err != nil || len(ours(r)) == 0 || ours(r)[0].Kind != evidence.EventInserted || ours(r)[0].Stream != b {
		t.Fatalf("verify after an append past the adapter: %+v, %v", ours(r), err)
	}
}

func esdbRevision(r uint64) esdb.AppendToStreamOptions {
	return esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(r)}
}

// TestDeletionWithoutStreamPositions: on a server whose stream reads carry
// no commit positions the deletion still happens, without a record, and
// verification names its tombstone.
func TestDeletionWithoutStreamPositions(t *testing.T) {
	ctx := t.Context()
	s := serveMem(t, esdbtest.Options{Unplaced: true})
	if _, err := s.Append(ctx, "delivery-a", domain.NoStream(), chainEvent("delivery.received.v1", `{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "delivery-b", domain.NoStream(), chainEvent("delivery.received.v1", `{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteStream(ctx, "delivery-a", domain.Any()); err != nil {
		t.Fatalf("delete: %v", err)
	}
	r, err := evidence.VerifyStreams(ctx, s, evidence.Options{})
	if err != nil || r.OK() || r.Problems[0].Kind != evidence.EventInserted || r.Problems[0].Stream != "delivery-a" {
		t.Fatalf("verify: %+v, %v", r.Problems, err)
	}
}
