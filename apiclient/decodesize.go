package apiclient

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// What a JSON text decodes into is bounded by the Go type it decodes into,
// not by its length: "{}" in a list of deliveryjson.Attempt is 3 bytes of
// text and 152 of struct, so an answer of 3 MiB of empty attempts
// allocated 905 MiB and held 179 MiB. Before a text is decoded, its
// cost is added up as encoding/json would allocate it for that type, and a
// text costing more than DecodeBudget(len(text)) is refused.
const (
	// DecodeFloor is what any text may cost: a small answer may fill a
	// struct larger than its text.
	DecodeFloor = 8 << 20
	// DecodeFactor is what a text may cost per byte of it, in quarters:
	// the relay's largest answers, lists of header fields and bodies in
	// base64, cost about a byte of memory per byte of text. More would let
	// a list of empty objects beside a long string hold more: the lists
	// encoding/json grows leave four times their size behind as garbage.
	DecodeFactor = 5
)

// DecodeBudget is what a JSON text of n bytes may cost decoded:
// DecodeFloor plus 1.25 times n, at most 88 MiB for the 64 MiB the client
// reads of an answer.
func DecodeBudget(n int) int64 { return DecodeFloor + int64(n)*DecodeFactor/4 }

// DecodeTooLargeError is a text that would decode into more memory than
// its budget.
type DecodeTooLargeError struct {
	Bytes  int   // the text's length
	Budget int64 // DecodeBudget(Bytes)
}

func (e *DecodeTooLargeError) Error() string {
	return fmt.Sprintf("%d bytes of JSON that would decode into more than %d MiB (at most %d MiB plus 1.25 times their length), so they are not decoded",
		e.Bytes, e.Budget>>20, DecodeFloor>>20)
}

// CheckDecode refuses data, the JSON text to be decoded into v (a
// pointer, as for json.Unmarshal), when decoding it would allocate more
// than DecodeBudget(len(data)), having looked at each byte once and kept
// nothing (a key with escapes is unescaped to be matched, and dropped). A text that is not JSON, or does not fit v, passes: decoding it
// fails anyway.
func CheckDecode(data []byte, v any) error {
	if v == nil {
		return nil
	}
	s := sizer{data: data, budget: DecodeBudget(len(data))}
	s.value(reflect.TypeOf(v), 0)
	if s.over {
		return &DecodeTooLargeError{Bytes: len(data), Budget: s.budget}
	}
	return nil
}

// Costs of what encoding/json allocates beside a type's own size.
const (
	mapEntry    = 16 // per entry of a map, beside twice its key and element
	anyMap      = 48 // a map[string]any
	anyEntry    = 2*(16+16) + mapEntry
	anySlice    = 24
	anyElem     = 16
	boxedString = 16
	boxedNumber = 8
	maxDepth    = 10000 // encoding/json's own
)

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// sizer adds up what decoding data costs, stopping once past budget. A
// nil type is a value decoding skips (an unknown field): it costs nothing.
type sizer struct {
	data   []byte
	i      int
	cost   int64
	budget int64
	over   bool // past budget, or not JSON: stop
	kbuf   []byte
}

func (s *sizer) add(n int64) {
	if s.cost += n; s.cost > s.budget {
		s.over = true
	}
}

// fail stops the walk on a text that is not JSON: it does not decode.
func (s *sizer) fail() { s.i = len(s.data) }

func (s *sizer) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *sizer) done() bool { return s.over || s.i >= len(s.data) }

// value walks one value decoded into t.
func (s *sizer) value(t reflect.Type, depth int) {
	s.ws()
	if s.done() {
		return
	}
	if depth > maxDepth {
		s.fail()
		return
	}
	c := s.data[s.i]
	if t != nil && c != 'n' {
		// A pointer is allocated for a value other than null; json.Unmarshal
		// calls the pointer's unmarshaler, which may keep the whole text.
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
			s.add(int64(t.Size()))
		}
		if t.Kind() != reflect.Interface && (reflect.PointerTo(t).Implements(unmarshalerType) || c == '"' && reflect.PointerTo(t).Implements(textUnmarshalerType)) {
			start := s.i
			s.value(nil, depth)
			s.add(int64(s.i - start))
			return
		}
	}
	switch c {
	case '{':
		s.object(t, depth)
	case '[':
		s.array(t, depth)
	case '"':
		n := s.str()
		switch {
		case t == nil:
		case t.Kind() == reflect.String:
			s.add(int64(n))
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
			s.add(int64(n)) // base64, a little more than it decodes to
		case t.Kind() == reflect.Interface:
			s.add(boxedString + int64(n))
		}
	default:
		start := s.i
	scalar:
		for s.i < len(s.data) {
			switch s.data[s.i] {
			case ' ', '\t', '\r', '\n', ',', ']', '}', ':':
				break scalar
			}
			s.i++
		}
		if s.i == start {
			s.fail()
			return
		}
		if t != nil && t.Kind() == reflect.Interface && (c == '-' || c >= '0' && c <= '9') {
			s.add(boxedNumber)
		}
	}
}

// str skips a string and returns the length of its text between quotes.
func (s *sizer) str() int {
	s.i++
	start := s.i
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			return s.i - 1 - start
		default:
			s.i++
		}
	}
	s.fail()
	return 0
}

