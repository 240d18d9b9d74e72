package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/termtext"
)

// maxDiffLines bounds what a comparison lists of one part (headers, a
// body): past it, it says how many more differ.
const maxDiffLines = 100

// change is one difference: where, and the value on each side (nil: absent).
type change struct {
	Where string  `json:"where"`
	A     *string `json:"a"`
	B     *string `json:"b"`
}

// diffJSON is `relay deliveries diff -o json`.
type diffJSON struct {
	DeliveryID string   `json:"deliveryId"`
	A          string   `json:"a"` // "original" or the attempt's number
	B          string   `json:"b"`
	Request    []change `json:"request"`
	Response   []change `json:"response"`
	Note       string   `json:"note,omitempty"`
}

func deliveriesDiffCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
	cmd := &cobra.Command{
		Use:   "diff DELIVERY_ID [A [B]]",
		Short: "Compare two attempts of a delivery: what was sent and what came back",
		Long: `Compare two attempts of a delivery: the request each sent (the recorded one, or
an edited retry's) and the response each got — status, headers and body, JSON
bodies compared field by field. A and B are attempt numbers as deliveries show
lists them, or "original" for the request as recorded; by default the last two
attempts. Response bodies are compared only when the Endpoint captures them.`,
		Example: `  relay deliveries diff 0193a7c2-...
  relay deliveries diff 0193a7c2-... 1 3
  relay deliveries diff 0193a7c2-... original 2 -o json`,
		Args: usageArgs(cobra.RangeArgs(1, 3)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.start(c, env, out)
			if err != nil {
				return err
			}
			const q = `query($id: ID!){ delivery(id: $id){ id method path pathBase64 headers{ name value valueBase64 } bodyBase64
				attempts{ ` + attemptFields + ` response{ status headers{ name value valueBase64 } bodyBase64 captured } } } }`
			var res struct {
				Delivery *struct {
					ID, Method, Path string
					PathBase64       *string
					Headers          []headerJSON
					BodyBase64       string
					Attempts         []struct {
						attemptJSON
						Response *struct {
							Status     int
							Headers    []headerJSON
							BodyBase64 *string
							Captured   bool
						}
					}
				}
			}
			if err := client.Do(c.Context(), q, map[string]any{"id": args[0]}, &res); err != nil {
				return fmt.Errorf("diff: %w", err)
			}
			d := res.Delivery
			if d == nil {
				return notFound(args[0])
			}
			n := len(d.Attempts)
			a, b := strconv.Itoa(n-1), strconv.Itoa(n)
			switch len(args) {
			case 2:
				a = args[1]
			case 3:
				a, b = args[1], args[2]
			}
			if len(args) == 1 && n < 2 {
				return usage(fmt.Errorf("delivery %s has %d attempt(s): nothing to compare (relay retry it, or compare with: diff %s original 1)", d.ID, n, d.ID))
			}
			recorded := sentRequest{method: d.Method, target: exactText(d.Path, d.PathBase64)}
			for _, h := range d.Headers {
				recorded.headers = append(recorded.headers, domain.Header{Name: h.Name, Value: exactText(h.Value, h.ValueBase64)})
			}
			recorded.body, _ = base64.StdEncoding.DecodeString(d.BodyBase64)

			side := func(ref string) (sentRequest, *gotResponse, string, error) {
				if ref == "original" || ref == "0" {
					return recorded, nil, "the request as recorded", nil
				}
				i, err := strconv.Atoi(ref)
				if err != nil || i < 1 || i > n {
					return sentRequest{}, nil, "", usage(fmt.Errorf("attempt %q: want original or a number from 1 to %d", ref, n))
				}
				at := d.Attempts[i-1]
				req := recorded
				if at.Edit != nil {
					req = recorded.edited(at.Edit)
				}
				var got *gotResponse
				if r := at.Response; r != nil {
					got = &gotResponse{status: r.Status, captured: r.Captured}
					for _, h := range r.Headers {
						got.headers = append(got.headers, domain.Header{Name: h.Name, Value: exactText(h.Value, h.ValueBase64)})
					}
					if r.BodyBase64 != nil {
						got.body, _ = base64.StdEncoding.DecodeString(*r.BodyBase64)
					}
				}
				return req, got, "attempt " + ref + " (" + describeAttempt(at.Status, at.DurationMs, at.Error) + ")", nil
			}
			reqA, respA, nameA, err := side(a)
			if err != nil {
				return err
			}
			reqB, respB, nameB, err := side(b)
			if err != nil {
				return err
			}
			r := diffJSON{DeliveryID: d.ID, A: a, B: b, Request: diffRequests(reqA, reqB), Response: []change{}}
			switch {
			case respA == nil || respB == nil:
				r.Note = "a side has no response (the request as recorded, or an attempt still waiting): only the requests are compared"
			default:
				r.Response = diffResponses(*respA, *respB)
				if !respA.captured || !respB.captured {
					r.Note = "response bodies are compared only when the Endpoint captures them (relay endpoints update ENDPOINT --response-capture)"
				}
			}
			if out.json() {
				return writeJSON(stdout, r)
			}
			fmt.Fprintf(stdout, "comparing %s\n     with %s\n", nameA, nameB)
			printChanges(stdout, "request", r.Request)
			if respA != nil && respB != nil {
				printChanges(stdout, "response", r.Response)
			}
			if r.Note != "" {
				fmt.Fprintf(stdout, "\n(%s)\n", r.Note)
			}
			return nil
		},
	}
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
	return cmd
}

