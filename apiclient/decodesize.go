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
// cost is added up as encoding/json would allocate it for that type, in
// the order of the text, and a text whose first n bytes cost more than
// DecodeBudget(n) is refused: an answer is weighed so while it arrives,
// and refused before the rest of it is read.
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

// DecodeTooLargeError is a text whose first Bytes bytes would decode into
// more memory than their budget.
type DecodeTooLargeError struct {
	Bytes  int   // the part of the text weighed
	Budget int64 // DecodeBudget(Bytes)
}

func (e *DecodeTooLargeError) Error() string {
	return fmt.Sprintf("%d bytes of JSON that would decode into more than %d MiB (at most %d MiB plus 1.25 times their length), so they are not decoded",
		e.Bytes, e.Budget>>20, DecodeFloor>>20)
}

// CheckDecode refuses data, the JSON text to be decoded into v (a
// pointer, as for json.Unmarshal), when decoding its first n bytes would
// allocate more than DecodeBudget(n), for some n: the cost is added up in
// the order of the text, as Do weighs an answer while it arrives, each
// byte looked at once and nothing kept (a struct's key with escapes is
// unescaped to be matched, and dropped). A text that is not JSON, or does
// not fit v, passes: decoding it fails anyway.
func CheckDecode(data []byte, v any) error {
	if v == nil {
		return nil
	}
	s := sizer{data: data}
	s.value(reflect.TypeOf(v), 0)
	return s.err()
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

// How a type decodes itself, if it does.
const (
	notUnmarshaler = iota + 1
	jsonUnmarshaler
	textUnmarshaler
)

var unmarshalCache sync.Map // reflect.Type → int

// unmarshals is how a pointer to t decodes itself, if it does (an
// interface's value is decoded as any).
func unmarshals(t reflect.Type) int {
	if u, ok := unmarshalCache.Load(t); ok {
		return u.(int)
	}
	u := notUnmarshaler
	switch p := reflect.PointerTo(t); {
	case t.Kind() == reflect.Interface:
	case p.Implements(unmarshalerType):
		u = jsonUnmarshaler
	case p.Implements(textUnmarshalerType):
		u = textUnmarshaler
	}
	unmarshalCache.Store(t, u)
	return u
}

// sizer adds up what decoding a text costs, stopping once past the budget
// of the part weighed so far. A nil type is a value decoding skips (an
// unknown field): it costs nothing. The text is data, or, when next is
// set, data and the parts next gives until it gives nil: the sizer asks
// for a part only when it has weighed the ones before, so a reader
// feeding it stops reading once the text is refused.
type sizer struct {
	data []byte        // the text, or its part being weighed
	i    int           // in data; one past its end after an escape's backslash
	base int           // where data starts in the text
	next func() []byte // the text's next part; nil: data is all of it

	cost      int64
	at        int  // where the cost passed its budget
	over      bool // past the budget or a count: stop
	bad       bool // not JSON: stop
	unbounded bool // weigh it all (tests)

	// Counted when maxObjects and maxValues are set (Do's answers), so
	// that tooMany names the count passed.
	objects, values       int
	maxObjects, maxValues int
	tooMany               string

	raw  []byte // what str kept of a key
	kbuf []byte

	// What the walk looked up of the types it met, kept here: the caches
	// behind them cost atomic loads, per value.
	unmarshal map[reflect.Type]int
	fields    map[reflect.Type]*fieldSet
}

// unmarshals is unmarshals(t), looked up once per walk.
func (s *sizer) unmarshals(t reflect.Type) int {
	u, ok := s.unmarshal[t]
	if !ok {
		if s.unmarshal == nil {
			s.unmarshal = map[reflect.Type]int{}
		}
		u = unmarshals(t)
		s.unmarshal[t] = u
	}
	return u
}

// fieldsOf is fieldsOf(t), looked up once per walk.
func (s *sizer) fieldsOf(t reflect.Type) *fieldSet {
	f, ok := s.fields[t]
	if !ok {
		if s.fields == nil {
			s.fields = map[reflect.Type]*fieldSet{}
		}
		f = fieldsOf(t)
		s.fields[t] = f
	}
	return f
}

// pos is where the sizer is in the text.
func (s *sizer) pos() int { return s.base + s.i }

func (s *sizer) add(n int64) {
	if s.cost += n; s.cost > DecodeBudget(s.pos()) && !s.unbounded && !s.over {
		s.over, s.at = true, s.pos()
	}
}

// err is what the walk found: a count passed, or a cost past its budget.
func (s *sizer) err() error {
	switch {
	case s.tooMany == "objects":
		return &AnswerTooLargeError{What: s.tooMany, Limit: s.maxObjects}
	case s.tooMany == "values":
		return &AnswerTooLargeError{What: s.tooMany, Limit: s.maxValues}
	case s.over:
		return &DecodeTooLargeError{Bytes: s.at, Budget: DecodeBudget(s.at)}
	}
	return nil
}

// fail stops the walk on a text that is not JSON: it does not decode.
func (s *sizer) fail() { s.bad = true }

// avail reports whether a byte is at s.i, asking next for the text's next
// part when data is weighed.
func (s *sizer) avail() bool {
	for s.i >= len(s.data) {
		if s.next == nil || s.over || s.bad {
			return false
		}
		p := s.next()
		if p == nil {
			s.next = nil
			return false
		}
		s.i -= len(s.data)
		s.base += len(s.data)
		s.data = p
	}
	return true
}

func (s *sizer) ws() {
	for s.avail() {
		data, i := s.data, s.i
		for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
			i++
		}
		if s.i = i; i < len(data) {
			return
		}
	}
}

func (s *sizer) done() bool { return s.over || s.bad || !s.avail() }

