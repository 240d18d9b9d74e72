package projections

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/relayhq/relay/domain"
)

// errNotReceived reports an event that is not the DeliveryReceived a
// reference named.
var errNotReceived = errors.New("not a DeliveryReceived")

// searchedRequest is what matching a search reads of a DeliveryReceived.
type searchedRequest struct {
	DeliveryID     string
	Headers        []domain.Header
	Body           []byte
	DroppedHeaders int
}

// decodeSearched reads the fields a search matches from a DeliveryReceived
// payload. Decoding the whole payload with encoding/json was nine tenths
// of a body search's CPU (it scans the body's base64 text twice, byte by
// byte); fastSearched only finds where the body's text lies and decodes
// that base64 at once. Any payload but the plain compact JSON the codec
// writes takes the codec.
//
// scratch, when not nil, holds the body's bytes (grown as needed): a
// search tests a body and drops it, so one buffer serves all of a page's.
func (v *History) decodeSearched(typ string, data []byte, scratch *[]byte) (searchedRequest, error) {
	if typ == domain.TypeDeliveryReceived {
		if r, ok := fastSearched(data, scratch); ok {
			return r, nil
		}
	}
	ev, err := v.codec.Decode(typ, data)
	if err != nil {
		return searchedRequest{}, err
	}
	received, ok := ev.(domain.DeliveryReceived)
	if !ok {
		return searchedRequest{}, errNotReceived
	}
	return searchedRequest{DeliveryID: received.DeliveryID, Headers: received.Headers, Body: received.Body,
		DroppedHeaders: received.DroppedHeaders}, nil
}

// fastSearched reads delivery_id, dropped_headers, headers and body of a
// compact JSON object and skips every other member; ok is false for
// anything it does not read exactly as encoding/json would (escapes in a
// string it reads or skips, whitespace, a body that is not plain base64).
func fastSearched(data []byte, scratch *[]byte) (r searchedRequest, ok bool) {
	s := scanner{b: data}
	if !s.byte('{') {
		return searchedRequest{}, false
	}
	if s.byte('}') {
		return r, s.end()
	}
	for {
		key, ok := s.key()
		if !ok {
			return searchedRequest{}, false
		}
		switch key {
		case "delivery_id":
			ok = s.str(&r.DeliveryID)
		case "dropped_headers":
			var n int64
			ok = s.int(&n) && n >= 0 && n <= 1<<31
			r.DroppedHeaders = int(n)
		case "headers":
			start := s.i
			var kind jsonKind
			if kind, ok = s.skipArray(); ok {
				r.Headers = nil
				if kind == '[' {
					ok = json.Unmarshal(s.b[start:s.i], &r.Headers) == nil
				}
			}
		case "body":
			ok = s.base64(&r.Body, scratch)
		default:
			// encoding/json matches names in any case: "Body" is the body.
			ok = !searchedKey(key) && s.skipValue()
		}
		if !ok {
			return searchedRequest{}, false
		}
		if s.byte(',') {
			continue
		}
		if s.byte('}') {
			return r, s.end()
		}
		return searchedRequest{}, false
	}
}

// searchedKey reports whether key names, in any case, a member
// fastSearched reads.
func searchedKey(key string) bool {
	for _, k := range []string{"delivery_id", "dropped_headers", "headers", "body"} {
		if strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}

// base64 reads a string of standard base64 (or null) into *dst, in
// *scratch when it is not nil.
func (s *scanner) base64(dst *[]byte, scratch *[]byte) bool {
	if s.null() {
		*dst = nil
		return true
	}
	// No byte-by-byte check of the text as rawString makes: a backslash,
	// a control byte or anything else outside the alphabet fails Decode.
	if !s.byte('"') {
		return false
	}
	end := bytes.IndexByte(s.b[s.i:], '"')
	if end < 0 {
		return false
	}
	text := s.b[s.i : s.i+end]
	s.i += end + 1
	if bytes.ContainsAny(text, "\r\n") { // Decode skips them; JSON refuses them raw
		return false
	}
	size := base64.StdEncoding.DecodedLen(len(text))
	var b []byte
	switch {
	case scratch == nil:
		b = make([]byte, size)
	case cap(*scratch) < size:
		*scratch = make([]byte, size)
		fallthrough
	default:
		b = (*scratch)[:size]
	}
	n, err := base64.StdEncoding.Decode(b, text)
	if err != nil {
		return false
	}
	*dst = b[:n]
	return true
}

// skipValue skips one value: a plain string, an array or object (with
// json.Valid), or a literal (true, false, null, a number).
func (s *scanner) skipValue() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.skipString()
	case c == '[':
		_, ok := s.skipArray()
		return ok
	case c == '{':
		return s.skipObject()
	default:
		start := s.i
		for s.i < len(s.b) && s.b[s.i] != ',' && s.b[s.i] != '}' {
			s.i++
		}
		return json.Valid(s.b[start:s.i])
	}
}

// skipString skips a string; one with escapes, control bytes or non-ASCII
// text is checked with json.Valid (the fields skipped are short: a target
// with & in its query is written with \u0026).
func (s *scanner) skipString() bool {
	start := s.i
	if _, ok := s.rawString(); ok {
		return true
	}
	s.i = start + 1
	for s.i < len(s.b) && s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	if s.i >= len(s.b) {
		return false
	}
	s.i++
	return json.Valid(s.b[start:s.i])
}

// skipObject skips an object the way skipArray skips an array.
func (s *scanner) skipObject() bool {
	start, depth := s.i, 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			s.i++
			for s.i < len(s.b) && s.b[s.i] != '"' {
				if s.b[s.i] == '\\' {
					s.i++
				}
				s.i++
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		}
		s.i++
		if depth == 0 {
			break
		}
	}
	return depth == 0 && s.i <= len(s.b) && json.Valid(s.b[start:s.i])
}