// sentRequest is what an attempt sent.
type sentRequest struct {
	method, target string
	headers        []domain.Header
	body           []byte
}

// edited is the request an edited retry made of the recorded one, by the
// relay's own rule.
func (r sentRequest) edited(e *editJSON) sentRequest {
	var edit domain.RequestEdit
	if e.Method != nil {
		edit.Method = *e.Method
	}
	if e.Path != nil {
		edit.Target = *e.Path
	}
	for _, h := range e.SetHeaders {
		edit.SetHeaders = append(edit.SetHeaders, domain.Header{Name: h.Name, Value: exactText(h.Value, h.ValueBase64)})
	}
	edit.UnsetHeaders = e.UnsetHeaders
	if e.BodyBase64 != nil {
		b, _ := base64.StdEncoding.DecodeString(*e.BodyBase64)
		edit.Body = &b
	}
	var out sentRequest
	out.method, out.target, out.headers, out.body = edit.Apply(r.method, r.target, r.headers, r.body)
	return out
}

// gotResponse is what an attempt got back.
type gotResponse struct {
	status   int
	headers  []domain.Header
	body     []byte
	captured bool
}

func diffRequests(a, b sentRequest) []change {
	out := []change{}
	if a.method != b.method {
		out = append(out, change{"method", &a.method, &b.method})
	}
	if a.target != b.target {
		out = append(out, change{"path", &a.target, &b.target})
	}
	out = append(out, diffHeaders(a.headers, b.headers)...)
	return append(out, diffBodies(a.body, b.body)...)
}

func diffResponses(a, b gotResponse) []change {
	out := []change{}
	if a.status != b.status {
		sa, sb := strconv.Itoa(a.status), strconv.Itoa(b.status)
		out = append(out, change{"status", &sa, &sb})
	}
	out = append(out, diffHeaders(a.headers, b.headers)...)
	if a.captured && b.captured {
		out = append(out, diffBodies(a.body, b.body)...)
	}
	return out
}

