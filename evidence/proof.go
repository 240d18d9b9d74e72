package evidence

import (
	"crypto/ed25519"
	"errors"
	"fmt"
)

// ProofFormat names the proof's format and version.
const ProofFormat = "relay-proof-v1"

// Proof shows that some events (one delivery's) are in a log the relay
// signed, without the rest of the log: each event as stored, its index in
// the checkpoint's tree and its audit path. It proves the events it holds
// are in the log; it cannot show that none of the stream's events was left
// out of the proof.
type Proof struct {
	Format     string       `json:"format"`
	Checkpoint Checkpoint   `json:"checkpoint"`
	Events     ProvedEvents `json:"events"`
}

// ProvedEvent is an event with its place in the tree.
type ProvedEvent struct {
	Position uint64 `json:"position"`
	ID       string `json:"id"`
	Stream   string `json:"stream"`
	Revision uint64 `json:"revision"`
	Type     string `json:"type"`
	// Data and Metadata are the stored bytes (base64 in JSON: a proof
	// survives being reformatted, as JSON tools do).
	Data      []byte    `json:"data"`
	Metadata  []byte    `json:"metadata"`
	LeafIndex uint64    `json:"leaf_index"`
	Path      AuditPath `json:"path"` // hex, from the leaf up
}

// Event is the stored event the proof holds.
func (p ProvedEvent) Event() Event {
	return Event{Position: p.Position, ID: p.ID, Stream: p.Stream, Revision: p.Revision, Type: p.Type, Data: p.Data, Metadata: p.Metadata}
}

// Prove builds a proof of events against a checkpoint, given the chain's
// leaves up to the checkpoint's position (leaves[i] is tree leaf i) and
// each event's leaf index.
func Prove(c Checkpoint, leaves []Hash, events []Event, index []uint64) (Proof, error) {
	if uint64(len(leaves)) != c.TreeSize {
		return Proof{}, fmt.Errorf("the chain holds %d leaves up to position %d, the checkpoint signs %d", len(leaves), c.Position, c.TreeSize)
	}
	nodes := make([]Hash, len(leaves))
	for i, l := range leaves {
		nodes[i] = NodeOfLeaf(l)
	}
	p := Proof{Format: ProofFormat, Checkpoint: c}
	for i, e := range events {
		if Leaf(e) != leaves[index[i]] {
			return Proof{}, fmt.Errorf("event %s at position %d does not match its leaf in the chain: verify the log", e.ID, e.Position)
		}
		path, err := pathOf(nodes, index[i])
		if err != nil {
			return Proof{}, err
		}
		hex := make([]string, len(path))
		for j, h := range path {
			hex[j] = h.String()
		}
		p.Events = append(p.Events, ProvedEvent{Position: e.Position, ID: e.ID, Stream: e.Stream, Revision: e.Revision,
			Type: e.Type, Data: e.Data, Metadata: e.Metadata, LeafIndex: index[i], Path: hex})
	}
	return p, nil
}

// VerifyProof checks a proof with the relay's public key: the checkpoint's
// signature, then every event's leaf up its path to the signed root.
func VerifyProof(p Proof, pub ed25519.PublicKey) error {
	if p.Format != ProofFormat {
		return fmt.Errorf("not a %s proof (format %q)", ProofFormat, p.Format)
	}
	if len(p.Events) == 0 {
		return errors.New("the proof holds no event")
	}
	h, sig, err := p.Checkpoint.head()
	if err != nil {
		return fmt.Errorf("the proof's checkpoint is malformed: %w", err)
	}
	if !Valid(pub, h, sig) {
		return fmt.Errorf("the proof's checkpoint (position %d) is not signed by this key", h.Position)
	}
	for _, e := range p.Events {
		if len(e.Path) > MaxPath {
			return fmt.Errorf("event %s: its path has %d hashes, more than a tree can be high", e.ID, len(e.Path))
		}
		if e.Position > h.Position {
			return fmt.Errorf("event %s at position %d is after the checkpoint's position %d", e.ID, e.Position, h.Position)
		}
		path := make([]Hash, len(e.Path))
		for i, s := range e.Path {
			if path[i], err = ParseHash(s); err != nil {
				return fmt.Errorf("event %s: path: %w", e.ID, err)
			}
		}
		if err := VerifyInclusion(Leaf(e.Event()), e.LeafIndex, h.TreeSize, path, h.Root); err != nil {
			return fmt.Errorf("event %s at position %d (%s): %w", e.ID, e.Position, e.Type, err)
		}
	}
	return nil
}
