package projections

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/relayhq/relay/domain"
)

// fastReceived decodes a DeliveryReceived the way decodeReceived does, for
// the compact JSON the codec writes, without encoding/json's two passes over
// the whole payload: most of a DeliveryReceived is its body and headers,
// which the views do not keep, and scanning them was the projection's
// largest cost. ok is false whenever the payload is anything but the plain
// case (whitespace, escapes in keys, keys in another case, unusual numbers,
// control characters or escapes inside the body): decodeReceived then
// decodes it, so every payload gets exactly the result (or the error) that
// decodeReceived gives it. A test and a fuzz test hold the two together.
func fastReceived(data []byte) (receivedRow, bool) { return whole(data, fastReceivedField) }

func fastReceivedField(s *scanner, p *receivedRow, key string) (ok bool) {
	switch key {
	case "delivery_id":
		ok = s.str(&p.DeliveryID)
	case "address":
		ok = s.str(&p.Address)
	case "address_kind":
		var k string
		ok = s.str(&k)
		p.AddressKind = domain.AddressKind(k)
	case "account_id":
		ok = s.str(&p.AccountID)
	case "method":
		ok = s.str(&p.Method)
	case "target":
		ok = s.str(&p.Target)
	case "host":
		ok = s.str(&p.Host)
	case "proto":
		ok = s.str(&p.Proto)
	case "remote_addr":
		ok = s.str(&p.RemoteAddr)
	case "scheme":
		ok = s.str(&p.Scheme)
	case "peer":
		ok = s.str(&p.Peer)
	case "body_size":
		ok = s.int(&p.BodySize)
	case "complete":
		ok = s.bool(&p.Complete)
	case "dropped_headers":
		ok = s.int32(&p.DroppedHeaders, 0)
	case "answer":
		ok = flatObject(s, &p.Answer)
	case "provider":
		ok = flatObject(s, &p.Provider)
	case "forward":
		ok = s.forward(&p.Forward)
	case "queued":
		ok = s.bool(&p.Queued)
	case "headers":
		p.Headers, ok = s.skipArray()
	case "body":
		p.Body, ok = s.skipPlainString()
	default:
		ok = false // unknown fields take the general path
	}
	return ok
}

// fastResponded decodes a ForwardResponded the way decodeRespondedJSON
// does, for the compact JSON the codec writes, skipping the answer's headers
// and body (kept in the log, not in the views) in one pass; ok is false for
// anything but the plain case, which decodeRespondedJSON then decodes, as
// for fastReceived.
func fastResponded(data []byte) (respondedRow, bool) { return whole(data, fastRespondedField) }

func fastRespondedField(s *scanner, p *respondedRow, key string) (ok bool) {
	switch key {
	case "delivery_id":
		ok = s.str(&p.DeliveryID)
	case "attempt_id":
		ok = s.str(&p.AttemptID)
	case "agent_id":
		ok = s.str(&p.AgentID)
	case "signature":
		ok = s.str(&p.Signature)
	case "status":
		ok = s.int32(&p.Status, -1<<31)
	case "body_size":
		ok = s.int(&p.BodySize)
	case "duration_ms":
		ok = s.int(&p.DurationMs)
	case "dropped_headers":
		ok = s.int32(&p.DroppedHeaders, 0)
	case "captured":
		ok = s.bool(&p.Captured)
	case "copy":
		ok = s.bool(&p.Copy)
	case "fidelity":
		ok = s.fidelity(&p.Fidelity)
	case "headers":
		p.Headers, ok = s.skipArray()
	case "body":
		p.Body, ok = s.skipPlainString()
	case "not_captured":
		p.NotCaptured, ok = s.skipPlainString()
	default:
		ok = false // unknown fields take the general path
	}
	return ok
}

// whole reads data as one object, each of its fields by field, and nothing
// after it; ok is false for anything else.
func whole[T any](data []byte, field func(s *scanner, p *T, key string) bool) (p T, ok bool) {
	s := scanner{b: data}
	if !s.object(func(key string) bool { return field(&s, &p, key) }) || !s.end() {
		var zero T
		return zero, false
	}
	return p, true
}

// scanner reads compact JSON from b; every method reports false, without
// guarantees about its position, when the input is not the plain case.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) end() bool { return s.i == len(s.b) }

// rawString returns the bytes of a string without escapes or control
// characters (the common case), positioned after its closing quote.
func (s *scanner) rawString() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	rest := s.b[s.i:]
	n := bytes.IndexByte(rest, '"')
	if n < 0 {
		return nil, false
	}
	v := rest[:n]
	for _, c := range v {
		if c < 0x20 || c == '\\' || c >= 0x80 {
			return nil, false // escapes, control bytes, non-ASCII (UTF-8 checks): general path
		}
	}
	s.i += n + 1
	return v, true
}

func (s *scanner) key() (string, bool) {
	k, ok := s.rawString()
	if !ok || !s.byte(':') {
		return "", false
	}
	return string(k), true
}