// count counts one value, and one object when object: past either bound
// the walk stops.
func (s *sizer) count(object bool) {
	if s.maxValues == 0 {
		return
	}
	s.values++
	if object {
		s.objects++
	}
	switch {
	case s.objects > s.maxObjects:
		s.tooMany, s.over = "objects", true
	case s.values > s.maxValues:
		s.tooMany, s.over = "values", true
	}
}

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
		if u := s.unmarshals(t); u == jsonUnmarshaler || c == '"' && u == textUnmarshaler {
			start := s.pos()
			s.value(nil, depth)
			s.add(int64(s.pos() - start))
			return
		}
	}
	s.count(c == '{')
	if s.over {
		return
	}
	switch c {
	case '{':
		s.object(t, depth)
	case '[':
		s.array(t, depth)
	case '"':
		n := s.str(0)
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
		start := s.pos()
	scalar:
		for s.avail() {
			data, i := s.data, s.i
			for ; i < len(data); i++ {
				switch data[i] {
				case ' ', '\t', '\r', '\n', ',', ']', '}', ':':
					s.i = i
					break scalar
				}
			}
			s.i = i
		}
		if s.pos() == start {
			s.fail()
			return
		}
		if t != nil && t.Kind() == reflect.Interface && (c == '-' || c >= '0' && c <= '9') {
			s.add(boxedNumber)
		}
	}
}

// str skips a string and returns the length of its text between quotes,
// keeping its first keep+1 bytes of it in s.raw (a key to match: one
// longer than keep matches nothing).
func (s *sizer) str(keep int) int {
	s.i++
	start := s.pos()
	s.raw = s.raw[:0]
	for s.avail() {
		// Most of an answer is inside strings (bodies in base64): skip to
		// the next quote or backslash.
		rest := s.data[s.i:]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			j = len(rest)
		}
		if b := bytes.IndexByte(rest[:j], '\\'); b >= 0 {
			j = b
		}
		s.keep(rest[:j], keep)
		s.i += j
		if j == len(rest) {
			continue
		}
		if rest[j] == '"' {
			s.i++
			return s.pos() - 1 - start
		}
		// A backslash and the byte it escapes, which may be in the next part.
		s.keep(rest[j:j+1], keep)
		s.i++
		if !s.avail() {
			break
		}
		s.keep(s.data[s.i:s.i+1], keep)
		s.i++
	}
	s.fail()
	return 0
}

func (s *sizer) keep(b []byte, keep int) {
	if room := keep + 1 - len(s.raw); room > 0 && keep > 0 {
		s.raw = append(s.raw, b[:min(len(b), room)]...)
	}
}

func (s *sizer) object(t reflect.Type, depth int) {
	var fields *fieldSet
	var key, elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = s.fieldsOf(t)
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
	if s.avail() && s.data[s.i] == '}' {
		s.i++
		return
	}
	for !s.done() {
		s.ws()
		if s.done() || s.data[s.i] != '"' {
			s.fail()
			return
		}
		keep := 0
		if fields != nil {
			keep = fields.keep
		}
		n := s.str(keep)
		if s.done() { // the text ends in the key, or right after it
			s.fail()
			return
		}
		var next reflect.Type
		switch {
		case fields != nil:
			if n > keep {
				break // longer than any name it could match
			}
			s.kbuf = appendFolded(s.kbuf[:0], unquote(s.raw))
			if f, ok := fields.byName[string(s.kbuf)]; ok {
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
	if s.avail() && s.data[s.i] == ']' {
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

// unquote is a key's text between its quotes, unescaped when it has
// escapes (rare: encoding/json matches the unescaped key).
func unquote(inner []byte) []byte {
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	var k string
	if json.Unmarshal(append(append([]byte{'"'}, inner...), '"'), &k) != nil {
		return nil
	}
	return []byte(k)
}

// members calls fn with each key of the JSON object text (unescaped; nil
// when longer than keep bytes as written) and its value's text, in order,
// sharing text's memory, and stops where text is not an object's.
func members(text []byte, keep int, fn func(key, value []byte)) {
	s := sizer{data: text}
	s.ws()
	if s.done() || s.data[s.i] != '{' {
		return
	}
	s.i++
	for {
		s.ws()
		if s.done() || s.data[s.i] != '"' {
			return
		}
		var key []byte
		if n := s.str(keep); n <= keep {
			key = unquote(s.raw)
		}
		s.ws()
		if s.done() || s.data[s.i] != ':' {
			return
		}
		s.i++
		s.ws()
		start := s.i
		s.value(nil, 0)
		if s.bad {
			return
		}
		fn(key, text[start:s.i])
		if !s.more('}') {
			return
		}
	}
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

// fieldSet is a struct's fields by folded JSON name, and the longest key
// as written that may name one: a key folds to no fewer runes than it
// has, each escaped in at most 12 bytes (a surrogate pair).
type fieldSet struct {
	byName map[string]field
	keep   int
}

var fieldCache sync.Map // reflect.Type → *fieldSet

// fieldsOf is t's fields by folded JSON name, those of embedded structs
// included unless a shallower field has the name.
func fieldsOf(t reflect.Type) *fieldSet {
	if m, ok := fieldCache.Load(t); ok {
		return m.(*fieldSet)
	}
	f := &fieldSet{byName: map[string]field{}}
	addFields(f.byName, t, 0, 0)
	for name := range f.byName {
		f.keep = max(f.keep, 12*len(name))
	}
	fieldCache.Store(t, f)
	return f
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
	var data []byte
	members(answer, 12*len("data"), func(key, value []byte) {
		if string(appendFolded(nil, key)) == "DATA" {
			data = value
		}
	})
	return data
}
