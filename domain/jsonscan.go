package domain

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Looking inside a request body (filters, provider detection, handshakes)
// is work a stranger can ask for on every request, so it is bounded by
// construction: the body is scanned once, in place, by a small scanner
// that skips every value it is not asked for without building it. Only
// the values asked for are copied out. A body larger than MaxJSONScanBody
// or nested deeper than MaxJSONScanDepth is not looked inside at all: its
// fields count as absent, and the error says why.

// Limits of looking inside a JSON body.
const (
	// MaxJSONScanBody is the most bytes of a body looked inside: the
	// default capture cap, far above any provider's event.
	MaxJSONScanBody = 256 << 10
	// MaxJSONScanDepth is the deepest nesting of objects and arrays
	// scanned; the scanner recurses once per level.
	MaxJSONScanDepth = 64
	// MaxJSONScanPaths is how many paths one scan looks for.
	MaxJSONScanPaths = 64
)

// JSONScanError says why a body was not looked inside.
type JSONScanError struct{ Reason string }

func (e *JSONScanError) Error() string { return e.Reason }

var (
	errJSONTooLarge = &JSONScanError{Reason: fmt.Sprintf("body larger than %d KiB", MaxJSONScanBody>>10)}
	errJSONTooDeep  = &JSONScanError{Reason: fmt.Sprintf("nesting deeper than %d", MaxJSONScanDepth)}
	errJSONInvalid  = &JSONScanError{Reason: "body is not JSON"}
	errJSONPaths    = &JSONScanError{Reason: fmt.Sprintf("more than %d paths", MaxJSONScanPaths)}
)

// JSONValue is what a scan found at one path.
type JSONValue struct {
	// Text is a string's value, or a number, true, false or null as
	// written. Empty when not Found.
	Text string
	// Found: the path names a string, number, boolean or null (an object
	// or array is no single value).
	Found bool
	// String: the value is a JSON string.
	String bool
}

// LookupJSON finds the value at each path (segments; an array element is
// named by its index) in body, which must be one whole JSON text. Where a
// key repeats, the last one counts, as when the body is decoded. It reads
// body in place and allocates only the texts it returns.
func LookupJSON(body []byte, paths ...[]string) ([]JSONValue, error) {
	switch {
	case len(body) > MaxJSONScanBody:
		return nil, errJSONTooLarge
	case len(paths) > MaxJSONScanPaths:
		return nil, errJSONPaths
	}
	s := jsonScanner{b: body, paths: paths, spans: make([]jsonSpan, len(paths)), index: make([][]int, len(paths))}
	segments := 0
	for _, p := range paths {
		segments += len(p)
	}
	flat := make([]int, segments) // the paths' indexes share one array
	var all uint64
	for i, p := range paths {
		if len(p) == 0 {
			continue // names nothing
		}
		all |= 1 << i
		s.index[i], flat = flat[:len(p):len(p)], flat[len(p):]
		for d, seg := range p {
			s.index[i][d] = segmentIndex(seg)
		}
	}
	s.space()
	if err := s.value(0, all); err != nil {
		return nil, err
	}
	s.space()
	if s.i != len(s.b) {
		return nil, errJSONInvalid
	}
	out := make([]JSONValue, len(paths))
	for i, sp := range s.spans {
		switch sp.kind {
		case '"':
			out[i] = JSONValue{Text: unquote(body[sp.start+1 : sp.end-1]), Found: true, String: true}
		case '0', 't', 'f', 'n':
			out[i] = JSONValue{Text: string(body[sp.start:sp.end]), Found: true}
		}
	}
	return out, nil
}

// unquote is a scanned string's text: raw as it is when it has no escape
// and is valid UTF-8 (appendUnquoted would copy it byte for byte), one
// allocation when it is plain.
func unquote(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw)
	}
	return string(appendUnquoted(make([]byte, 0, len(raw)), raw))
}

// segmentIndex is the array index a path segment names, -1 for a name.
// Names are not given to strconv.Atoi, whose error for each would cost
// two allocations per segment on every delivery (DetectProvider).
func segmentIndex(seg string) int {
	if seg == "" || (seg[0] < '0' || seg[0] > '9') && seg[0] != '+' && seg[0] != '-' {
		return -1
	}
	n, err := strconv.Atoi(seg)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// jsonSpan is where a path's value lies in the body; kind is its first
// byte ('"', '{', '[', 't', 'f', 'n') or '0' for a number, 0 when absent.
type jsonSpan struct {
	start, end int
	kind       byte
}

type jsonScanner struct {
	b       []byte
	i       int
	paths   [][]string
	spans   []jsonSpan
	index   [][]int // index[i][d]: the array element paths[i][d] names, -1 for none
	scratch []byte  // an escaped key, unquoted to be compared
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value at nesting depth; active holds the paths whose
// first depth segments lead here.
func (s *jsonScanner) value(depth int, active uint64) error {
	if s.i >= len(s.b) {
		return errJSONInvalid
	}
	start := s.i
	var kind byte
	switch c := s.b[s.i]; {
	case c == '{':
		kind = c
		if err := s.object(depth, active); err != nil {
			return err
		}
	case c == '[':
		kind = c
		if err := s.array(depth, active); err != nil {
			return err
		}
	case c == '"':
		kind = c
		if _, err := s.str(); err != nil {
			return err
		}
	case c == '-' || c >= '0' && c <= '9':
		kind = '0'
		if err := s.number(); err != nil {
			return err
		}
	case c == 't':
		kind = c
		if err := s.literal("true"); err != nil {
			return err
		}
	case c == 'f':
		kind = c
		if err := s.literal("false"); err != nil {
			return err
		}
	case c == 'n':
		kind = c
		if err := s.literal("null"); err != nil {
			return err
		}
	default:
		return errJSONInvalid
	}
	for m := active; m != 0; m &= m - 1 {
		if i := trailingZeros(m); len(s.paths[i]) == depth {
			s.spans[i] = jsonSpan{start: start, end: s.i, kind: kind}
		}
	}
	return nil
}

func (s *jsonScanner) object(depth int, active uint64) error {
	if depth >= MaxJSONScanDepth {
		return errJSONTooDeep
	}
	s.i++ // {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return errJSONInvalid
		}
		keyStart := s.i
		escaped, err := s.str()
		if err != nil {
			return err
		}
		var child uint64
		if active != 0 {
			child = s.keyMatches(depth, active, s.b[keyStart+1:s.i-1], escaped)
			// A later repeat of a key replaces the earlier one's value.
			for m := child; m != 0; m &= m - 1 {
				s.spans[trailingZeros(m)] = jsonSpan{}
			}
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errJSONInvalid
		}
		s.i++
		s.space()
		if err := s.value(depth+1, child); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return errJSONInvalid
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return errJSONInvalid
		}
	}
}

