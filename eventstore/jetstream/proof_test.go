package jetstream

import (
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/natstest"
)

// TestJetStreamDeliveryProof proves a delivery of a real JetStream log
// against a checkpoint over its stream heads: the proof verifies with the
// public key alone, still does after another stream was deleted, and one
// cut from a log edited past the relay is refused, naming the edit.
func TestJetStreamDeliveryProof(t *testing.T) {
	ctx := testContext(t)
	l := newTamperable(t, natstest.Start(t))
	pub := l.key.Public().(ed25519.PublicKey)
	l.seed(t)
	cp := l.checkpoint(t, l.key)

	last, err := l.s.LastEvent(ctx, domain.CheckpointStream)
	if err != nil || last.Type != domain.TypeLogCheckpointed {
		t.Fatalf("LastEvent of the checkpoints: %+v, %v", last, err)
	}
	if _, err := l.s.LastEvent(ctx, "delivery-none"); !errors.Is(err, domain.ErrStreamNotFound) {
		t.Fatalf("LastEvent of no stream: %v", err)
	}

	p, err := evidence.ProveStream(ctx, l.s, "delivery-a", cp, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.VerifyStreamProof(p, pub); err != nil {
		t.Fatalf("a fresh proof: %v", err)
	}
	if len(p.Events) != 4 || p.Events[3].ID != l.ids["a3"] || p.Checkpoint.TreeSize != 2 {
		t.Fatalf("the proof holds %d events (last %s) under %d heads, want delivery-a's 4 under 2", len(p.Events), p.Events[len(p.Events)-1].ID, p.Checkpoint.TreeSize)
	}

	// A delivery with an event after the newest checkpoint waits for the
	// next one.
	mustAppend(t, l.s, "delivery-b", domain.Any(), l.event("b2", "delivery.answered.v1", `{"status":201}`))
	if _, err := evidence.ProveStream(ctx, l.s, "delivery-b", cp, 1000); !errors.Is(err, evidence.ErrNoCheckpointYet) {
		t.Fatalf("a delivery newer than the checkpoint: %v, want ErrNoCheckpointYet", err)
	}

	// Retention deletes delivery-a after the checkpoint signed it: the
	// tombstone's record keeps the checkpoint's tree, and a proof of
	// delivery-b against the next checkpoint holds.
	if _, err := l.s.DeleteStream(ctx, "delivery-a", domain.Any()); err != nil {
		t.Fatal(err)
	}
	if _, err := evidence.ProveStream(ctx, l.s, "delivery-a", cp, 1000); !errors.Is(err, evidence.ErrStreamNotProvable) {
		t.Fatalf("a deleted delivery: %v", err)
	}
	cp2 := l.checkpoint(t, l.key)
	pb, err := evidence.ProveStream(ctx, l.s, "delivery-b", cp2, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.VerifyStreamProof(pb, pub); err != nil || len(pb.Events) != 3 {
		t.Fatalf("delivery-b after a deletion: %d events, %v", len(pb.Events), err)
	}

	// A message published again out of its stream's order: the proof is
	// refused, the log needs verifying.
	m := l.raw(t, "b0")
	l.deleteMsg(t, m.Sequence)
	l.republish(t, m, m.Data)
	if _, err := evidence.ProveStream(ctx, l.s, "delivery-b", l.checkpoint(t, l.key), 1000); err == nil {
		t.Fatal("proved a stream whose first message was moved to its end")
	}

	// A body byte of delivery-c's newest event changed past the relay (the
	// message deleted and published again with its headers): the proof
	// carries the stored leaf, which the changed body no longer hashes to.
	mustAppend(t, l.s, "delivery-c", domain.NoStream(), l.event("c0", "delivery.received.v1", `{"body":"eA==","size":1}`))
	mustAppend(t, l.s, "delivery-c", domain.Exact(0), l.event("c1", "delivery.answered.v1", `{"status":201}`))
	m = l.raw(t, "c1")
	l.deleteMsg(t, m.Sequence)
	l.republish(t, m, edited(t, m.Data, `"status":201`, `"status":202`))
	bad, err := evidence.ProveStream(ctx, l.s, "delivery-c", l.checkpoint(t, l.key), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var pe *evidence.ProofError
	if err := evidence.VerifyStreamProof(bad, pub); !errors.As(err, &pe) || pe.Kind != evidence.DataChanged {
		t.Fatalf("a proof of an edited log: %v, want %q", err, evidence.DataChanged)
	}
}
