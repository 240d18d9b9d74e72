package evidence

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"testing"
)

// memLog is a log with a chain per stream held in memory, written as the
// adapters write one: each append chains to its stream's head.
type memLog struct {
	msgs  []Message
	heads map[string]Hash
	revs  map[string]uint64
	pos   uint64
}

func (l *memLog) append(t testing.TB, stream string, types ...string) {
	t.Helper()
	if l.heads == nil {
		l.heads, l.revs = map[string]Hash{}, map[string]uint64{}
	}
	var events []Event
	for _, typ := range types {
		l.pos++
		rev := l.revs[stream]
		l.revs[stream]++
		events = append(events, Event{Position: l.pos, ID: fmt.Sprintf("id-%d", l.pos), Stream: stream, Revision: rev, Type: typ,
			Data: []byte(fmt.Sprintf(`{"n":%d}`, l.pos)), Metadata: []byte(`{"occurred_at":"2026-01-01T00:00:00Z"}`)})
	}
	leaves, links := ChainEvents(l.heads[stream], events)
	l.heads[stream] = links[len(links)-1]
	l.msgs = append(l.msgs, Message{Stream: stream, Events: events, Leaves: leaves, Links: links})
}

func (l *memLog) Messages(_ context.Context, after uint64, limit int) ([]Message, error) {
	var out []Message
	for _, m := range l.msgs {
		if m.last() > after && len(out) < limit {
			out = append(out, m)
		}
	}
	return out, nil
}

// checkpoint signs the heads at the log's end.
func (l *memLog) checkpoint(t testing.TB, key ed25519.PrivateKey) Checkpoint {
	t.Helper()
	var s HeadsSigner
	if err := s.Advance(context.Background(), l, l.pos); err != nil {
		t.Fatal(err)
	}
	return s.Sign(key)
}

// TestStreamProof proves a stream of a log of 10 000 streams, checks it,
// and makes each edit a third party could make to the file: each is named.
func TestStreamProof(t *testing.T) {
	ctx := context.Background()
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	const streams = 10000
	l := &memLog{}
	for i := range streams {
		l.append(t, fmt.Sprintf("delivery-%05d", i), "delivery.received.v1")
		if i == 5000 {
			l.append(t, "delivery-05000-target", "delivery.received.v1", "forward.requested.v1")
		}
	}
	l.append(t, "delivery-05000-target", "forward.responded.v1")
	c := l.checkpoint(t, key)
	p, err := ProveStream(ctx, l, "delivery-05000-target", c, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyStreamProof(p, pub); err != nil {
		t.Fatalf("a fresh proof does not verify: %v", err)
	}
	if len(p.Events) != 3 || p.Events[0].Revision != 0 || p.Events[2].Type != "forward.responded.v1" {
		t.Fatalf("the proof holds %+v, want the stream's 3 events", p.Events)
	}
	// A log of 10 001 streams is a tree 14 high: the proof carries one
	// hash per level, not one per stream (the stream's head is leaf 5001,
	// in the tree's perfect left half of 8192, so its path is the longest).
	if want := bits.Len64(streams); p.HeadIndex != 5001 || len(p.Path) != want {
		t.Fatalf("the head is leaf %d and its path has %d hashes for %d streams, want leaf 5001 and %d", p.HeadIndex, len(p.Path), streams+1, want)
	}

	_, otherKey, _ := ed25519.GenerateKey(nil)
	cases := []struct {
		name string
		edit func(*StreamProof)
		kind string
	}{
		{"a body byte", func(p *StreamProof) { p.Events[1].Data[2] ^= 1 }, DataChanged},
		{"a metadata byte", func(p *StreamProof) { p.Events[0].Metadata[3] ^= 1 }, DataChanged},
		{"a type", func(p *StreamProof) { p.Events[2].Type = "forward.failed.v1" }, DataChanged},
		{"an event left out", func(p *StreamProof) { p.Events = append(p.Events[:1:1], p.Events[2]) }, ChainBroken},
		{"a link", func(p *StreamProof) { p.Events[1].Link = Hash{7}.String() }, ChainBroken},
		{"a body byte with the leaves and links recomputed", func(p *StreamProof) {
			p.Events[1].Data[2] ^= 1
			var prev Hash
			for i := range p.Events {
				leaf := StreamLeaf(p.Events[i].Event(p.Stream))
				prev = Link(prev, leaf)
				p.Events[i].Leaf, p.Events[i].Link = leaf.String(), prev.String()
			}
		}, HeadNotInTree},
		{"a path hash", func(p *StreamProof) { p.Path[3] = Hash{1}.String() }, HeadNotInTree},
		{"the head index", func(p *StreamProof) { p.HeadIndex++ }, HeadNotInTree},
		{"the stream", func(p *StreamProof) { p.Stream = "delivery-other" }, DataChanged},
		{"the checkpoint's root", func(p *StreamProof) { p.Checkpoint.Root = Hash{2}.String() }, BadSignature},
		{"the checkpoint's position", func(p *StreamProof) { p.Checkpoint.Position++ }, BadSignature},
		{"a checkpoint signed with another key", func(p *StreamProof) {
			root, _ := ParseHash(p.Checkpoint.Root)
			p.Checkpoint.Signature = encodeSig(SignHeads(otherKey, p.Checkpoint.Position, p.Checkpoint.TreeSize, root))
		}, BadSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := cloneProof(p)
			tc.edit(&q)
			err := VerifyStreamProof(q, pub)
			var pe *ProofError
			if !errors.As(err, &pe) || pe.Kind != tc.kind {
				t.Fatalf("got %v, want %q", err, tc.kind)
			}
		})
	}
}

