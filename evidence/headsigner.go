package evidence

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// HeadsSigner keeps every stream's head of a log with a chain per stream
// as it moves, and signs them: the checkpoints of such a log. Its memory is
// one head per stream. Any node may run one: a checkpoint is
// self-contained (it signs the heads at the position it names, which a
// verifier recomputes from the log alone).
type HeadsSigner struct {
	heads Heads
	at    uint64 // position the heads are at
	// moved is the last position of an event other than a checkpoint, and
	// signed the newest position a checkpoint in the log signs: with
	// nothing moved since, there is nothing new to sign.
	moved, signed uint64
}

// Advance brings the heads to position to: it reads the messages after the
// last position it reached, and the rest of the log for deletions after
// to that removed messages up to it (their heads were there at to).
func (s *HeadsSigner) Advance(ctx context.Context, src MessageSource, to uint64) error {
	after := s.at
	for {
		ms, err := src.Messages(ctx, after, page)
		if err != nil {
			return fmt.Errorf("read the log after %d: %w", after, err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if len(m.Events) == 0 {
				continue
			}
			after = max(after, m.last())
			if m.last() > to {
				s.heads.ApplyRemoved(m, to)
				continue
			}
			s.heads.Apply(m)
			s.note(m)
		}
		if len(ms) < page {
			break
		}
	}
	s.at = max(s.at, to)
	return nil
}

func (s *HeadsSigner) note(m Message) {
	for _, e := range m.Events {
		if e.Type != "log.checkpointed.v1" {
			s.moved = max(s.moved, e.Position)
			continue
		}
		var c Checkpoint
		if json.Unmarshal(e.Data, &c) == nil {
			s.signed = max(s.signed, c.Position)
		}
	}
}

// Moved reports whether an event other than a checkpoint came after the
// position the newest checkpoint signs.
func (s *HeadsSigner) Moved() bool { return s.moved > s.signed }

// Sign signs the heads at the position Advance reached.
func (s *HeadsSigner) Sign(key ed25519.PrivateKey) Checkpoint {
	size, root := s.heads.Root()
	return Checkpoint{Position: s.at, TreeSize: size, Root: root.String(), Chain: HeadsChain,
		Signature: base64.StdEncoding.EncodeToString(SignHeads(key, s.at, size, root))}
}
