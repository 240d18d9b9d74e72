package evidence

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A log written by several nodes at once (JetStream, EventStoreDB) has no
// single writer that sees every event before the next, so it keeps a chain
// per stream instead of one over the whole log: each append knows its
// stream's head through its expected revision, and chains its events to the
// link of the stream's previous event. Checkpoints sign a Merkle tree over
// every stream's head. docs/evidence.md has the format.

// HeadsChain names checkpoints over stream heads (Checkpoint.Chain).
const HeadsChain = "stream-heads-v1"

// StreamLeaf is the hash of one event of a per-stream chain:
//
//	SHA-256("relay-stream-event-v1" || str(id) || str(stream) ||
//	        u64(revision) || str(type) || SHA-256(data) || SHA-256(metadata))
//
// Unlike Leaf it leaves the position out: a node learns the position only
// when the log has stored the event.
func StreamLeaf(e Event) Hash {
	d, m := sha256.Sum256(e.Data), sha256.Sum256(e.Metadata)
	var buf [256]byte // as in LeafOf
	b := append(buf[:0], "relay-stream-event-v1"...)
	b = appendStr(b, e.ID)
	b = appendStr(b, e.Stream)
	b = binary.BigEndian.AppendUint64(b, e.Revision)
	b = appendStr(b, e.Type)
	b = append(b, d[:]...)
	b = append(b, m[:]...)
	return sha256.Sum256(b)
}

// ChainEvents returns the leaves and links of events appended to a stream
// whose head link is prev (Hash{} for a new stream).
func ChainEvents(prev Hash, events []Event) (leaves, links []Hash) {
	leaves, links = make([]Hash, len(events)), make([]Hash, len(events))
	for i, e := range events {
		leaves[i] = StreamLeaf(e)
		prev = Link(prev, leaves[i])
		links[i] = prev
	}
	return leaves, links
}

// FormatHashes writes hashes as comma-separated hex (the form message
// headers carry them in).
func FormatHashes(hs []Hash) string {
	var b strings.Builder
	b.Grow(len(hs) * 65)
	for i, h := range hs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(hex.EncodeToString(h[:]))
	}
	return b.String()
}

// ParseHashes reads FormatHashes' form.
func ParseHashes(s string) ([]Hash, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]Hash, len(parts))
	for i, p := range parts {
		h, err := ParseHash(p)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// RemovedLink is what a stream deletion records of one message it removed:
// the position of the message's last event and the stream's link after it.
type RemovedLink struct {
	Position uint64
	Link     Hash
}

// FormatRemoved writes removed links as "position:link,…".
func FormatRemoved(rs []RemovedLink) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(r.Position, 10))
		b.WriteByte(':')
		b.WriteString(r.Link.String())
	}
	return b.String()
}

// ParseRemoved reads FormatRemoved's form.
func ParseRemoved(s string) ([]RemovedLink, error) {
	if s == "" {
		return nil, nil
	}
	var out []RemovedLink
	for _, p := range strings.Split(s, ",") {
		pos, link, ok := strings.Cut(p, ":")
		if !ok {
			return nil, fmt.Errorf("removed link %q: want position:link", p)
		}
		n, err := strconv.ParseUint(pos, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("removed link %q: %w", p, err)
		}
		h, err := ParseHash(link)
		if err != nil {
			return nil, err
		}
		out = append(out, RemovedLink{Position: n, Link: h})
	}
	return out, nil
}

// Message is one append of a log with a chain per stream, as stored: its
// events (in order, with their positions), the leaf and link stored beside
// each (nil when the message carries none), and, on a stream deletion's
// tombstone, the links of the messages it removed.
type Message struct {
	Stream  string
	Events  []Event
	Leaves  []Hash
	Links   []Hash
	Removed []RemovedLink
}

// first and last are the positions of the message's events.
func (m Message) first() uint64 { return m.Events[0].Position }
func (m Message) last() uint64  { return m.Events[len(m.Events)-1].Position }

// head is the stream's link after the message: its last stored link, or
// Hash{} for a message without a chain (the next append chains from there).
func (m Message) head() Hash {
	if len(m.Links) == 0 {
		return Hash{}
	}
	return m.Links[len(m.Links)-1]
}