// diffHeaders compares headers by name (any case), the values of one name
// joined in order.
func diffHeaders(a, b []domain.Header) []change {
	values := func(hs []domain.Header) (map[string]string, map[string]string) {
		v, names := map[string]string{}, map[string]string{}
		for _, h := range hs {
			k := strings.ToLower(h.Name)
			if _, ok := v[k]; ok {
				v[k] += ", " + h.Value
			} else {
				v[k], names[k] = h.Value, h.Name
			}
		}
		return v, names
	}
	va, na := values(a)
	vb, nb := values(b)
	var out []change
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
		c := change{Where: "header " + name}
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

// diffBodies compares two bodies: field by field when both are JSON, line
// by line when both are text, by size otherwise.
func diffBodies(a, b []byte) []change {
	if bytes.Equal(a, b) {
		return nil
	}
	var ja, jb any
	if json.Unmarshal(a, &ja) == nil && json.Unmarshal(b, &jb) == nil {
		var out []change
		diffValues("body $", ja, jb, &out)
		if len(out) == 0 { // the same JSON, written differently
			sa, sb := fmt.Sprintf("%d bytes", len(a)), fmt.Sprintf("%d bytes", len(b))
			out = append(out, change{"body (the same JSON, formatted differently)", &sa, &sb})
		}
		return capChanges(out)
	}
	if utf8.Valid(a) && utf8.Valid(b) {
		return capChanges(diffLines(strings.Split(string(a), "\n"), strings.Split(string(b), "\n")))
	}
	sa, sb := fmt.Sprintf("%d bytes", len(a)), fmt.Sprintf("%d bytes", len(b))
	return []change{{"body (binary, differs)", &sa, &sb}}
}

// diffValues lists the paths where two JSON values differ.
func diffValues(path string, a, b any, out *[]change) {
	if len(*out) > maxDiffLines {
		return
	}
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA && okB {
		for _, k := range sortedKeys(ma, mb) {
			x, inA := ma[k]
			y, inB := mb[k]
			p := path + "." + k
			switch {
			case inA && inB:
				diffValues(p, x, y, out)
			case inA:
				*out = append(*out, change{p, jsonText(x), nil})
			default:
				*out = append(*out, change{p, nil, jsonText(y)})
			}
		}
		return
	}
	la, okA := a.([]any)
	lb, okB := b.([]any)
	if okA && okB {
		for i := 0; i < max(len(la), len(lb)); i++ {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i < len(la) && i < len(lb):
				diffValues(p, la[i], lb[i], out)
			case i < len(la):
				*out = append(*out, change{p, jsonText(la[i]), nil})
			default:
				*out = append(*out, change{p, nil, jsonText(lb[i])})
			}
		}
		return
	}
	if x, y := jsonText(a), jsonText(b); *x != *y {
		*out = append(*out, change{path, x, y})
	}
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
// longest common subsequence (texts of up to 1 000 lines each; longer
// ones are compared by size). Between two common lines, the k-th line
// removed and the k-th added are one change (a line changed, not a line
// removed and another added); the lines left over follow, removed first,
// as diff prints them. console/web/assets/compare.js does the same.
func diffLines(a, b []string) []change {
	if len(a) > 1000 || len(b) > 1000 {
		sa, sb := fmt.Sprintf("%d lines", len(a)), fmt.Sprintf("%d lines", len(b))
		return []change{{"body (text, differs)", &sa, &sb}}
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
	var out []change
	var removed, added []int // the current run's lines, by index in a and b
	flush := func() {
		n := min(len(removed), len(added))
		for k := range n {
			ai, bj := removed[k], added[k]
			where := fmt.Sprintf("body line %d", ai+1)
			if ai != bj {
				where = fmt.Sprintf("body line %d → %d", ai+1, bj+1)
			}
			out = append(out, change{where, &a[ai], &b[bj]})
		}
		for _, ai := range removed[n:] {
			out = append(out, change{fmt.Sprintf("body line %d", ai+1), &a[ai], nil})
		}
		for _, bj := range added[n:] {
			out = append(out, change{fmt.Sprintf("body line %d", bj+1), nil, &b[bj]})
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

func capChanges(cs []change) []change {
	if len(cs) <= maxDiffLines {
		return cs
	}
	more := fmt.Sprintf("%d more differences", len(cs)-maxDiffLines)
	return append(cs[:maxDiffLines], change{Where: "…", A: &more})
}

func printChanges(w io.Writer, title string, cs []change) {
	if len(cs) == 0 {
		fmt.Fprintf(w, "\n%s: the same\n", title)
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	show := func(s *string) string {
		if s == nil {
			return "(none)"
		}
		return termtext.Safe(*s, false)
	}
	for _, c := range cs {
		fmt.Fprintf(w, "  %s: %s → %s\n", termtext.Safe(c.Where, false), show(c.A), show(c.B))
	}
}
