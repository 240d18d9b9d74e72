// Package compare tells what differs between two attempts of a delivery:
// the request each sent (the recorded one, or an edited retry's, by
// domain.RequestEdit.Apply) and the response each got. It is the one
// comparison the API serves (Delivery.compare); the command line and the
// console only render its answer.
package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/relayhq/relay/domain"
)

// MaxChanges bounds what a comparison lists of one part (headers, a
// body): past it, one more change says how many more differ.
const MaxChanges = 100

// maxLines bounds the texts compared line by line (the table of their
// longest common subsequence is lines×lines): longer ones are compared by
// size.
const maxLines = 1000

// MaxStructured bounds the bodies compared field by field or line by
// line: the default capture cap, what a recorded body holds. Larger ones
// (an edit's body may reach --max-body, a captured response more) are
// compared by size, so that decoding and walking a comparison's two bodies
// takes a bounded time and memory whatever they hold.
const MaxStructured = 256 << 10

// Change is one difference: where, and the value on each side (nil:
// absent on that side).
type Change struct {
	Where string
	A, B  *string
}

// Request is what an attempt sent.
type Request struct {
	Method, Target string
	Headers        []domain.Header
	Body           []byte
}

// Edited is the request an edited retry made of the recorded one, by the
// relay's own rule; e nil is the recorded request.
func (r Request) Edited(e *domain.RequestEdit) Request {
	if e == nil {
		return r
	}
	var out Request
	out.Method, out.Target, out.Headers, out.Body = e.Apply(r.Method, r.Target, r.Headers, r.Body)
	return out
}

// Response is what an attempt got back.
type Response struct {
	Status   int
	Headers  []domain.Header
	Body     []byte
	Captured bool
	// NotCaptured says why Body is not stored although the Endpoint
	// captures responses (domain.ForwardResponded.NotCaptured).
	NotCaptured string
	// Size is the captured body's size. A body over MaxStructured, which
	// is compared by size, may be given as the log holds it (Encoded, in
	// base64) instead of Body: equal bodies have equal encodings, and
	// decoding 8 MB of base64 only to compare its size took most of a
	// comparison's time.
	Size    int64
	Encoded []byte
}

// Side is one side of a comparison: the request as recorded (Response
// nil), or an attempt and what it got back (nil while it waits).
type Side struct {
	Request  Request
	Response *Response
}

// Result is a comparison: what differs in the requests, in the
// responses, and a note when a part could not be compared.
type Result struct {
	Request, Response []Change
	// ResponseCompared is false when a side has no response: Response is
	// then empty.
	ResponseCompared bool
	Note             string
}

// Notes a comparison may carry.
const (
	NoteNoResponse  = "a side has no response (the request as recorded, or an attempt still waiting): only the requests are compared"
	NoteNotCaptured = "response bodies are compared only when the Endpoint captures them (relay endpoints update ENDPOINT --response-capture)"
	// NoteNotStored + the reason (domain.NotCapturedStorageQuota): a
	// side's body was not stored although the Endpoint captures them.
	NoteNotStored = "response bodies are not compared: a body was not stored: "
)

// Sides compares two sides: the requests always, the responses when both
// have one (their bodies when both were captured).
func Sides(a, b Side) Result {
	r := Result{Request: requests(a.Request, b.Request), Response: []Change{}}
	switch {
	case a.Response == nil || b.Response == nil:
		r.Note = NoteNoResponse
	default:
		r.Response, r.ResponseCompared = responses(*a.Response, *b.Response), true
		switch {
		case a.Response.NotCaptured != "":
			r.Note = NoteNotStored + a.Response.NotCaptured
		case b.Response.NotCaptured != "":
			r.Note = NoteNotStored + b.Response.NotCaptured
		case !a.Response.Captured || !b.Response.Captured:
			r.Note = NoteNotCaptured
		}
	}
	return r
}

func requests(a, b Request) []Change {
	out := []Change{}
	if a.Method != b.Method {
		out = append(out, Change{"method", &a.Method, &b.Method})
	}
	if a.Target != b.Target {
		out = append(out, Change{"path", &a.Target, &b.Target})
	}
	out = append(out, Headers(a.Headers, b.Headers)...)
	return append(out, Bodies(a.Body, b.Body)...)
}

