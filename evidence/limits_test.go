package evidence

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// allocated runs fn and returns the bytes it allocated on the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// repeatReader yields head, then n bytes of fill, then tail, without
// holding them: a hostile file of any size costs the test nothing.
type repeatReader struct {
	head, tail []byte
	fill       byte
	n          int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	switch {
	case len(r.head) > 0:
		n := copy(p, r.head)
		r.head = r.head[n:]
		return n, nil
	case r.n > 0:
		k := int(min(int64(len(p)), r.n))
		for i := range k {
			p[i] = r.fill
		}
		r.n -= int64(k)
		return k, nil
	case len(r.tail) > 0:
		n := copy(p, r.tail)
		r.tail = r.tail[n:]
		return n, nil
	}
	return 0, io.EOF
}

func TestCheckArray(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		max  int
		fail bool
	}{
		{`[]`, 1, false},
		{`null`, 1, false},
		{`["a"]`, 1, false},
		{`["a","b"]`, 1, true},
		{`["a,b,c","d"]`, 2, false},           // commas in strings
		{`["a\",b","c"]`, 2, false},           // an escaped quote
		{`[[1,2,3],{"a":1,"b":2}]`, 2, false}, // commas below the top level
		{`[1,2,3]`, 3, false},
		{`[1,2,3,4]`, 3, true},
	} {
		err := checkArray([]byte(tt.raw), "x", tt.max)
		if (err != nil) != tt.fail {
			t.Errorf("checkArray(%s, %d) = %v, want failure %v", tt.raw, tt.max, err, tt.fail)
		}
	}
}

// TestLimitsDerived pins the figures docs/security.md gives.
func TestLimitsDerived(t *testing.T) {
	for _, tt := range []struct {
		name     string
		got      int64
		min, max int64 // MiB
	}{
		{"MaxExportLine", MaxExportLine, 27, 28},
		{"MaxProofBytes", MaxProofBytes, 44, 46},
	} {
		if tt.got < tt.min<<20 || tt.got > tt.max<<20 {
			t.Errorf("%s = %d (%.1f MiB), docs say %d–%d MiB", tt.name, tt.got, float64(tt.got)/(1<<20), tt.min, tt.max)
		}
	}
}

