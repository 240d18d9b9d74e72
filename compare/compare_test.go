package compare_test

import (
	"encoding/base64"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/relayhq/relay/compare"
	"github.com/relayhq/relay/domain"
)

func text(c compare.Change) string {
	s := func(p *string) string {
		if p == nil {
			return "(none)"
		}
		return *p
	}
	return c.Where + ": " + s(c.A) + " → " + s(c.B)
}

// TestBodies: JSON bodies are compared field by field, text line by
// line, anything else by size.
func TestBodies(t *testing.T) {
	for _, tt := range []struct {
		name string
		a, b string
		want []string
	}{
		{"same", `{"a":1}`, `{"a":1}`, nil},
		{"json fields", `{"type":"charge.failed","data":{"amount":100,"tags":["a","b"]},"old":true}`,
			`{"type":"charge.succeeded","data":{"amount":100,"tags":["a"]},"new":null}`,
			[]string{`body $.data.tags[1]: "b" → (none)`, `body $.new: (none) → null`, `body $.old: true → (none)`, `body $.type: "charge.failed" → "charge.succeeded"`}},
		{"json formatted differently", `{"a":1}`, "{\n  \"a\": 1\n}", []string{"body (the same JSON, formatted differently): 7 bytes → 12 bytes"}},
		{"text lines", "one\ntwo\nthree", "one\n2\nthree\nfour",
			[]string{"body line 2: two → 2", "body line 4: (none) → four"}},
		{"changed line moved down", "a\nb\nc", "x\na\nB\nc",
			[]string{"body line 1: (none) → x", "body line 2 → 3: b → B"}},
		{"two changed, one removed", "a\nb\nc\nd\ne", "a\nB\nC\ne",
			[]string{"body line 2: b → B", "body line 3: c → C", "body line 4: d → (none)"}},
		{"binary", "\xff\x00", "\xff\x01", []string{"body (binary, differs): 2 bytes → 2 bytes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range compare.Bodies([]byte(tt.a), []byte(tt.b)) {
				got = append(got, text(c))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %q\nwant %q", got, tt.want)
				}
			}
		})
	}
}