func responses(a, b Response) []Change {
	out := []Change{}
	if a.Status != b.Status {
		sa, sb := strconv.Itoa(a.Status), strconv.Itoa(b.Status)
		out = append(out, Change{"status", &sa, &sb})
	}
	out = append(out, Headers(a.Headers, b.Headers)...)
	if a.Captured && b.Captured {
		out = append(out, responseBodies(a, b)...)
	}
	return out
}

// responseBodies compares two captured answers' bodies, as Bodies does;
// one given encoded (over MaxStructured) is compared by size, or found
// equal by its encoding.
func responseBodies(a, b Response) []Change {
	if a.Encoded == nil && b.Encoded == nil {
		return Bodies(a.Body, b.Body)
	}
	if a.Encoded != nil && b.Encoded != nil && bytes.Equal(a.Encoded, b.Encoded) {
		return nil
	}
	sa, sb := fmt.Sprintf("%d bytes", a.Size), fmt.Sprintf("%d bytes", b.Size)
	return []Change{{fmt.Sprintf("body (over %d KiB, compared by size)", MaxStructured>>10), &sa, &sb}}
}

// Headers compares headers by name (any case), the values of one name
// joined in order. Each name's values are joined once: joining them one
// line at a time copied the text so far for every line, and a local answer
// of 5 000 lines of one name (the log keeps 1 MiB of them, however many
// lines) allocated 2.6 GB a comparison.
func Headers(a, b []domain.Header) []Change {
	values := func(hs []domain.Header) (map[string]string, map[string]string) {
		lists, names := map[string][]string{}, map[string]string{}
		for _, h := range hs {
			k := strings.ToLower(h.Name)
			if _, ok := names[k]; !ok {
				names[k] = h.Name
			}
			lists[k] = append(lists[k], h.Value)
		}
		v := make(map[string]string, len(lists))
		for k, l := range lists {
			v[k] = strings.Join(l, ", ")
		}
		return v, names
	}
	va, na := values(a)
	vb, nb := values(b)
	var out []Change
	for _, k := range sortedKeys(va, vb) {
		x, inA := va[k]
		y, inB := vb[k]
		if inA && inB && x == y {
			continue
		}
		name := na[k]
		if name == "" {
			name = nb[k]
		}
		c := Change{Where: "header " + name}
		if inA {
			c.A = &x
		}
		if inB {
			c.B = &y
		}
		out = append(out, c)
	}
	return out
}

// Bodies compares two bodies: field by field when both are JSON, line
// by line when both are text, by size otherwise or when either is over
// MaxStructured.
func Bodies(a, b []byte) []Change {
	if bytes.Equal(a, b) {
		return nil
	}
	sizes := func(where string) []Change {
		sa, sb := fmt.Sprintf("%d bytes", len(a)), fmt.Sprintf("%d bytes", len(b))
		return []Change{{where, &sa, &sb}}
	}
	if len(a) > MaxStructured || len(b) > MaxStructured {
		return sizes(fmt.Sprintf("body (over %d KiB, compared by size)", MaxStructured>>10))
	}
	var ja, jb any
	if json.Unmarshal(a, &ja) == nil && json.Unmarshal(b, &jb) == nil {
		var d differ
		d.values("body $", ja, jb)
		if len(d.out) == 0 { // the same JSON, written differently
			return sizes("body (the same JSON, formatted differently)")
		}
		return d.capped()
	}
	if utf8.Valid(a) && utf8.Valid(b) {
		// Counted before split: a text of many short lines is compared by
		// size without a string per line.
		la, lb := bytes.Count(a, []byte("\n"))+1, bytes.Count(b, []byte("\n"))+1
		if la > maxLines || lb > maxLines {
			sa, sb := fmt.Sprintf("%d lines", la), fmt.Sprintf("%d lines", lb)
			return []Change{{"body (text, differs)", &sa, &sb}}
		}
		return capChanges(diffLines(strings.Split(string(a), "\n"), strings.Split(string(b), "\n")))
	}
	return sizes("body (binary, differs)")
}