// str reads a string value. A plain one is copied as it is; one with
// escapes (Go's encoder writes &, < and > as \u0026 and so on, common in
// query strings), control bytes or non-ASCII text is decoded by
// encoding/json, which also validates it. The field values are short.
func (s *scanner) str(dst *string) bool {
	start := s.i
	if v, ok := s.rawString(); ok {
		*dst = string(v)
		return true
	}
	s.i = start
	if !s.byte('"') {
		return false
	}
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
	return json.Unmarshal(s.b[start:s.i], dst) == nil
}

func (s *scanner) null() bool {
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

func (s *scanner) bool(dst *bool) bool {
	rest := s.b[s.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		*dst, s.i = true, s.i+4
	case bytes.HasPrefix(rest, []byte("false")):
		*dst, s.i = false, s.i+5
	default:
		return false
	}
	return true
}

// int32 reads an int field from min to 1<<31; anything else takes the
// general path.
func (s *scanner) int32(dst *int, min int64) bool {
	var n int64
	if !s.int(&n) || n < min || n > 1<<31 {
		return false
	}
	*dst = int(n)
	return true
}

// int reads an integer written as JSON writes one: -?(0|[1-9][0-9]*).
func (s *scanner) int(dst *int64) bool {
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || (s.b[digits] == '0' && s.i-digits > 1) {
		return false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}

// flatObject reads an object without nested objects (or null) into *dst
// with encoding/json, as the small answer and provider objects are;
// anything else is not the plain case.
func flatObject[T any](s *scanner, dst **T) bool {
	if s.null() {
		*dst = nil
		return true
	}
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	n := bytes.IndexByte(s.b[s.i:], '}')
	if n < 0 {
		return false
	}
	var v T
	obj := s.b[s.i : s.i+n+1]
	if bytes.IndexByte(obj[1:], '{') >= 0 || json.Unmarshal(obj, &v) != nil {
		return false
	}
	*dst, s.i = &v, s.i+n+1
	return true
}

// forward reads a receipt's forward (or null), with the answer it may
// record. A key seen twice decodes into the same value, as encoding/json
// does.
func (s *scanner) forward(dst **forwardRow) bool {
	if s.null() {
		*dst = nil
		return true
	}
	var f forwardRow
	if *dst != nil {
		f = **dst
	}
	ok := s.object(func(key string) bool {
		switch key {
		case "attempt_id":
			return s.str(&f.AttemptID)
		case "endpoint_id":
			return s.str(&f.EndpointID)
		case "node":
			return s.str(&f.Node)
		case "responded":
			if s.null() {
				f.Responded = nil
				return true
			}
			var r respondedRow
			if f.Responded != nil {
				r = *f.Responded
			}
			if !s.object(func(key string) bool { return fastRespondedField(s, &r, key) }) {
				return false
			}
			f.Responded = &r
			return true
		}
		return false
	})
	if !ok {
		return false
	}
	*dst = &f
	return true
}

// fidelity reads a fidelity receipt (or null): two objects of three
// digests. Through encoding/json it was most of a ForwardResponded's
// decoding. A key seen twice decodes into the same value, as
// encoding/json does.
func (s *scanner) fidelity(dst **domain.Fidelity) bool {
	if s.null() {
		*dst = nil
		return true
	}
	var f domain.Fidelity
	if *dst != nil {
		f = **dst // a second "fidelity" decodes into the first
	}
	ok := s.object(func(key string) bool {
		switch key {
		case "agent":
			return s.digests(&f.Agent)
		case "relay":
			return s.digests(&f.Relay)
		}
		return false
	})
	if ok {
		*dst = &f
	}
	return ok
}

func (s *scanner) digests(d *domain.FidelityDigests) bool {
	return s.object(func(key string) bool {
		switch key {
		case "request_line":
			return s.str(&d.RequestLine)
		case "headers":
			return s.str(&d.Headers)
		case "body":
			return s.str(&d.Body)
		}
		return false
	})
}

// object reads an object whose values field reads, key by key.
func (s *scanner) object(field func(key string) bool) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return true
	}
	for {
		key, ok := s.key()
		if !ok || !field(key) {
			return false
		}
		if s.byte(',') {
			continue
		}
		return s.byte('}')
	}
}

// skipPlainString skips a string value (or null) without escapes or control
// bytes: the base64 text of a body.
func (s *scanner) skipPlainString() (jsonKind, bool) {
	if s.null() {
		return 'n', true
	}
	_, ok := s.rawString()
	return '"', ok
}

// skipArray skips an array value (or null), finding its end with strings
// and nesting accounted for, and checks it with json.Valid: the header list
// is small next to the body.
func (s *scanner) skipArray() (jsonKind, bool) {
	if s.null() {
		return 'n', true
	}
	if !s.byte('[') {
		return 0, false
	}
	start, depth := s.i-1, 1
	for s.i < len(s.b) && depth > 0 {
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
	}
	if depth != 0 || s.i > len(s.b) || !json.Valid(s.b[start:s.i]) {
		return 0, false
	}
	return '[', true
}
