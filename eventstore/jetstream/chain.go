package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/relayhq/relay/evidence"
)

// The chain per stream (package evidence, docs/evidence.md) travels in
// each message's headers: every event's leaf and link, comma-separated hex
// in event order. An append chains its events to the link of the stream's
// newest message, which it has read anyway to learn the expected subject
// sequence; the server refuses the publish if another message landed on
// the subject meanwhile, so two nodes can never chain to the same link.
// A tombstone also lists the messages its roll-up removes (Relay-Removed:
// each one's last position and link), so that checkpoints signed before
// the deletion still verify.
const (
	headerLeaf    = "Relay-Leaf"
	headerLink    = "Relay-Link"
	headerRemoved = "Relay-Removed"
)

// parseChain reads a message's chain headers. A message without them has
// nil leaves; one whose headers do not parse has empty ones, which the
// verifier reports as a broken chain.
func parseChain(h nats.Header) (leaves, links []evidence.Hash, removed []evidence.RemovedLink) {
	leafText := h.Get(headerLeaf)
	if leafText == "" {
		return nil, nil, nil
	}
	leaves, err1 := evidence.ParseHashes(leafText)
	links, err2 := evidence.ParseHashes(h.Get(headerLink))
	removed, err3 := evidence.ParseRemoved(h.Get(headerRemoved))
	if err := errors.Join(err1, err2, err3); err != nil {
		return []evidence.Hash{}, []evidence.Hash{}, nil
	}
	return leaves, links, removed
}

// headLink is the stream's link after m: Hash{} when m carries no chain
// (the next append chains from there, and the verifier expects that).
func (m *stored) headLink() evidence.Hash {
	if m == nil || len(m.links) == 0 {
		return evidence.Hash{}
	}
	return m.links[len(m.links)-1]
}

// evidenceEvents is a batch's events as the chain hashes them; the
// positions are filled in when seq is known (0: not yet stored).
func evidenceEvents(b batch, seq uint64) []evidence.Event {
	n := len(b.events)
	out := make([]evidence.Event, n)
	for i, e := range b.events {
		out[i] = evidence.Event{ID: e.ID, Stream: b.stream, Revision: b.revision + uint64(i), Type: e.Type, Data: e.Data, Metadata: b.meta[i]}
		if seq > 0 {
			out[i].Position = position(seq, i, n)
		}
	}
	return out
}

// chainMessage encodes b chained after prev: the body and its headers.
func chainMessage(subj string, b batch, prev evidence.Hash) (*nats.Msg, error) {
	body, meta, err := encodeBatchMeta(b)
	if err != nil {
		return nil, err
	}
	b.meta = meta
	leaves, links := evidence.ChainEvents(prev, evidenceEvents(b, 0))
	msg := &nats.Msg{Subject: subj, Data: body, Header: nats.Header{}}
	msg.Header.Set(headerLeaf, evidence.FormatHashes(leaves))
	msg.Header.Set(headerLink, evidence.FormatHashes(links))
	return msg, nil
}

// evidence is m as the chain's verifier reads it.
func (m *stored) evidence() evidence.Message {
	return evidence.Message{Stream: m.batch.stream, Events: evidenceEvents(m.batch, m.seq), Leaves: m.leaves, Links: m.links, Removed: m.removed}
}

// removedLinks lists, for a deletion, the last position and link of every
// message of the stream up to its head h.
func (s *Store) removedLinks(ctx context.Context, subj string, h head, last *stored) ([]evidence.RemovedLink, error) {
	var out []evidence.RemovedLink
	err := s.scan(ctx, subj, 0, h, last, func(m *stored) bool {
		out = append(out, evidence.RemovedLink{Position: m.result().Position, Link: m.headLink()})
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("read the messages the deletion removes: %w", err)
	}
	return out, nil
}

// Messages implements evidence.MessageSource: up to limit messages whose
// last event is after position after, in order, with their chains.
func (s *Store) Messages(ctx context.Context, after uint64, limit int) ([]evidence.Message, error) {
	if err := s.checkRead(limit); err != nil {
		return nil, fmt.Errorf("read messages after %d: %w", after, err)
	}
	var out []evidence.Message
	err := s.eachMessage(ctx, after, func(m *stored) bool {
		if m.result().Position > after {
			out = append(out, m.evidence())
		}
		return len(out) < limit
	})
	if err != nil {
		return nil, fmt.Errorf("read messages after %d: %w", after, err)
	}
	return out, nil
}

// eachMessage calls fn with the log's messages from the one whose slot
// holds after, in order, until fn returns false; one request each.
func (s *Store) eachMessage(ctx context.Context, after uint64, fn func(*stored) bool) error {
	lastSeq, err := s.lastSeq(ctx)
	if err != nil {
		return err
	}
	for seq := firstSeq(after); seq <= lastSeq; seq++ {
		m, err := s.message(ctx, seq)
		if errors.Is(err, natsjs.ErrMsgNotFound) {
			m, err = s.nextOn(ctx, s.subject+".*", seq)
			if m == nil && err == nil {
				return nil // purged up to the end
			}
		}
		if err != nil {
			return err
		}
		seq = m.seq
		if !fn(m) {
			return nil
		}
	}
	return nil
}