// HeadLeaf is one stream's leaf in a checkpoint's tree:
// SHA-256("relay-head-v1" || str(stream) || link).
func HeadLeaf(stream string, link Hash) Hash {
	var buf [128]byte
	b := append(buf[:0], "relay-head-v1"...)
	b = appendStr(b, stream)
	b = append(b, link[:]...)
	return sha256.Sum256(b)
}

// Heads is every stream's head link at a position of the log.
type Heads struct {
	m map[string]*streamHead
	// names are the streams in byte order, as of the last Root; added
	// those since.
	names, added []string
}

type streamHead struct {
	pos  uint64
	link Hash
	// node is the tree node of the head (NodeOfLeaf of HeadLeaf), when
	// fresh: computed by Root for heads that moved since the last one.
	node  Hash
	fresh bool
}

// Set makes link the stream's head at pos, unless it knows a later one.
func (h *Heads) Set(stream string, pos uint64, link Hash) {
	if h.m == nil {
		h.m = map[string]*streamHead{}
	}
	cur, ok := h.m[stream]
	switch {
	case !ok:
		h.m[stream] = &streamHead{pos: pos, link: link}
		h.added = append(h.added, stream)
	case cur.pos < pos:
		cur.pos, cur.link, cur.fresh = pos, link, cur.fresh && cur.link == link
	}
}

// Apply sets the heads a message moves: its own stream's, and those of the
// messages a deletion records as removed.
func (h *Heads) Apply(m Message) {
	for _, r := range m.Removed {
		h.Set(m.Stream, r.Position, r.Link)
	}
	if len(m.Events) > 0 {
		h.Set(m.Stream, m.last(), m.head())
	}
}

// ApplyRemoved sets only the heads of the messages up to position that a
// deletion in m records as removed (a deletion after a checkpoint's
// position can remove messages the checkpoint signs).
func (h *Heads) ApplyRemoved(m Message, upTo uint64) {
	for _, r := range m.Removed {
		if r.Position <= upTo {
			h.Set(m.Stream, r.Position, r.Link)
		}
	}
}

// Root is the Merkle tree (RFC 9162, as Tree) over HeadLeaf of every
// stream, in the byte order of the streams' names: its size and root. It
// hashes again only the heads that moved since the last call, and one
// inner node per stream.
func (h *Heads) Root() (uint64, Hash) {
	if len(h.added) > 0 {
		sort.Strings(h.added)
		merged := make([]string, 0, len(h.names)+len(h.added))
		i, j := 0, 0
		for i < len(h.names) || j < len(h.added) {
			if j == len(h.added) || i < len(h.names) && h.names[i] < h.added[j] {
				merged = append(merged, h.names[i])
				i++
			} else {
				merged = append(merged, h.added[j])
				j++
			}
		}
		h.names, h.added = merged, h.added[:0]
	}
	var t Tree
	for _, s := range h.names {
		sh := h.m[s]
		if !sh.fresh {
			sh.node, sh.fresh = NodeOfLeaf(HeadLeaf(s, sh.link)), true
		}
		t.addNode(sh.node)
	}
	return t.Size(), t.Root()
}

// Len is the number of streams.
func (h *Heads) Len() int { return len(h.m) }

// HeadsMessage is the bytes a checkpoint over stream heads signs:
// "relay-heads-v1" || u64(position) || u64(streams) || root.
func HeadsMessage(position, streams uint64, root Hash) []byte {
	b := make([]byte, 0, 14+8+8+32)
	b = append(b, "relay-heads-v1"...)
	b = binary.BigEndian.AppendUint64(b, position)
	b = binary.BigEndian.AppendUint64(b, streams)
	return append(b, root[:]...)
}

// SignHeads signs the heads at position.
func SignHeads(key ed25519.PrivateKey, position, streams uint64, root Hash) []byte {
	return ed25519.Sign(key, HeadsMessage(position, streams, root))
}

// ValidHeads reports whether sig signs the heads with pub.
func ValidHeads(pub ed25519.PublicKey, position, streams uint64, root Hash, sig []byte) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, HeadsMessage(position, streams, root), sig)
}

// isTombstone reports whether m is a stream deletion's tombstone.
func (m Message) isTombstone() bool {
	return len(m.Events) == 1 && m.Events[0].Type == "$stream.deleted.v1"
}
