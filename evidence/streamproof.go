package evidence

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
)

// StreamProofFormat names the proof of one stream of a log with a chain
// per stream (JetStream, EventStoreDB) and its version.
const StreamProofFormat = "relay-stream-proof-v1"

// HeadNotInTree names a stream head whose audit path does not lead to the
// checkpoint's root.
const HeadNotInTree = "head not in the signed tree"

// StreamProof shows what one stream of a log with a chain per stream holds
// up to a checkpoint, without the rest of the log: every event of the
// stream from its first chained one up to the head the checkpoint signed,
// each with the leaf and link the log stores beside it, and the audit path
// of the stream's head in the checkpoint's tree of stream heads. The chain
// ties every event to the head, so unlike Proof it also shows that no event
// between the first one it holds and the head was left out.
type StreamProof struct {
	Format     string            `json:"format"`
	Checkpoint Checkpoint        `json:"checkpoint"`
	Stream     string            `json:"stream"`
	Events     StreamProofEvents `json:"events"`
	// HeadIndex is the stream's leaf index in the checkpoint's tree (the
	// streams in the byte order of their names); Path its audit path,
	// hex, from the leaf up (RFC 9162 section 2.1.3).
	HeadIndex uint64    `json:"head_index"`
	Path      AuditPath `json:"path"`
}

// StreamProofEvent is one event of a StreamProof, as stored.
type StreamProofEvent struct {
	// Position is where the log stored the event; the chain does not
	// cover it (a node learns it only after the append).
	Position uint64 `json:"position"`
	ID       string `json:"id"`
	Revision uint64 `json:"revision"`
	Type     string `json:"type"`
	// Data and Metadata are the stored bytes (base64 in JSON).
	Data     []byte `json:"data"`
	Metadata []byte `json:"metadata"`
	// Leaf and Link are what the log stores beside the event (hex); the
	// verifier recomputes both and uses them only to name what differs.
	Leaf string `json:"leaf"`
	Link string `json:"link"`
}

// Event is the stored event of stream.
func (e StreamProofEvent) Event(stream string) Event {
	return Event{Position: e.Position, ID: e.ID, Stream: stream, Revision: e.Revision, Type: e.Type, Data: e.Data, Metadata: e.Metadata}
}

// ErrNoCheckpointYet is a stream whose newest event no checkpoint signs.
var ErrNoCheckpointYet = errors.New("no checkpoint signs the stream's newest event yet")

// ErrStreamNotProvable is a stream the log holds no chained events of up
// to the checkpoint.
var ErrStreamNotProvable = errors.New("the log holds no chained event of the stream up to the checkpoint")

// ProveStream builds a proof of stream against c, a checkpoint over stream
// heads, reading the whole log: the heads of every stream at c's position
// (for the audit path) and the stream's messages. It refuses a stream with
// events after c's position (ErrNoCheckpointYet), more than maxEvents
// events, and a log whose heads at c's position are not what c signs.
func ProveStream(ctx context.Context, src MessageSource, stream string, c Checkpoint, maxEvents int) (StreamProof, error) {
	if c.Chain != HeadsChain {
		return StreamProof{}, fmt.Errorf("the checkpoint signs a single chain (%q), not stream heads", c.Chain)
	}
	root, err := ParseHash(c.Root)
	if err != nil {
		return StreamProof{}, fmt.Errorf("the checkpoint's root: %w", err)
	}
	var heads Heads
	var events StreamProofEvents
	var after, newest uint64
	deleted := false
	for {
		ms, err := src.Messages(ctx, after, page)
		if err != nil {
			return StreamProof{}, fmt.Errorf("read the log after %d: %w", after, err)
		}
		for _, m := range ms {
			if len(m.Events) == 0 {
				continue
			}
			after = max(after, m.last())
			if m.last() > c.Position {
				heads.ApplyRemoved(m, c.Position)
				if m.Stream == stream {
					newest = max(newest, m.last())
					deleted = deleted || m.isTombstone()
				}
				continue
			}
			heads.Apply(m)
			if m.Stream != stream {
				continue
			}
			newest = max(newest, m.last())
			switch {
			case m.isTombstone():
				events, deleted = nil, true
			case m.Leaves == nil:
				// The chain restarts after a message without one.
				events = nil
			case len(m.Leaves) != len(m.Events) || len(m.Links) != len(m.Events):
				return StreamProof{}, fmt.Errorf("the message at position %d carries %d leaves and %d links for %d events: verify the log",
					m.first(), len(m.Leaves), len(m.Links), len(m.Events))
			default:
				if len(events)+len(m.Events) > maxEvents {
					return StreamProof{}, fmt.Errorf("stream %s holds more than %d events, more than a proof holds", stream, maxEvents)
				}
				if n := len(events); n > 0 && m.Events[0].Revision != events[n-1].Revision+1 {
					return StreamProof{}, fmt.Errorf("stream %s's revision %d follows revision %d in the log: verify the log", stream, m.Events[0].Revision, events[n-1].Revision)
				}
				for i, e := range m.Events {
					events = append(events, StreamProofEvent{Position: e.Position, ID: e.ID, Revision: e.Revision, Type: e.Type,
						Data: e.Data, Metadata: e.Metadata, Leaf: m.Leaves[i].String(), Link: m.Links[i].String()})
				}
			}
		}
		if len(ms) < page {
			break
		}
	}
	switch {
	case deleted:
		return StreamProof{}, fmt.Errorf("stream %s was deleted (retention): %w", stream, ErrStreamNotProvable)
	case newest > c.Position:
		return StreamProof{}, fmt.Errorf("stream %s has events up to position %d, the newest checkpoint signs position %d: %w",
			stream, newest, c.Position, ErrNoCheckpointYet)
	case len(events) == 0:
		return StreamProof{}, fmt.Errorf("stream %s: %w", stream, ErrStreamNotProvable)
	}
	size, got := heads.Root()
	if size != c.TreeSize || got != root {
		return StreamProof{}, fmt.Errorf("the log's %d stream heads at position %d have root %s, the checkpoint signs %d with root %s: verify the log",
			size, c.Position, got, c.TreeSize, root)
	}
	last, _ := ParseHash(events[len(events)-1].Link)
	if heads.link(stream) != last {
		return StreamProof{}, fmt.Errorf("stream %s's head at position %d is not its newest event's link: verify the log", stream, c.Position)
	}
	index, path, err := heads.path(stream)
	if err != nil {
		return StreamProof{}, err
	}
	hex := make([]string, len(path))
	for i, h := range path {
		hex[i] = h.String()
	}
	return StreamProof{Format: StreamProofFormat, Checkpoint: c, Stream: stream, Events: events, HeadIndex: index, Path: hex}, nil
}

