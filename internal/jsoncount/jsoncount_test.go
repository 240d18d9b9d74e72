package jsoncount

import (
	"bytes"
	"encoding/json"
	"testing"
)

// tokens counts the values of a text as encoding/json's tokenizer reads
// them (duplicate keys included, which a decoded map would merge).
func tokens(t *testing.T, data []byte) int {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	n := 0
	var inObject []bool // per open container: an object?
	key := false        // the next token is an object's key
	for {
		tok, err := d.Token()
		if err != nil {
			return n
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			n++
			inObject = append(inObject, tok == json.Delim('{'))
			key = tok == json.Delim('{')
			continue
		case json.Delim('}'), json.Delim(']'):
			inObject = inObject[:len(inObject)-1]
		default:
			if key {
				key = false
				continue
			}
			n++
		}
		key = len(inObject) > 0 && inObject[len(inObject)-1]
	}
}

var cases = []struct {
	text string
	want int
}{
	{`{}`, 1},
	{`[]`, 1},
	{`"a"`, 1},
	{`-1.5e+10`, 1},
	{`null`, 1},
	{` true `, 1},
	{`{"a":1}`, 2},
	{`{"a" : "b", "c":[1,2,{"d":null}]}`, 7},
	{`["a:", "\"", "\\", {"k\"":"v"} ]`, 6},
	{`{"input":{"headers":[{},{},{}]}}`, 6},
	{`"{[,:]}"`, 1},
	{`[false,true,null,0,-0,1e1]`, 7},
}

func TestValues(t *testing.T) {
	for _, c := range cases {
		if n, over := Values([]byte(c.text), -1); n != c.want || over {
			t.Errorf("Values(%s) = %d, %v; want %d", c.text, n, over, c.want)
		}
		if got := tokens(t, []byte(c.text)); got != c.want {
			t.Errorf("%s: encoding/json sees %d values, the test says %d", c.text, got, c.want)
		}
	}
}

func TestValuesStopsPastTheLimit(t *testing.T) {
	text := []byte(`[` + string(bytes.Repeat([]byte(`{},`), 1000)) + `{}]`)
	if n, over := Values(text, 1002); n != 1002 || over {
		t.Fatalf("at the limit: %d, %v", n, over)
	}
	if n, over := Values(text, 1001); n != 1002 || !over {
		t.Fatalf("past the limit: %d, %v; want it to stop at 1002", n, over)
	}
	if n, over := Values(text, 10); n != 11 || !over {
		t.Fatalf("far past the limit: %d, %v; want it to stop at 11", n, over)
	}
}

// TestValuesAllocatesNothing: the count must cost nothing proportional to
// the text, or counting would be the allocation it prevents.
func TestValuesAllocatesNothing(t *testing.T) {
	text := []byte(`{"input":{"headers":[` + string(bytes.Repeat([]byte(`{"name":"a","value":"b"},`), 100_000)) + `{}]}}`)
	allocs := testing.AllocsPerRun(5, func() { Values(text, -1) })
	if allocs != 0 {
		t.Fatalf("Values allocated %v times", allocs)
	}
}

func FuzzValues(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c.text))
	}
	f.Add([]byte(`{"a":`))
	f.Add([]byte(`"\`))
	f.Add([]byte(`[1,"2\u00e9",{"x":[true]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, over := Values(data, -1)
		if over || n < 0 {
			t.Fatalf("no limit: %d, %v", n, over)
		}
		if m, over := Values(data, n/2); n > 0 && (!over || m != n/2+1) {
			t.Fatalf("limit %d: %d, %v", n/2, m, over)
		}
		if !json.Valid(data) {
			return
		}
		if want := tokens(t, data); n != want {
			t.Fatalf("Values(%q) = %d; encoding/json decodes %d values", data, n, want)
		}
	})
}

// BenchmarkValues: 14 MiB of empty objects, the largest message an agent's
// socket takes.
func BenchmarkValues(b *testing.B) {
	text := []byte(`{"v":[` + string(bytes.Repeat([]byte(`{},`), 14<<20/3)) + `{}]}`)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Values(text, -1)
	}
}
