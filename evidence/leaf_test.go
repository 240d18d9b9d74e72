package evidence

import (
	"strings"
	"testing"
)

// The leaf's bytes are a format (docs/evidence.md): these were computed by
// the implementation that wrote every log so far, one sha256 fed field by
// field. A change to how LeafOf puts its input together must not move them.
func TestLeafOfKeepsItsFormat(t *testing.T) {
	d := Digest{ID: "01a22a20-9b67-7d9b-b589-9fa55640d455", Stream: "delivery-01a22a20-9b67-7d9b-b589-9fa55640d455",
		Type: "delivery.received.v1", Revision: 3, Data: Hash{1, 2, 3}, Metadata: Hash{9: 7}}
	long := d
	long.Stream = string(make([]byte, 300)) // past the stack buffer
	for _, tt := range []struct {
		name string
		pos  uint64
		d    Digest
		want string
	}{
		{"a delivery's receipt", 42, d, "7425fd33c0a1328e952fff472c56cf72e51b0addb19ec4a03753707f00fa228a"},
		{"a stream name longer than the buffer", 7, long, "fd120642def4155f5afc12acda07c3ded029ffedc5ef5cba9cf464ca820b7f17"},
	} {
		if got := LeafOf(tt.pos, tt.d).String(); got != tt.want {
			t.Errorf("%s: leaf %s, want %s", tt.name, got, tt.want)
		}
	}
}

// The log's writer computes a leaf for every event inside its commit, and
// the JetStream and EventStoreDB adapters a stream leaf: none allocates for
// the relay's own ids, streams and types.
func TestLeavesAllocateNothing(t *testing.T) {
	id, stream := strings.Repeat("i", 36), "delivery-"+strings.Repeat("s", 36)
	d := Digest{ID: id, Stream: stream, Type: "delivery.received.v1"}
	e := Event{ID: id, Stream: stream, Type: "delivery.received.v1", Data: []byte("data"), Metadata: []byte("{}")}
	for name, f := range map[string]func(){
		"LeafOf":     func() { _ = LeafOf(1, d) },
		"StreamLeaf": func() { _ = StreamLeaf(e) },
		"HeadLeaf":   func() { _ = HeadLeaf(stream, Hash{}) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %.0f times per leaf, want 0", name, n)
		}
	}
}

func BenchmarkLeafOf(b *testing.B) {
	d := Digest{ID: strings.Repeat("i", 36), Stream: "delivery-" + strings.Repeat("s", 36), Type: "delivery.received.v1"}
	b.ReportAllocs()
	for b.Loop() {
		_ = LeafOf(uint64(b.N), d)
	}
}

func TestStreamAndHeadLeavesKeepTheirFormat(t *testing.T) {
	e := Event{ID: "01a22a20-9b67-7d9b-b589-9fa55640d455", Stream: "delivery-01a22a20-9b67-7d9b-b589-9fa55640d455",
		Type: "delivery.received.v1", Revision: 3, Data: []byte("data"), Metadata: []byte("{}")}
	long := e
	long.Stream = string(make([]byte, 300)) // past the stack buffer
	for _, tt := range []struct {
		name      string
		got, want string
	}{
		{"stream leaf", StreamLeaf(e).String(), "c046a9d56acf57a8b7846f462fa5f69619fc97c130d0d3b9e56d6e44e48b15e4"},
		{"stream leaf of a stream longer than the buffer", StreamLeaf(long).String(), "7a2fd449e5f38917508edac819969bd56104083fde0642cc6162cba615e57238"},
		{"head leaf", HeadLeaf(e.Stream, Hash{5: 1}).String(), "15887332aa3b4649eeaa87867702315e3829bdbf432171613c2f51f915f583bb"},
		{"head leaf of a stream longer than the buffer", HeadLeaf(string(make([]byte, 300)), Hash{5: 1}).String(), "de080078892b329fd8ec7f974acdde85d23694b0fb9c9a90c32e6a588127bf93"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, tt.got, tt.want)
		}
	}
}
