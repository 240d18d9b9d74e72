package main

import (
	"testing"

	"github.com/relayhq/relay/domain"
)

func text(c change) string {
	s := func(p *string) string {
		if p == nil {
			return "(none)"
		}
		return *p
	}
	return c.Where + ": " + s(c.A) + " → " + s(c.B)
}

// TestDiffBodies: JSON bodies are compared field by field, text line by
// line, anything else by size.
func TestDiffBodies(t *testing.T) {
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
			for _, c := range diffBodies([]byte(tt.a), []byte(tt.b)) {
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

// TestDiffHeaders: by name in any case, several values of one name
// compared together.
func TestDiffHeaders(t *testing.T) {
	a := []domain.Header{{Name: "Content-Type", Value: "text/plain"}, {Name: "X-Sig", Value: "1"}, {Name: "X-Sig", Value: "2"}, {Name: "Same", Value: "s"}}
	b := []domain.Header{{Name: "content-type", Value: "application/json"}, {Name: "X-Sig", Value: "1"}, {Name: "Same", Value: "s"}, {Name: "X-New", Value: "n"}}
	var got []string
	for _, c := range diffHeaders(a, b) {
		got = append(got, text(c))
	}
	want := []string{"header Content-Type: text/plain → application/json", "header X-New: (none) → n", "header X-Sig: 1, 2 → 1"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