// keyMatches is the active paths whose segment at depth is key (raw, as
// between its quotes; escaped when it holds a backslash or a byte that is
// not ASCII, which decoding would change).
func (s *jsonScanner) keyMatches(depth int, active uint64, raw []byte, escaped bool) uint64 {
	key := raw
	if escaped {
		s.scratch = appendUnquoted(s.scratch[:0], raw)
		key = s.scratch
	}
	var out uint64
	for m := active; m != 0; m &= m - 1 {
		i := trailingZeros(m)
		if p := s.paths[i]; len(p) > depth && string(key) == p[depth] {
			out |= 1 << i
		}
	}
	return out
}

func (s *jsonScanner) array(depth int, active uint64) error {
	if depth >= MaxJSONScanDepth {
		return errJSONTooDeep
	}
	s.i++ // [
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for n := 0; ; n++ {
		var child uint64
		for m := active; m != 0; m &= m - 1 {
			i := trailingZeros(m)
			if p := s.index[i]; len(p) > depth && p[depth] == n {
				child |= 1 << i
			}
		}
		s.space()
		if err := s.value(depth+1, child); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return errJSONInvalid
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return errJSONInvalid
		}
	}
}

// plainStringByte marks the bytes a JSON string holds as they are (the
// switch in str's default case): printable ASCII but the quote and the
// backslash.
var plainStringByte = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainWord reports whether all eight bytes of w are plainStringByte:
// none below ' ', none '"' or '\\', none from utf8.RuneSelf up. Each test
// is exact for "some byte is": a borrow only starts at a byte that is
// (github.com/golang/go's bytealg does the same for a zero byte).
func plainWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	control := (w - ones*' ') &^ w
	q := w ^ (ones * '"')
	quote := (q - ones) &^ q
	e := w ^ (ones * '\\')
	escape := (e - ones) &^ e
	return (control|quote|escape|w)&highs == 0
}

// str skips a string (s.i at its opening quote) and tells whether its
// text differs from its raw bytes once decoded: an escape, or a byte that
// is not ASCII (invalid UTF-8 decodes to U+FFFD).
func (s *jsonScanner) str() (escaped bool, err error) {
	s.i++ // "
	for s.i < len(s.b) {
		// Most of a string is plain bytes: they are skipped eight at a
		// time, then one table look-up each, on locals the compiler keeps
		// in registers; the switch sees the rest.
		b, i := s.b, s.i
		for i+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plainStringByte[b[i]] {
			i++
		}
		s.i = i
		if s.i == len(s.b) {
			break
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return escaped, nil
		case c < ' ':
			return false, errJSONInvalid
		case c >= utf8.RuneSelf:
			escaped = true
			s.i++
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return false, errJSONInvalid
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || hex4(s.b[s.i+2:s.i+6]) < 0 {
					return false, errJSONInvalid
				}
				s.i += 6
			default:
				return false, errJSONInvalid
			}
		default:
			s.i++
		}
	}
	return false, errJSONInvalid
}

// number skips a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return errJSONInvalid
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return errJSONInvalid
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return errJSONInvalid
		}
	}
	return nil
}

func (s *jsonScanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *jsonScanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return errJSONInvalid
	}
	s.i += len(word)
	return nil
}

func trailingZeros(m uint64) int { return bits.TrailingZeros64(m) }

// hex4 reads four hex digits, -1 when they are not.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendUnquoted appends the text of a scanned string's raw bytes (between
// its quotes), decoded as encoding/json decodes it: escapes resolved, a
// lone surrogate and invalid UTF-8 each as U+FFFD.
func appendUnquoted(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			e := raw[i+1]
			if e != 'u' {
				dst = append(dst, unescape[e])
				i += 2
				continue
			}
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2 = hex4(raw[i+2:])
				}
				if d := utf16.DecodeRune(r, r2); d != unicode.ReplacementChar {
					dst = utf8.AppendRune(dst, d)
					i += 6
					continue
				}
				r = unicode.ReplacementChar
			}
			dst = utf8.AppendRune(dst, r)
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			dst = utf8.AppendRune(dst, r)
			i += size
		}
	}
	return dst
}

// unescape maps a one-letter escape to its byte (the scanner allows only
// these).
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
