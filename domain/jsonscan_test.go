package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

func TestLookupJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name string
		body string
		path string
		want JSONValue
		err  string
	}{
		{"string", `{"a":"x"}`, "a", JSONValue{Text: "x", Found: true, String: true}, ""},
		{"dotted", `{"a":{"b":{"c":"x"}}}`, "a.b.c", JSONValue{Text: "x", Found: true, String: true}, ""},
		{"number as written", `{"a":-1.50e+3}`, "a", JSONValue{Text: "-1.50e+3", Found: true}, ""},
		{"true", `{"a":true}`, "a", JSONValue{Text: "true", Found: true}, ""},
		{"null", `{"a":null}`, "a", JSONValue{Text: "null", Found: true}, ""},
		{"index", `{"a":[1,{"b":"x"}]}`, "a.1.b", JSONValue{Text: "x", Found: true, String: true}, ""},
		{"index as Atoi reads it", `[0,1,2]`, "+2", JSONValue{Text: "2", Found: true}, ""},
		{"index past the end", `[0,1]`, "2", JSONValue{}, ""},
		{"object is no value", `{"a":{"b":1}}`, "a", JSONValue{}, ""},
		{"array is no value", `{"a":[]}`, "a", JSONValue{}, ""},
		{"absent", `{"a":1}`, "b", JSONValue{}, ""},
		{"through a scalar", `{"a":1}`, "a.b", JSONValue{}, ""},
		{"escapes decoded", `{"a":"\u00e9\n\"\ud83d\ude00"}`, "a", JSONValue{Text: "é\n\"😀", Found: true, String: true}, ""},
		{"lone surrogate", `{"a":"\ud800x"}`, "a", JSONValue{Text: "\uFFFDx", Found: true, String: true}, ""},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "a", JSONValue{Text: "\uFFFD", Found: true, String: true}, ""},
		{"escaped key", `{"\u0061":"x"}`, "a", JSONValue{Text: "x", Found: true, String: true}, ""},
		{"last repeat wins", `{"a":"1","a":"2"}`, "a", JSONValue{Text: "2", Found: true, String: true}, ""},
		{"last repeat of a parent wins", `{"a":{"b":"1"},"a":{"c":"2"}}`, "a.b", JSONValue{}, ""},
		{"whitespace", " \t\n{ \"a\" : \"x\" } \r\n", "a", JSONValue{Text: "x", Found: true, String: true}, ""},
		{"to the depth limit", `{"a":"x","d":` + deep(MaxJSONScanDepth-1) + `}`, "a", JSONValue{Text: "x", Found: true, String: true}, ""},
		{"over the depth limit", `{"a":"x","d":` + deep(MaxJSONScanDepth) + `}`, "a", JSONValue{}, "nesting deeper than 64"},
		{"too large", `"` + strings.Repeat("x", MaxJSONScanBody) + `"`, "a", JSONValue{}, "body larger than 256 KiB"},
		{"empty", ``, "a", JSONValue{}, "body is not JSON"},
		{"trailing data", `{"a":"x"} {}`, "a", JSONValue{}, "body is not JSON"},
		{"form", `a=b`, "a", JSONValue{}, "body is not JSON"},
		{"unterminated", `{"a":"x"`, "a", JSONValue{}, "body is not JSON"},
		{"bad escape", `{"a":"\x"}`, "a", JSONValue{}, "body is not JSON"},
		{"control in string", "{\"a\":\"\n\"}", "a", JSONValue{}, "body is not JSON"},
		{"leading zero", `{"a":01}`, "a", JSONValue{}, "body is not JSON"},
		{"bare dot", `{"a":1.}`, "a", JSONValue{}, "body is not JSON"},
		{"trailing comma", `{"a":1,}`, "a", JSONValue{}, "body is not JSON"},
		{"bad literal", `{"a":tru}`, "a", JSONValue{}, "body is not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs, err := LookupJSON([]byte(tt.body), strings.Split(tt.path, "."))
			if tt.err != "" {
				var se *JSONScanError
				if !errors.As(err, &se) || se.Reason != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if vs[0] != tt.want {
				t.Fatalf("got %+v, want %+v", vs[0], tt.want)
			}
		})
	}
}

func TestLookupJSONSeveralPaths(t *testing.T) {
	vs, err := LookupJSON([]byte(`{"id":"e1","type":"t","event":{"type":"inner"},"x":[{"id":"no"}]}`),
		[]string{"id"}, []string{"type"}, []string{"event", "type"}, []string{"missing"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.Text)
	}
	if strings.Join(got, "|") != "e1|t|inner|" {
		t.Fatalf("got %q", got)
	}
}