// TestStreamProofRefusals: a stream newer than the checkpoint, one the log
// does not hold, one restarted by a message without a chain, one deleted.
func TestStreamProofRefusals(t *testing.T) {
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	l := &memLog{}
	l.append(t, "delivery-a", "delivery.received.v1")
	l.append(t, "delivery-b", "delivery.received.v1")
	c := l.checkpoint(t, key)
	l.append(t, "delivery-a", "forward.requested.v1")
	if _, err := ProveStream(ctx, l, "delivery-a", c, 1000); !errors.Is(err, ErrNoCheckpointYet) {
		t.Fatalf("a stream with an event after the checkpoint: %v, want ErrNoCheckpointYet", err)
	}
	if _, err := ProveStream(ctx, l, "delivery-none", c, 1000); !errors.Is(err, ErrStreamNotProvable) {
		t.Fatalf("a stream the log does not hold: %v", err)
	}
	if _, err := ProveStream(ctx, l, "delivery-b", c, 0); err == nil {
		t.Fatal("a stream longer than the bound was proved")
	}
	c2 := l.checkpoint(t, key)
	c2.Root = Hash{3}.String()
	if _, err := ProveStream(ctx, l, "delivery-b", c2, 1000); err == nil {
		t.Fatal("proved against a checkpoint the log does not match")
	}
	// Delete delivery-b as retention does: its tombstone records what it
	// removed.
	l.pos++
	tomb := Event{Position: l.pos, ID: "t", Stream: "delivery-b", Type: "$stream.deleted.v1", Data: []byte(`{"events":1}`)}
	leaves, links := ChainEvents(l.heads["delivery-b"], []Event{tomb})
	l.msgs = append(l.msgs[:1], l.msgs[2:]...)
	l.msgs = append(l.msgs, Message{Stream: "delivery-b", Events: []Event{tomb}, Leaves: leaves, Links: links,
		Removed: []RemovedLink{{Position: 2, Link: l.heads["delivery-b"]}}})
	if _, err := ProveStream(ctx, l, "delivery-b", l.checkpoint(t, key), 1000); !errors.Is(err, ErrStreamNotProvable) {
		t.Fatalf("a deleted stream: %v", err)
	}
	// A stream deleted after the checkpoint was signed: its messages are gone.
	if _, err := ProveStream(ctx, l, "delivery-b", c, 1000); !errors.Is(err, ErrStreamNotProvable) {
		t.Fatalf("a stream deleted after the checkpoint: %v", err)
	}
	// A message without a chain (published past the adapter) is not
	// provable.
	l2 := &memLog{}
	l2.append(t, "delivery-a", "delivery.received.v1")
	l2.msgs = append(l2.msgs, Message{Stream: "delivery-x", Events: []Event{{Position: 2, ID: "raw", Stream: "delivery-x", Type: "delivery.received.v1"}}})
	l2.pos = 2
	if _, err := ProveStream(ctx, l2, "delivery-x", l2.checkpoint(t, key), 1000); !errors.Is(err, ErrStreamNotProvable) {
		t.Fatalf("a stream without a chain: %v", err)
	}
}

func encodeSig(sig []byte) string { return base64.StdEncoding.EncodeToString(sig) }

func cloneProof(p StreamProof) StreamProof {
	q := p
	q.Events = make([]StreamProofEvent, len(p.Events))
	for i, e := range p.Events {
		e.Data, e.Metadata = append([]byte(nil), e.Data...), append([]byte(nil), e.Metadata...)
		q.Events[i] = e
	}
	q.Path = append([]string(nil), p.Path...)
	return q
}

// FuzzVerifyStreamProof checks any proof file without panicking, and
// accepts none but a signed one.
func FuzzVerifyStreamProof(f *testing.F) {
	pub, key, _ := ed25519.GenerateKey(nil)
	l := &memLog{}
	l.append(f, "delivery-a", "delivery.received.v1", "forward.requested.v1")
	l.append(f, "delivery-b", "delivery.received.v1")
	p, err := ProveStream(context.Background(), l, "delivery-a", l.checkpoint(f, key), 10)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := json.Marshal(p)
	f.Add(good)
	f.Add([]byte(`{"format":"relay-stream-proof-v1","checkpoint":{"chain":"stream-heads-v1"},"events":[{}],"path":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var q StreamProof
		if json.Unmarshal(b, &q) != nil {
			return
		}
		if VerifyStreamProof(q, pub) == nil && q.Checkpoint.Signature != p.Checkpoint.Signature {
			t.Fatalf("a proof with another signature verifies: %s", b)
		}
	})
}