// differ lists the paths where two JSON values differ: the first
// MaxChanges with their values, the rest only counted, so that a body of
// many small differences builds no text for the ones not shown.
type differ struct {
	out  []Change
	more int
}

// full is true once MaxChanges are listed: past it no path or text is
// built, differences are only counted.
func (d *differ) full() bool { return len(d.out) >= MaxChanges }

func (d *differ) add(path string, a, b any, inA, inB bool) {
	if d.full() {
		d.more++
		return
	}
	c := Change{Where: path}
	if inA {
		c.A = jsonText(a)
	}
	if inB {
		c.B = jsonText(b)
	}
	d.out = append(d.out, c)
}

func (d *differ) values(path string, a, b any) {
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA && okB {
		for _, k := range sortedKeys(ma, mb) {
			x, inA := ma[k]
			y, inB := mb[k]
			var p string
			if !d.full() {
				p = path + "." + k
			}
			if inA && inB {
				d.values(p, x, y)
			} else {
				d.add(p, x, y, inA, inB)
			}
		}
		return
	}
	la, okA := a.([]any)
	lb, okB := b.([]any)
	if okA && okB {
		for i := range max(len(la), len(lb)) {
			var p string
			if !d.full() {
				p = fmt.Sprintf("%s[%d]", path, i)
			}
			switch {
			case i < len(la) && i < len(lb):
				d.values(p, la[i], lb[i])
			case i < len(la):
				d.add(p, la[i], nil, true, false)
			default:
				d.add(p, nil, lb[i], false, true)
			}
		}
		return
	}
	if !sameLeaf(a, b) {
		d.add(path, a, b, true, true)
	}
}

// sameLeaf tells whether two decoded JSON values, not both objects or
// both arrays, are equal: an object or array against anything else never
// is; scalars (nil, bool, float64, string) compare as values.
func sameLeaf(a, b any) bool {
	switch a.(type) {
	case map[string]any, []any:
		return false
	}
	switch b.(type) {
	case map[string]any, []any:
		return false
	}
	return a == b
}

// capped is the changes listed, and one more that counts the rest.
func (d *differ) capped() []Change {
	if d.more == 0 {
		return d.out
	}
	more := fmt.Sprintf("%d more differences", d.more)
	return append(d.out, Change{Where: "…", A: &more})
}

// sortedKeys is the keys of a and b together, sorted.
func sortedKeys[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func jsonText(v any) *string {
	b, _ := json.Marshal(v)
	s := string(b)
	return &s
}

// diffLines lists the lines one text has and the other has not, by the
// longest common subsequence (texts of up to maxLines lines each;
// longer ones are compared by size). Between two common lines, the k-th line
// removed and the k-th added are one change (a line changed, not a line
// removed and another added); the lines left over follow, removed first,
// as diff prints them.
func diffLines(a, b []string) []Change {
	if len(a) > maxLines || len(b) > maxLines {
		sa, sb := fmt.Sprintf("%d lines", len(a)), fmt.Sprintf("%d lines", len(b))
		return []Change{{"body (text, differs)", &sa, &sb}}
	}
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []Change
	var removed, added []int // the current run's lines, by index in a and b
	flush := func() {
		n := min(len(removed), len(added))
		for k := range n {
			ai, bj := removed[k], added[k]
			where := fmt.Sprintf("body line %d", ai+1)
			if ai != bj {
				where = fmt.Sprintf("body line %d → %d", ai+1, bj+1)
			}
			out = append(out, Change{where, &a[ai], &b[bj]})
		}
		for _, ai := range removed[n:] {
			out = append(out, Change{fmt.Sprintf("body line %d", ai+1), &a[ai], nil})
		}
		for _, bj := range added[n:] {
			out = append(out, Change{fmt.Sprintf("body line %d", bj+1), nil, &b[bj]})
		}
		removed, added = removed[:0], added[:0]
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			flush()
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			removed = append(removed, i)
			i++
		default:
			added = append(added, j)
			j++
		}
	}
	flush()
	return out
}

func capChanges(cs []Change) []Change {
	if len(cs) <= MaxChanges {
		return cs
	}
	more := fmt.Sprintf("%d more differences", len(cs)-MaxChanges)
	return append(cs[:MaxChanges], Change{Where: "…", A: &more})
}
