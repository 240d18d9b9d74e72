// Package evidence makes the event log tamper-evident and checks it: every
// event gets a leaf hash of what it holds and a link that chains it to the
// event before it, kept apart from the event (so retention can delete an
// event and the chain still verifies), and the relay signs the chain's head
// at intervals (checkpoints). Verify walks a log — a data folder or an
// export — and names the first thing that is wrong. docs/evidence.md has
// the format, for anyone who wants to write a verifier of their own, and
// the threat model. Standard library only.
package evidence

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Hash is a SHA-256.
type Hash [32]byte

func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash reads a Hash from its hex form.
func ParseHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("not a SHA-256 in hex: %q", s)
	}
	copy(h[:], b)
	return h, nil
}

// Event is an event as the log stores it: the inputs of its leaf.
type Event struct {
	Position uint64
	ID       string
	Stream   string
	Revision uint64
	Type     string
	Data     []byte // as stored
	Metadata []byte // as stored
}

// Leaf is the hash of one event:
//
//	SHA-256("relay-event-v1" || u64(position) || str(id) || str(stream) ||
//	        u64(revision) || str(type) || SHA-256(data) || SHA-256(metadata))
//
// where u64 is 8 bytes big-endian and str is a u32 big-endian length and the
// bytes.
func Leaf(e Event) Hash { return LeafOf(e.Position, DigestOf(e)) }

// Digest is an event without its position, its data and metadata hashed.
type Digest struct {
	ID, Stream, Type string
	Revision         uint64
	Data, Metadata   Hash
}

// DigestOf is e without its position: what its leaf is made of, wherever
// it goes.
func DigestOf(e Event) Digest {
	return Digest{ID: e.ID, Stream: e.Stream, Type: e.Type, Revision: e.Revision,
		Data: sha256.Sum256(e.Data), Metadata: sha256.Sum256(e.Metadata)}
}

// LeafOf is the leaf the event d would have at position. Its input is
// put together in one buffer on the stack and hashed at once: the log's
// writer computes a leaf for every event it commits, inside the commit, and
// Verify one for every event it reads.
func LeafOf(position uint64, d Digest) Hash {
	var buf [256]byte // ids, stream and type of the relay's own events fit
	b := append(buf[:0], "relay-event-v1"...)
	b = binary.BigEndian.AppendUint64(b, position)
	b = appendStr(b, d.ID)
	b = appendStr(b, d.Stream)
	b = binary.BigEndian.AppendUint64(b, d.Revision)
	b = appendStr(b, d.Type)
	b = append(b, d.Data[:]...)
	b = append(b, d.Metadata[:]...)
	return sha256.Sum256(b)
}

// appendStr appends str(s): a u32 big-endian length and the bytes.
func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// Link chains a leaf to the link of the event before it in the chain
// (Hash{} before the first): SHA-256(prev || leaf).
func Link(prev, leaf Hash) Hash {
	var b [64]byte
	copy(b[:32], prev[:])
	copy(b[32:], leaf[:])
	return sha256.Sum256(b[:])
}

// Link is one event's place in the chain, as the log keeps it beside the
// event: its position and stream (which stay when retention deletes the
// event), its leaf and its link.
type ChainLink struct {
	Position uint64
	Stream   string
	Leaf     Hash
	Link     Hash
}

// Head is what a checkpoint signs: the chain's link at a position, and the
// Merkle tree over the chain's leaves up to that position (TreeSize leaves,
// its Root).
type Head struct {
	Position uint64
	Link     Hash
	TreeSize uint64
	Root     Hash
}

// CheckpointMessage is the bytes a checkpoint signs:
// "relay-checkpoint-v1" || u64(position) || link || u64(tree size) || root.
func CheckpointMessage(h Head) []byte {
	b := make([]byte, 0, 19+8+32+8+32)
	b = append(b, "relay-checkpoint-v1"...)
	b = binary.BigEndian.AppendUint64(b, h.Position)
	b = append(b, h.Link[:]...)
	b = binary.BigEndian.AppendUint64(b, h.TreeSize)
	return append(b, h.Root[:]...)
}

// Sign signs a head.
func Sign(key ed25519.PrivateKey, h Head) []byte {
	return ed25519.Sign(key, CheckpointMessage(h))
}

// Valid reports whether sig signs h with pub.
func Valid(pub ed25519.PublicKey, h Head, sig []byte) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, CheckpointMessage(h), sig)
}