func (s *sizer) object(t reflect.Type, depth int) {
	var fields map[string]field
	var key, elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = fieldsOf(t)
	case t.Kind() == reflect.Map:
		key, elem = t.Key(), t.Elem()
		s.add(anyMap)
	case t.Kind() == reflect.Interface:
		s.add(anyMap)
	default:
		t = nil // does not decode
	}
	s.i++ // {
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return
	}
	for !s.done() {
		s.ws()
		if s.done() || s.data[s.i] != '"' {
			s.fail()
			return
		}
		kstart := s.i
		n := s.str()
		if s.done() { // the text ends in the key, or right after it
			s.fail()
			return
		}
		var next reflect.Type
		switch {
		case fields != nil:
			s.kbuf = appendFolded(s.kbuf[:0], s.key(kstart))
			if f, ok := fields[string(s.kbuf)]; ok {
				next = f.typ
				s.add(f.through)
			}
		case key != nil:
			next = elem
			s.add(2*int64(key.Size()+elem.Size()) + mapEntry + int64(n))
		case t != nil: // any
			next = t
			s.add(anyEntry + int64(n))
		}
		s.ws()
		if s.done() || s.data[s.i] != ':' {
			s.fail()
			return
		}
		s.i++
		s.value(next, depth+1)
		if !s.more('}') {
			return
		}
	}
}

func (s *sizer) array(t reflect.Type, depth int) {
	var elem reflect.Type
	var each int64
	switch {
	case t == nil:
	case t.Kind() == reflect.Slice:
		elem, each = t.Elem(), int64(t.Elem().Size())
	case t.Kind() == reflect.Array:
		elem = t.Elem() // held in place; elements past its length skipped
	case t.Kind() == reflect.Interface:
		elem, each = t, anyElem
		s.add(anySlice)
	default:
		t = nil
	}
	s.i++ // [
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return
	}
	for !s.done() {
		s.add(each)
		s.value(elem, depth+1)
		if !s.more(']') {
			return
		}
	}
}

// more steps past what follows an object's or array's member: a comma
// (true: another member follows) or its closing byte (false); anything
// else ends the text.
func (s *sizer) more(closing byte) bool {
	s.ws()
	if s.done() {
		return false
	}
	switch s.data[s.i] {
	case ',':
		s.i++
		return true
	case closing:
		s.i++
	default:
		s.fail()
	}
	return false
}

// key is the key that starts at start and ends at s.i, between its
// quotes, unescaped when it has escapes (rare: encoding/json matches the
// unescaped key).
func (s *sizer) key(start int) []byte {
	q := s.data[start:s.i]
	inner := q[1 : len(q)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	var k string
	if json.Unmarshal(q, &k) != nil {
		return nil
	}
	return []byte(k)
}

// appendFolded appends name as encoding/json matches it without regard to
// case: ASCII letters upper-cased, other runes folded to one case.
func appendFolded(dst, name []byte) []byte {
	for len(name) > 0 {
		r, n := rune(name[0]), 1
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
		} else {
			r, n = utf8.DecodeRune(name)
			r = unicode.ToLower(unicode.ToUpper(r))
		}
		dst = utf8.AppendRune(dst, r)
		name = name[n:]
	}
	return dst
}

// field is a struct's field as a JSON key names it: its type, and what
// reaching it allocates (embedded structs behind pointers).
type field struct {
	typ     reflect.Type
	through int64
}

var fieldCache sync.Map // reflect.Type → map[string]field

// fieldsOf is t's fields by folded JSON name, those of embedded structs
// included unless a shallower field has the name.
func fieldsOf(t reflect.Type) map[string]field {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]field)
	}
	m := map[string]field{}
	addFields(m, t, 0, 0)
	fieldCache.Store(t, m)
	return m
}

func addFields(m map[string]field, t reflect.Type, through int64, depth int) {
	if depth > 8 {
		return
	}
	var embedded []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, f)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		k := string(appendFolded(nil, []byte(name)))
		if _, ok := m[k]; !ok {
			m[k] = field{typ: f.Type, through: through}
		}
	}
	for _, f := range embedded {
		ft, thr := f.Type, through
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
			thr += int64(ft.Size())
		}
		addFields(m, ft, thr, depth+1)
	}
}

// dataOf is the value of the "data" key of an answer (the last, as
// encoding/json keeps), nil when there is none; it shares answer's memory.
func dataOf(answer []byte) []byte {
	s := sizer{data: answer}
	s.ws()
	if s.done() || s.data[s.i] != '{' {
		return nil
	}
	s.i++
	var data []byte
	for !s.done() {
		s.ws()
		if s.done() || s.data[s.i] != '"' {
			return data
		}
		kstart := s.i
		s.str()
		s.kbuf = appendFolded(s.kbuf[:0], s.key(kstart))
		s.ws()
		if s.done() || s.data[s.i] != ':' {
			return data
		}
		s.i++
		s.ws()
		start := s.i
		s.value(nil, 0)
		if string(s.kbuf) == "DATA" {
			data = answer[start:s.i]
		}
		s.ws()
		if s.done() || s.data[s.i] != ',' {
			return data
		}
		s.i++
	}
	return data
}
