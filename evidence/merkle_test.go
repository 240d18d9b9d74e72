package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
)

func leaves(n int) []Hash {
	out := make([]Hash, n)
	for i := range out {
		out[i] = sha256.Sum256([]byte(fmt.Sprint("event ", i)))
	}
	return out
}

// TestTreeRootMatchesTheSplitRule: the tree grown a leaf at a time has the
// root the recursive definition gives, at every size.
func TestTreeRootMatchesTheSplitRule(t *testing.T) {
	ls := leaves(70)
	var tr Tree
	for n := 1; n <= len(ls); n++ {
		tr.Add(ls[n-1])
		nodes := make([]Hash, n)
		for i := range nodes {
			nodes[i] = NodeOfLeaf(ls[i])
		}
		if got, want := tr.Root(), rootOf(nodes); got != want {
			t.Fatalf("size %d: root %s, want %s", n, got, want)
		}
	}
	var empty Tree
	if empty.Root() != sha256.Sum256(nil) {
		t.Fatal("the empty tree's root is not SHA-256 of nothing")
	}
}

// TestTreeKnownRoot pins the hashing to RFC 9162's rule with a root worked
// out by hand: three leaves a, b, c give H(1 || H(1 || H(0||a) || H(0||b)) || H(0||c)).
func TestTreeKnownRoot(t *testing.T) {
	a, b, c := Hash{1}, Hash{2}, Hash{3}
	h := func(parts ...[]byte) Hash {
		s := sha256.New()
		for _, p := range parts {
			s.Write(p)
		}
		var out Hash
		s.Sum(out[:0])
		return out
	}
	na, nb, nc := h([]byte{0}, a[:]), h([]byte{0}, b[:]), h([]byte{0}, c[:])
	ab := h([]byte{1}, na[:], nb[:])
	want := h([]byte{1}, ab[:], nc[:])
	var tr Tree
	for _, l := range []Hash{a, b, c} {
		tr.Add(l)
	}
	if got := tr.Root(); got != want {
		t.Fatalf("root %s, want %s", hex.EncodeToString(got[:]), hex.EncodeToString(want[:]))
	}
}

// TestInclusionProofs: every leaf of trees of many sizes is proved, and a
// proof fails for another leaf, another index, a changed or shortened path
// or another root. (The size only shapes the path; it is bound to the root
// by the checkpoint's signature.)
func TestInclusionProofs(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 33} {
		ls := leaves(n)
		var tr Tree
		for _, l := range ls {
			tr.Add(l)
		}
		root, size := tr.Root(), uint64(n)
		for i := range ls {
			idx := uint64(i)
			path, err := InclusionPath(ls, idx)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyInclusion(ls[i], idx, size, path, root); err != nil {
				t.Fatalf("n=%d leaf %d: %v", n, i, err)
			}
			bad := []struct {
				name        string
				leaf        Hash
				index, size uint64
				path        []Hash
				root        Hash
			}{
				{"another leaf", Hash{0xff}, idx, size, path, root},
				{"another index", ls[i], (idx + 1) % size, size, path, root},
				{"another root", ls[i], idx, size, path, Hash{9}},
				{"index past the size", ls[i], size, size, path, root},
			}
			if len(path) > 0 {
				changed := append([]Hash(nil), path...)
				changed[0][0] ^= 1
				bad = append(bad, struct {
					name        string
					leaf        Hash
					index, size uint64
					path        []Hash
					root        Hash
				}{"a changed path", ls[i], idx, size, changed, root})
				bad = append(bad, struct {
					name        string
					leaf        Hash
					index, size uint64
					path        []Hash
					root        Hash
				}{"a path cut short", ls[i], idx, size, path[:len(path)-1], root})
			}
			for _, b := range bad {
				if n == 1 && b.name == "another index" {
					continue // the only index there is
				}
				if err := VerifyInclusion(b.leaf, b.index, b.size, b.path, b.root); !errors.Is(err, ErrNotIncluded) {
					t.Errorf("n=%d leaf %d, %s: %v, want ErrNotIncluded", n, i, b.name, err)
				}
			}
		}
	}
}

// BenchmarkTree measures growing the tree a checkpoint signs, per leaf.
func BenchmarkTree(b *testing.B) {
	ls := leaves(1024)
	var tr Tree
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		tr.Add(ls[i%len(ls)])
	}
}

// BenchmarkProveOfAMillion measures cutting one event's audit path from a
// million leaves, as relay events prove does after reading them.
func BenchmarkProveOfAMillion(b *testing.B) {
	ls := leaves(1_000_000)
	b.ResetTimer()
	for b.Loop() {
		if _, err := InclusionPath(ls, 777_777); err != nil {
			b.Fatal(err)
		}
	}
}