// FuzzReadProof decodes arbitrary proof files: a proof or an error, never
// a panic, and never more allocated than a small multiple of the input.
func FuzzReadProof(f *testing.F) {
	hash := `"` + Hash{1}.String() + `"`
	f.Add([]byte(`{"format":"relay-proof-v1","checkpoint":{"position":2,"link":` + hash + `,"tree_size":2,"root":` + hash + `,"signature":""},"events":[{"position":1,"id":"e","stream":"s","data":"e30=","metadata":"e30=","leaf_index":0,"path":[` + hash + `]}]}`))
	f.Add([]byte(`{"format":"relay-stream-proof-v1","stream":"s","events":[{"id":"e","revision":0,"leaf":` + hash + `,"link":` + hash + `}],"path":[` + hash + `,` + hash + `]}`))
	f.Add([]byte(`{"events":[{"path":[` + strings.Repeat(`"",`, 70) + `""]}]}`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`))
	f.Add([]byte(`{"format":"relay-proof-v1","events":[` + strings.Repeat(`{},`, 1001) + `{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p *Proof
		var sp *StreamProof
		var err error
		n := allocated(func() { p, sp, err = decodeProof(bytes.NewReader(b), "p.json", int64(len(b))) })
		if err == nil && (p == nil) == (sp == nil) {
			t.Fatalf("decoded both or neither: %v %v", p, sp)
		}
		if limit := uint64(16*len(b) + 1<<20); n > limit {
			t.Fatalf("%d bytes of input allocated %d bytes, over %d", len(b), n, limit)
		}
	})
}

// TestProofOverLimitsRefused: a proof file over MaxProofBytes is refused
// from its size alone; one of unknown size once MaxProofBytes were read;
// an audit path longer than a tree is high, or more events than a proof
// holds, before they are decoded.
func TestProofOverLimitsRefused(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.proof.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// 60 MiB, sparse: nothing is written.
	if err := f.Truncate(60 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var err1 error
	if n := allocated(func() { _, _, err1 = ReadProof(big) }); n > 1<<20 {
		t.Errorf("refusing a 60 MiB proof by its size allocated %d bytes", n)
	}
	var le *LimitError
	if !errors.As(err1, &le) || le.File != big || le.Limit != MaxProofBytes || !strings.Contains(err1.Error(), big) {
		t.Fatalf("ReadProof of 60 MiB: %v, want a LimitError naming the file", err1)
	}

	var err2 error
	stream := &repeatReader{head: []byte(`{"format":"relay-proof-v1","events":[{"data":"`), fill: 'A', n: 60 << 20}
	if n := allocated(func() { _, _, err2 = decodeProof(stream, "pipe", -1) }); n > 3*MaxProofBytes {
		t.Errorf("refusing 60 MiB of unknown size allocated %d bytes, over 3 × %d", n, MaxProofBytes)
	}
	if !errors.As(err2, &le) {
		t.Fatalf("decodeProof of 60 MiB: %v, want a LimitError", err2)
	}

	hash := `"` + Hash{1}.String() + `",`
	for _, tt := range []struct {
		name, proof, want string
	}{
		{"a path of 65 hashes", `{"format":"relay-proof-v1","events":[{"path":[` + strings.Repeat(hash, 64) + hash[:len(hash)-1] + `]}]}`, "an audit path over the limit of 64 entries"},
		{"a stream proof's path of 100 000 hashes", `{"format":"relay-stream-proof-v1","events":[],"path":[` + strings.Repeat(hash, 1e5) + hash[:len(hash)-1] + `]}`, "an audit path over the limit of 64 entries"},
		{"1001 events", `{"format":"relay-proof-v1","events":[` + strings.Repeat(`{},`, 1000) + `{}]}`, "the proof's events over the limit of 1000 entries"},
		{"a stream proof of 100 000 events", `{"format":"relay-stream-proof-v1","events":[` + strings.Repeat(`{"leaf":"","link":""},`, 1e5) + `{}]}`, "the proof's events over the limit of 1000 entries"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.proof)
			var err error
			// Read (the input's size), counted, not decoded (several
			// times the input's size).
			if n := allocated(func() { _, _, err = decodeProof(bytes.NewReader(b), "p.json", int64(len(b))) }); n > uint64(len(b))*5/4+1<<20 {
				t.Errorf("refusing %d bytes allocated %d", len(b), n)
			}
			if !errors.As(err, &le) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "p.json") {
				t.Fatalf("got %v, want a LimitError naming %q", err, tt.want)
			}
		})
	}
}

// FuzzExportLines reads arbitrary export files, lines limited to 4 KiB: a
// line, an end or an error, never a panic; what is held stays within a
// small multiple of the limit however long a line is.
func FuzzExportLines(f *testing.F) {
	f.Add([]byte(`{"position":1,"id":"e","stream":"s","type":"t","data":{},"metadata":{},"leaf":"` + Hash{1}.String() + `","link":"` + Hash{2}.String() + `"}` + "\n"))
	f.Add([]byte("{}\n\n{\"position\":2}"))
	f.Add([]byte(`{"data":"` + strings.Repeat("A", 5000) + `"}` + "\n"))
	f.Add([]byte(strings.Repeat("[", 5000)))
	const max = 4 << 10
	f.Fuzz(func(t *testing.T, b []byte) {
		r := readLines(bytes.NewReader(b), "events.jsonl", max)
		n := allocated(func() {
			for {
				var l ExportLine
				ok, err := r.next(&l)
				if err != nil {
					var le *LimitError
					if errors.As(err, &le) && (le.Line < 1 || le.Limit != max) {
						t.Fatalf("limit error %+v", le)
					}
					if !strings.Contains(err.Error(), "events.jsonl") {
						t.Fatalf("error %q does not name the file", err)
					}
					return
				}
				if !ok {
					return
				}
			}
		})
		if limit := uint64(8*len(b) + 256<<10); n > limit {
			t.Fatalf("%d bytes of input allocated %d bytes, over %d", len(b), n, limit)
		}
	})
}

// TestExportLineOverLimitRefused: a line longer than MaxExportLine is
// refused once MaxExportLine bytes of it were read, naming its number,
// and what the reader held stays near the limit.
func TestExportLineOverLimitRefused(t *testing.T) {
	good := `{"position":1,"id":"e","stream":"s","type":"t","data":{},"metadata":{}}` + "\n"
	src := &repeatReader{head: []byte(good + good + `{"position":3,"data":"`), fill: 'A', n: MaxExportLine + 10<<20, tail: []byte("\"}\n")}
	r := readLines(src, "events.jsonl", MaxExportLine)
	var err error
	var lines int
	n := allocated(func() {
		for {
			var l ExportLine
			var ok bool
			if ok, err = r.next(&l); err != nil || !ok {
				return
			}
			lines++
		}
	})
	var le *LimitError
	if !errors.As(err, &le) || le.Line != 3 || lines != 2 {
		t.Fatalf("after %d lines: %v, want a LimitError at line 3", lines, err)
	}
	for _, want := range []string{"events.jsonl line 3", "over the limit of"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The line's buffer doubles up to the limit: about twice what it ends
	// at, never the line's full length.
	if n > 5*MaxExportLine/2 {
		t.Errorf("refusing a %d-byte line allocated %d bytes, over 2.5 × %d", MaxExportLine+10<<20, n, MaxExportLine)
	}
}

// TestExportFileLimitNamed: Verify of an export whose third line is over
// the limit fails with a LimitError naming the file and the line.
func TestExportFileLimitNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	good := `{"position":1,"id":"e","stream":"s","type":"t","data":{},"metadata":{}}` + "\n"
	if _, err := io.Copy(f, &repeatReader{head: []byte(good + good + `{"data":"`), fill: 'A', n: MaxExportLine}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, stream := range []bool{false, true} {
		var err error
		if stream {
			x, _ := OpenStreamExport(path)
			_, err = VerifyStreams(context.Background(), x, Options{})
			x.Close()
		} else {
			x, _ := OpenExport(path)
			_, err = Verify(context.Background(), x, Options{})
			x.Close()
		}
		if !IsLimit(err) || !strings.Contains(err.Error(), path+" line 3") {
			t.Errorf("per stream %v: %v, want a LimitError naming %s line 3", stream, err, path)
		}
	}
}

// TestExportPagesBoundedByBytes: a page of events read from an export
// ends once it holds pageBytes of data, however many events were asked
// for, and the next page goes on from there.
func TestExportPagesBoundedByBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const lines, size = 40, 1 << 20
	data := `"` + strings.Repeat("A", size) + `"`
	for i := range lines {
		if _, err := f.WriteString(`{"position":` + strconv.Itoa(i+1) + `,"data":` + data + "}\n"); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	x, err := OpenExport(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var pages []int
	for {
		es, err := x.Events(context.Background(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		pages = append(pages, len(es))
	}
	want := pageBytes/(size+2) + 1
	if len(pages) != 2 || pages[0] != want || pages[0]+pages[1] != lines {
		t.Fatalf("pages of %v events, want %d then the rest of %d", pages, want, lines)
	}
}

// TestProblemsBoundedWhileVerifying: an export with a problem on every
// line (events without links, in an order the verifier must sort) reports
// the first maxProblems by position, as when every problem was kept.
func TestProblemsBoundedWhileVerifying(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	var b strings.Builder
	const lines = 5000
	for i := range lines {
		// Positions 2, 1, 4, 3, …: each neighbour pair swapped.
		pos := i + 2
		if i%2 == 1 {
			pos = i
		}
		b.WriteString(`{"position":` + strconv.Itoa(pos) + `,"id":"e","stream":"s","type":"t","data":{},"metadata":{}}` + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	x, err := OpenExport(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	r, err := Verify(context.Background(), x, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != maxProblems || r.Events != lines {
		t.Fatalf("%d problems of %d events, want %d of %d", len(r.Problems), r.Events, maxProblems, lines)
	}
	for i, p := range r.Problems {
		if p.Position != uint64(i+1) || p.Kind != EventInserted {
			t.Fatalf("problem %d: %+v, want an inserted event at position %d", i, p, i+1)
		}
	}
}

// TestAddProblemKeepsTheFirst: however many problems are found, at most
// twice maxProblems are held, and the first maxProblems by position stay.
func TestAddProblemKeepsTheFirst(t *testing.T) {
	var ps []Problem
	for i := 100_000; i > 0; i-- {
		ps = addProblem(ps, Problem{Position: uint64(i)})
		if len(ps) >= 2*maxProblems {
			t.Fatalf("%d problems held", len(ps))
		}
	}
	sortProblems(ps)
	if ps[0].Position != 1 || ps[maxProblems-1].Position != maxProblems {
		t.Fatalf("kept positions %d to %d, want 1 to %d", ps[0].Position, ps[maxProblems-1].Position, maxProblems)
	}
}