// path is the stream's leaf index in the tree Root hashes, and its audit
// path.
func (h *Heads) path(stream string) (uint64, []Hash, error) {
	h.Root() // sorts the names and hashes the heads that moved
	i := sort.SearchStrings(h.names, stream)
	if i == len(h.names) || h.names[i] != stream {
		return 0, nil, fmt.Errorf("stream %s has no head", stream)
	}
	nodes := make([]Hash, len(h.names))
	for j, s := range h.names {
		nodes[j] = h.m[s].node
	}
	path, err := pathOf(nodes, uint64(i))
	return uint64(i), path, err
}

// ProofError is what is wrong with a proof: Kind is one of the Problem
// kinds (DataChanged, ChainBroken, BadSignature) or HeadNotInTree.
type ProofError struct {
	Kind   string
	Detail string
}

func (e *ProofError) Error() string { return e.Kind + ": " + e.Detail }

// VerifyStreamProof checks a StreamProof with the relay's public key: the
// checkpoint's signature; every event's leaf and link, recomputed from its
// content and the link before it (32 zero bytes before the first); and
// that the stream's head, the last link, is at HeadIndex in the signed
// tree. A *ProofError names the first thing wrong.
func VerifyStreamProof(p StreamProof, pub ed25519.PublicKey) error {
	c := p.Checkpoint
	switch {
	case p.Format != StreamProofFormat:
		return fmt.Errorf("not a %s proof (format %q)", StreamProofFormat, p.Format)
	case c.Chain != HeadsChain:
		return fmt.Errorf("the proof's checkpoint does not sign stream heads (chain %q)", c.Chain)
	case len(p.Events) == 0:
		return errors.New("the proof holds no event")
	case len(p.Path) > MaxPath:
		return fmt.Errorf("the proof's path has %d hashes, more than a tree can be high", len(p.Path))
	}
	root, err := ParseHash(c.Root)
	if err != nil {
		return fmt.Errorf("the proof's checkpoint is malformed: root: %w", err)
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil || !ValidHeads(pub, c.Position, c.TreeSize, root, sig) {
		return &ProofError{Kind: BadSignature, Detail: fmt.Sprintf("the proof's checkpoint (position %d) is not signed by this key", c.Position)}
	}
	var prev Hash // the link before the event: 32 zero bytes before the first
	for i, e := range p.Events {
		where := fmt.Sprintf("event %s (revision %d, %s)", e.ID, e.Revision, e.Type)
		leaf, err1 := ParseHash(e.Leaf)
		link, err2 := ParseHash(e.Link)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if i > 0 && e.Revision != p.Events[i-1].Revision+1 {
			return &ProofError{Kind: ChainBroken, Detail: fmt.Sprintf("%s follows revision %d: the stream's events are not all in the proof", where, p.Events[i-1].Revision)}
		}
		computed := StreamLeaf(e.Event(p.Stream))
		if computed != leaf {
			return &ProofError{Kind: DataChanged, Detail: where + ": its content does not match its leaf in the chain"}
		}
		if Link(prev, leaf) != link {
			return &ProofError{Kind: ChainBroken, Detail: where + ": its link does not follow from the link before it"}
		}
		prev = link // = Link(previous, computed): both were checked
	}
	path := make([]Hash, len(p.Path))
	for i, s := range p.Path {
		if path[i], err = ParseHash(s); err != nil {
			return fmt.Errorf("path: %w", err)
		}
	}
	if err := VerifyInclusion(HeadLeaf(p.Stream, prev), p.HeadIndex, c.TreeSize, path, root); err != nil {
		return &ProofError{Kind: HeadNotInTree, Detail: fmt.Sprintf("stream %s's head %s at index %d: %v", p.Stream, prev, p.HeadIndex, err)}
	}
	return nil
}
