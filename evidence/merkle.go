package evidence

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"
)

// The checkpoints also sign a Merkle tree over the chain's leaves, in chain
// order, hashed as RFC 9162 (Certificate Transparency) does: a leaf's node
// is SHA-256(0x00 || leaf), an inner node SHA-256(0x01 || left || right),
// and a tree of n leaves splits at the largest power of two below n. The
// chain alone proves the whole log; the tree lets one event be proved with
// about log2(n) hashes (an inclusion proof) instead of every link after it.

// NodeOfLeaf is the tree node of a chain leaf.
func NodeOfLeaf(leaf Hash) Hash {
	var b [33]byte
	copy(b[1:], leaf[:])
	return sha256.Sum256(b[:])
}

// nodeOf is an inner node.
func nodeOf(left, right Hash) Hash {
	var b [65]byte
	b[0] = 1
	copy(b[1:33], left[:])
	copy(b[33:], right[:])
	return sha256.Sum256(b[:])
}

// Tree is a Merkle tree grown one leaf at a time. It keeps only the roots
// of its perfect subtrees (at most 64), so its memory does not grow with
// the log.
type Tree struct {
	size  uint64
	peaks []Hash // roots of the perfect subtrees, largest (leftmost) first
}

// Size is the number of leaves.
func (t *Tree) Size() uint64 { return t.size }

// Add adds a chain leaf.
func (t *Tree) Add(leaf Hash) { t.addNode(NodeOfLeaf(leaf)) }

// addNode adds a leaf's node (NodeOfLeaf).
func (t *Tree) addNode(n Hash) {
	// Each trailing one bit of size is a subtree of the new node's size:
	// merge with it, as a binary counter carries.
	for s := t.size; s&1 == 1; s >>= 1 {
		n = nodeOf(t.peaks[len(t.peaks)-1], n)
		t.peaks = t.peaks[:len(t.peaks)-1]
	}
	t.peaks = append(t.peaks, n)
	t.size++
}

// Root is the tree's head: SHA-256 of nothing for an empty tree, else the
// RFC 9162 root over its leaves.
func (t *Tree) Root() Hash {
	if t.size == 0 {
		return sha256.Sum256(nil)
	}
	r := t.peaks[len(t.peaks)-1]
	for i := len(t.peaks) - 2; i >= 0; i-- {
		r = nodeOf(t.peaks[i], r)
	}
	return r
}

// RootOf is the root over nodes (leaf nodes or any level's), by the same
// split rule. It is what proofs are cut from.
func rootOf(nodes []Hash) Hash {
	switch len(nodes) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return nodes[0]
	}
	k := split(uint64(len(nodes)))
	return nodeOf(rootOf(nodes[:k]), rootOf(nodes[k:]))
}

// split is the largest power of two below n (n > 1).
func split(n uint64) uint64 { return 1 << (bits.Len64(n-1) - 1) }

// InclusionPath is the audit path of leaf index in the tree over leaves
// (RFC 9162 section 2.1.3.1): the sibling nodes from the leaf up.
func InclusionPath(leaves []Hash, index uint64) ([]Hash, error) {
	nodes := make([]Hash, len(leaves))
	for i, l := range leaves {
		nodes[i] = NodeOfLeaf(l)
	}
	return pathOf(nodes, index)
}

// pathOf is InclusionPath over the leaves' nodes.
func pathOf(nodes []Hash, index uint64) ([]Hash, error) {
	if index >= uint64(len(nodes)) {
		return nil, fmt.Errorf("leaf %d is not in a tree of %d", index, len(nodes))
	}
	var path []Hash
	for len(nodes) > 1 {
		k := split(uint64(len(nodes)))
		if index < k {
			path = append(path, rootOf(nodes[k:]))
			nodes = nodes[:k]
		} else {
			path = append(path, rootOf(nodes[:k]))
			nodes, index = nodes[k:], index-k
		}
	}
	// Built from the top down; a verifier walks it from the leaf up.
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path, nil
}

// ErrNotIncluded is an inclusion proof that does not lead to the root.
var ErrNotIncluded = errors.New("the proof does not lead from the event to the signed root")

// VerifyInclusion checks that leaf is at index in the tree of size whose
// root is root, given its audit path (RFC 9162 section 2.1.3.2).
func VerifyInclusion(leaf Hash, index, size uint64, path []Hash, root Hash) error {
	if index >= size {
		return fmt.Errorf("leaf %d is not in a tree of %d: %w", index, size, ErrNotIncluded)
	}
	fn, sn := index, size-1
	r := NodeOfLeaf(leaf)
	for _, p := range path {
		if sn == 0 {
			return fmt.Errorf("the path is longer than the tree is high: %w", ErrNotIncluded)
		}
		if fn&1 == 1 || fn == sn {
			r = nodeOf(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = nodeOf(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 || r != root {
		return ErrNotIncluded
	}
	return nil
}