// TestHeaders: by name in any case, several values of one name
// compared together.
func TestHeaders(t *testing.T) {
	a := []domain.Header{{Name: "Content-Type", Value: "text/plain"}, {Name: "X-Sig", Value: "1"}, {Name: "X-Sig", Value: "2"}, {Name: "Same", Value: "s"}}
	b := []domain.Header{{Name: "content-type", Value: "application/json"}, {Name: "X-Sig", Value: "1"}, {Name: "Same", Value: "s"}, {Name: "X-New", Value: "n"}}
	var got []string
	for _, c := range compare.Headers(a, b) {
		got = append(got, text(c))
	}
	want := []string{"header Content-Type: text/plain → application/json", "header X-New: (none) → n", "header X-Sig: 1, 2 → 1"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// TestSides: an edited retry is compared as the relay sent it (by
// domain.RequestEdit.Apply), responses only when both sides have one,
// bodies only when both were captured.
func TestSides(t *testing.T) {
	recorded := compare.Request{Method: "POST", Target: "/hook", Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{"a":1}`)}
	body := []byte(`{"a":2}`)
	edited := recorded.Edited(&domain.RequestEdit{Target: "/hook?v=2", Body: &body, SetHeaders: []domain.Header{{Name: "X-Try", Value: "2"}}})
	ok := &compare.Response{Status: 200, Body: []byte("ok"), Captured: true}
	failed := &compare.Response{Status: 500, Body: []byte("boom"), Captured: true}
	uncaptured := &compare.Response{Status: 500}
	notStored := &compare.Response{Status: 200, NotCaptured: domain.NotCapturedStorageQuota}
	for _, tt := range []struct {
		name     string
		a, b     compare.Side
		request  []string
		response []string
		note     string
	}{
		{"recorded with itself", compare.Side{Request: recorded}, compare.Side{Request: recorded.Edited(nil)}, nil, nil, compare.NoteNoResponse},
		{"edited retry", compare.Side{Request: recorded, Response: failed}, compare.Side{Request: edited, Response: ok},
			[]string{"path: /hook → /hook?v=2", "header X-Try: (none) → 2", "body $.a: 1 → 2"},
			[]string{"status: 500 → 200", "body line 1: boom → ok"}, ""},
		{"a body not captured", compare.Side{Request: recorded, Response: uncaptured}, compare.Side{Request: recorded, Response: ok},
			nil, []string{"status: 500 → 200"}, compare.NoteNotCaptured},
		{"a body not stored over the quota", compare.Side{Request: recorded, Response: ok}, compare.Side{Request: recorded, Response: notStored},
			nil, nil, "response bodies are not compared: a body was not stored: storage quota exceeded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := compare.Sides(tt.a, tt.b)
			if got := texts(r.Request); !slices.Equal(got, tt.request) {
				t.Errorf("request: got %q\nwant %q", got, tt.request)
			}
			if got := texts(r.Response); !slices.Equal(got, tt.response) {
				t.Errorf("response: got %q\nwant %q", got, tt.response)
			}
			if r.Note != tt.note {
				t.Errorf("note: got %q, want %q", r.Note, tt.note)
			}
		})
	}
}

// TestBodiesCapped: past MaxChanges, one more change counts the rest.
func TestBodiesCapped(t *testing.T) {
	var a, b []string
	for i := range compare.MaxChanges + 5 {
		a, b = append(a, fmt.Sprint("a", i)), append(b, fmt.Sprint("b", i))
	}
	got := compare.Bodies([]byte(strings.Join(a, "\n")), []byte(strings.Join(b, "\n")))
	if len(got) != compare.MaxChanges+1 || text(got[compare.MaxChanges]) != "…: 5 more differences → (none)" {
		t.Fatalf("got %d changes, last %q", len(got), text(got[len(got)-1]))
	}
}

func texts(cs []compare.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, text(c))
	}
	return out
}

// TestBodiesBoundedWork: what a comparison allocates is bounded by its
// bodies' size (each at most MaxStructured compared by field or line),
// however many differences they hold: past MaxChanges the rest are
// counted, not written out; a text of many lines is counted before it is
// split; a larger body is compared by size.
func TestBodiesBoundedWork(t *testing.T) {
	array := "[" + strings.Repeat("0,", compare.MaxStructured/2-2) + "0]" // 131 071 elements, within MaxStructured
	object := "{" + strings.Repeat(`"k":0,`, 1) + `"z":0}`
	var keys strings.Builder
	keys.WriteString("{")
	for i := range 20_000 {
		fmt.Fprintf(&keys, `"%d":0,`, i)
	}
	keys.WriteString(`"end":0}`)
	for _, tt := range []struct {
		name     string
		a, b     string
		last     string
		maxBytes uint64
	}{
		{"array against an empty one", array, "[]", "…: 130971 more differences → (none)", 12 << 20},
		{"array against another", array, strings.ReplaceAll(array, "0", "1"), "…: 130971 more differences → (none)", 24 << 20},
		{"many keys", keys.String(), object, "…: 19903 more differences → (none)", 12 << 20},
		{"many lines", strings.Repeat("\n", compare.MaxStructured), "x", "body (text, differs): 262145 lines → 1 lines", 1 << 20},
		{"over the bound", strings.Repeat("a", compare.MaxStructured+1), "b", "body (over 256 KiB, compared by size): 262145 bytes → 1 bytes", 1 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := []byte(tt.a), []byte(tt.b)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			got := compare.Bodies(a, b)
			runtime.ReadMemStats(&after)
			if last := text(got[len(got)-1]); last != tt.last {
				t.Errorf("last change %q, want %q", last, tt.last)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > tt.maxBytes {
				t.Errorf("allocated %d KiB comparing %d and %d bytes, want at most %d KiB", n>>10, len(a), len(b), tt.maxBytes>>10)
			} else {
				t.Logf("allocated %d KiB, %d changes", n>>10, len(got))
			}
		})
	}
}

// BenchmarkBodiesLargest: the most a comparison of two bodies costs,
// two JSON arrays of MaxStructured that differ in every element.
func BenchmarkBodiesLargest(b *testing.B) {
	a := []byte("[" + strings.Repeat("0,", compare.MaxStructured/2-2) + "0]")
	c := []byte(strings.ReplaceAll(string(a), "0", "1"))
	b.ReportAllocs()
	for b.Loop() {
		compare.Bodies(a, c)
	}
}

// TestEncodedBodiesComparedBySize: answers over MaxStructured given as the
// log holds them (in base64) are equal when their encodings are, else
// compared by size, whichever way the other side was given.
func TestEncodedBodiesComparedBySize(t *testing.T) {
	big := func(c byte) []byte { return []byte(strings.Repeat(string(c), compare.MaxStructured+3)) }
	encoded := func(b []byte) *compare.Response {
		return &compare.Response{Status: 200, Captured: true, Size: int64(len(b)), Encoded: []byte(base64.StdEncoding.EncodeToString(b))}
	}
	decoded := func(b []byte) *compare.Response {
		return &compare.Response{Status: 200, Captured: true, Size: int64(len(b)), Body: b}
	}
	for _, tc := range []struct {
		name string
		a, b *compare.Response
		want []string
	}{
		{"the same", encoded(big('a')), encoded(big('a')), nil},
		{"different", encoded(big('a')), encoded(big('b')), []string{"body (over 256 KiB, compared by size): 262147 bytes → 262147 bytes"}},
		{"one decoded", decoded([]byte("{}")), encoded(big('b')), []string{"body (over 256 KiB, compared by size): 2 bytes → 262147 bytes"}},
		{"both decoded", decoded(big('a')), decoded(big('a')), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := compare.Sides(compare.Side{Response: tc.a}, compare.Side{Response: tc.b})
			var got []string
			for _, c := range r.Response {
				got = append(got, text(c))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("changes %q, want %q", got, tc.want)
			}
		})
	}
}
