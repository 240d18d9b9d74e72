package evidence

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestStreamLeafCoversEveryField changes each input of a stream leaf in
// turn: each change gives another leaf.
func TestStreamLeafCoversEveryField(t *testing.T) {
	base := Event{Position: 7, ID: "e1", Stream: "delivery-1", Revision: 2, Type: "delivery.received.v1", Data: []byte(`{"a":1}`), Metadata: []byte(`{"v":1}`)}
	leaf := StreamLeaf(base)
	moved := base
	moved.Position = 9000
	if StreamLeaf(moved) != leaf {
		t.Fatal("the stream leaf depends on the position, which a node does not know before the log stores the event")
	}
	for name, edit := range map[string]func(*Event){
		"id":       func(e *Event) { e.ID = "e2" },
		"stream":   func(e *Event) { e.Stream = "delivery-2" },
		"revision": func(e *Event) { e.Revision = 3 },
		"type":     func(e *Event) { e.Type = "delivery.forwarded.v1" },
		"data":     func(e *Event) { e.Data = []byte(`{"a":2}`) },
		"metadata": func(e *Event) { e.Metadata = []byte(`{"v":2}`) },
	} {
		e := base
		edit(&e)
		if StreamLeaf(e) == leaf {
			t.Errorf("changing the %s leaves the leaf as it was", name)
		}
	}
}

// TestHeadsSignatureBindsEveryField signs heads and changes each signed
// field: the signature no longer holds.
func TestHeadsSignatureBindsEveryField(t *testing.T) {
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var h Heads
	h.Set("a", 1999, Link(Hash{}, Hash{1}))
	h.Set("b", 2999, Link(Hash{}, Hash{2}))
	n, root := h.Root()
	sig := SignHeads(key, 2999, n, root)
	if !ValidHeads(pub, 2999, n, root, sig) {
		t.Fatal("a fresh signature does not verify")
	}
	if ValidHeads(pub, 2998, n, root, sig) || ValidHeads(pub, 2999, n+1, root, sig) || ValidHeads(pub, 2999, n, Hash{}, sig) {
		t.Fatal("a changed position, size or root still verifies")
	}
	h.Set("a", 999, Hash{9}) // older than its head: ignored
	if _, again := h.Root(); again != root {
		t.Fatal("an older head replaced a newer one")
	}
	h.Set("c", 3999, Hash{})
	if n2, root2 := h.Root(); n2 != 3 || root2 == root {
		t.Fatalf("a new stream: %d heads, root changed %v", n2, root2 != root)
	}
}

func FuzzParseRemoved(f *testing.F) {
	f.Add(FormatRemoved([]RemovedLink{{Position: 1999, Link: Hash{1}}, {Position: 4999, Link: Hash{2}}}))
	f.Add("12:zz")
	f.Add(",")
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ParseRemoved(s)
		if err != nil {
			return
		}
		again, err := ParseRemoved(FormatRemoved(rs))
		if err != nil || len(again) != len(rs) {
			t.Fatalf("%q parses to %d links, formatted again to %d (%v)", s, len(rs), len(again), err)
		}
		for i := range rs {
			if again[i] != rs[i] {
				t.Fatalf("link %d: %v then %v", i, rs[i], again[i])
			}
		}
	})
}

func FuzzParseHashes(f *testing.F) {
	f.Add(FormatHashes([]Hash{{1}, {2}}))
	f.Add("00,")
	f.Fuzz(func(t *testing.T, s string) {
		hs, err := ParseHashes(s)
		if err != nil {
			return
		}
		again, err := ParseHashes(FormatHashes(hs))
		if err != nil || len(again) != len(hs) {
			t.Fatalf("%q: %d hashes, then %d (%v)", s, len(hs), len(again), err)
		}
	})
}

// TestHeadsRootAfterMoves compares the root of heads that moved between
// calls (cached nodes) with that of the same heads set once.
func TestHeadsRootAfterMoves(t *testing.T) {
	var moving, once Heads
	for i := range 50 {
		moving.Set(fmt.Sprintf("s%02d", 49-i), uint64(i+1)*1000, Hash{byte(i)})
	}
	moving.Root()
	for i := range 50 {
		if i%7 == 0 {
			moving.Set(fmt.Sprintf("s%02d", 49-i), uint64(i+100)*1000, Hash{byte(i), 1})
		}
	}
	moving.Set("a-new", 999_000, Hash{7})
	for i := range 50 {
		link := Hash{byte(i)}
		if i%7 == 0 {
			link = Hash{byte(i), 1}
		}
		once.Set(fmt.Sprintf("s%02d", 49-i), 1, link)
	}
	once.Set("a-new", 1, Hash{7})
	n1, r1 := moving.Root()
	n2, r2 := once.Root()
	if n1 != n2 || r1 != r2 {
		t.Fatalf("moved heads: %d %s, set once: %d %s", n1, r1, n2, r2)
	}
}

// BenchmarkHeadsRoot is what a checkpoint of a log with a chain per stream
// costs its writer and its verifier: a tree over every stream's head, of
// which 1 % moved since the previous checkpoint.
func BenchmarkHeadsRoot(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			var h Heads
			for i := range n {
				h.Set(fmt.Sprintf("delivery-%08d", i), uint64(i+1)*1000+999, Hash{byte(i)})
			}
			h.Root()
			pos := uint64(n+1) * 1000
			for b.Loop() {
				for i := 0; i < n; i += 100 {
					pos += 1000
					h.Set(fmt.Sprintf("delivery-%08d", i), pos, Hash{byte(pos)})
				}
				h.Root()
			}
		})
	}
}

// FuzzStreamExport verifies arbitrary export files: a report or an error,
// never a panic.
func FuzzStreamExport(f *testing.F) {
	f.Add([]byte(`{"position":1999,"id":"e","stream":"s","revision":0,"type":"t","data":{},"metadata":{},"chain":"stream","append":1999,"leaf":"` + Hash{1}.String() + `","link":"` + Hash{2}.String() + `"}` + "\n" +
		`{"position":2999,"stream":"s","removed":true,"link":"` + Hash{3}.String() + `","chain":"stream"}` + "\n" +
		`{"position":3999,"id":"c","stream":"log-checkpoints","revision":0,"type":"log.checkpointed.v1","data":{"position":1999,"tree_size":1,"root":"` + Hash{4}.String() + `","chain":"stream-heads-v1","signature":""},"chain":"stream","append":3999}` + "\n"))
	f.Add([]byte("{}\n{\"position\":0}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "events.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		x, err := OpenStreamExport(path)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		_, _ = VerifyStreams(context.Background(), x, Options{})
	})
}