// referenceLookup is what decoding the whole body gives for path, as
// filters did before they scanned: (text, found) or ok false when the body
// does not decode.
func referenceLookup(body []byte, path []string) (text string, found, ok bool) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return "", false, false
	}
	if _, err := d.Token(); err != io.EOF {
		return "", false, false // more after the value
	}
	for _, seg := range path {
		switch x := v.(type) {
		case map[string]any:
			var in bool
			if v, in = x[seg]; !in {
				return "", false, true
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return "", false, true
			}
			v = x[i]
		default:
			return "", false, true
		}
	}
	switch x := v.(type) {
	case string:
		return x, true, true
	case json.Number:
		return x.String(), true, true
	case bool:
		return strconv.FormatBool(x), true, true
	case nil:
		return "null", true, true
	}
	return "", false, true
}

// FuzzLookupJSON compares the scanner with decoding the whole body.
func FuzzLookupJSON(f *testing.F) {
	for _, seed := range []struct{ body, path string }{
		{`{"a":"x"}`, "a"},
		{`{"a":{"b":[1,2,{"c":null}]}}`, "a.b.2.c"},
		{`{"a":"1","a":{"b":true}}`, "a.b"},
		{`[{},{},{}]`, "1"},
		{`{"\u00e9":"\ud83d\ude00"}`, "é"},
		{"{\"a\":\"\xff\xfe\"}", "a"},
		{`{"a":-0.5E-7}`, "a"},
		{`{"a":"\ud800\u0041"}`, "a"},
		{`{"a" : [ ] , "b" : { } }`, "b"},
		{`{"a":1} x`, "a"},
		{`"top"`, "a"},
		{`{"a":[[[[["deep"]]]]]}`, "a.0.0.0.0.0"},
	} {
		f.Add([]byte(seed.body), seed.path)
	}
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		if len(body) > 4<<10 || path == "" {
			return
		}
		segs := strings.Split(path, ".")
		vs, err := LookupJSON(body, segs)
		text, found, ok := referenceLookup(body, segs)
		var se *JSONScanError
		switch {
		case errors.As(err, &se) && se == errJSONTooDeep:
			return // the reference decodes deeper than the scanner looks
		case err != nil && ok:
			t.Fatalf("scanner: %v; decoding: ok", err)
		case err == nil && !ok:
			t.Fatalf("scanner accepted %q; decoding failed", body)
		case err == nil && (vs[0].Found != found || vs[0].Text != text):
			t.Fatalf("scanner %+v; decoding %q found=%v", vs[0], text, found)
		}
	})
}

// emptyObjects is `[{},{},...]` of n bytes or a little more.
func emptyObjects(n int) []byte {
	b := make([]byte, 0, n+3)
	b = append(b, '[')
	for len(b) < n {
		b = append(b, "{},"...)
	}
	b[len(b)-1] = ']'
	return b
}

// realisticBody is a Stripe-like event padded to about n bytes with line
// items.
func realisticBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":"evt_1","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1","status":"paid","lines":[`)
	for i := 0; b.Len() < n-200; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":"il_` + strconv.Itoa(i) + `","amount":1999,"currency":"eur","description":"1 × Widget \u00e9 (at €19.99 / month)","period":{"start":1700000000,"end":1702592000},"proration":false,"metadata":{}}`)
	}
	b.WriteString(`]}}}`)
	return b.Bytes()
}

// BenchmarkFilterJSON runs one json: filter on a hostile and a realistic
// body (figures in docs/benchmarks.md).
func BenchmarkFilterJSON(b *testing.B) {
	fs, err := ParseFilters([]string{"json:data.object.status=paid"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"empty-objects-10MiB", emptyObjects(10 << 20)},
		{"empty-objects-256KiB", emptyObjects(MaxJSONScanBody - 8)},
		{"realistic-256KiB", realisticBody(MaxJSONScanBody - 8)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				Match(fs, &FilterRequest{Method: "POST", Target: "/", Body: bc.body})
			}
		})
	}
}

// BenchmarkFilterJSONDecode is what the filter cost when it decoded the
// whole body into Go values, for comparison.
func BenchmarkFilterJSONDecode(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"empty-objects-10MiB", emptyObjects(10 << 20)},
		{"realistic-256KiB", realisticBody(MaxJSONScanBody - 8)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				referenceLookup(bc.body, []string{"data", "object", "status"})
			}
		})
	}
}

// TestFilterJSONAllocations holds the scan to its bound: a 10 MiB body is
// not looked inside, and a 256 KiB one allocates only the scanner's few
// small slices, whatever it holds.
func TestFilterJSONAllocations(t *testing.T) {
	fs, err := ParseFilters([]string{"json:data.object.status=paid"})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range [][]byte{emptyObjects(10 << 20), emptyObjects(MaxJSONScanBody - 8), realisticBody(MaxJSONScanBody - 8)} {
		allocs := testing.AllocsPerRun(5, func() {
			Match(fs, &FilterRequest{Method: "POST", Target: "/", Body: body})
		})
		if allocs > 32 {
			t.Errorf("%d-byte body: %.0f allocations per match, want at most 32", len(body), allocs)
		}
	}
}
