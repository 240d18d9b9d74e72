// Package binwire is the compact binary encoding the relay uses where JSON
// costs too much for whole request and response bodies: between nodes (the
// node bus) and between the relay and its agents (agentwire). Strings and
// byte slices are a uvarint length and the bytes; integers are varints.
// Standard library and domain only.
package binwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"github.com/relayhq/relay/domain"
)

// MaxLen bounds one decoded string, header list or body, so a corrupt
// length cannot make a decoder allocate without limit.
const MaxLen = 64 << 20

// ErrMalformed is a message that does not decode.
var ErrMalformed = errors.New("malformed binary message")

// Writer appends values to B.
type Writer struct{ B []byte }

func (w *Writer) Str(s string) {
	w.B = binary.AppendUvarint(w.B, uint64(len(s)))
	w.B = append(w.B, s...)
}

func (w *Writer) Bytes(p []byte) {
	w.B = binary.AppendUvarint(w.B, uint64(len(p)))
	w.B = append(w.B, p...)
}

func (w *Writer) Int(n int64)   { w.B = binary.AppendVarint(w.B, n) }
func (w *Writer) Uint(n uint64) { w.B = binary.AppendUvarint(w.B, n) }
func (w *Writer) Byte(c byte)   { w.B = append(w.B, c) }

func (w *Writer) Bool(v bool) {
	if v {
		w.B = append(w.B, 1)
	} else {
		w.B = append(w.B, 0)
	}
}

func (w *Writer) Headers(h []domain.Header) {
	w.Uint(uint64(len(h)))
	for _, x := range h {
		w.Str(x.Name)
		w.Str(x.Value)
	}
}

// UvarintLen is the length of what Uint appends for x.
func UvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// StrLen is the length of what Str or Bytes appends for n bytes.
func StrLen(n int) int { return UvarintLen(uint64(n)) + n }

// HeadersLen is the length of what Headers appends for h.
func HeadersLen(h []domain.Header) int {
	n := UvarintLen(uint64(len(h)))
	for _, x := range h {
		n += StrLen(len(x.Name)) + StrLen(len(x.Value))
	}
	return n
}

// Reader reads what Writer wrote; the first error sticks and every later
// read returns zero values.
type Reader struct {
	b   []byte
	err error
	// strs, once Strings was called, holds the bytes of every string
	// read, which share its memory.
	strs strings.Builder
}

// NewReader reads b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

func (r *Reader) fail() { r.failWith(ErrMalformed) }

// failWith fails the read with err, which wraps ErrMalformed.
func (r *Reader) failWith(err error) { r.err, r.b = err, nil }

func (r *Reader) Uint() uint64 {
	if r.err != nil {
		return 0
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[k:]
	return n
}

func (r *Reader) Int() int64 {
	if r.err != nil {
		return 0
	}
	n, k := binary.Varint(r.b)
	if k <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[k:]
	return n
}

// Bytes shares the message's memory instead of copying a body: callers
// decode a fresh buffer once and never write to it, or copy out what they
// keep before they reuse the buffer.
func (r *Reader) Bytes() []byte {
	n := r.Uint()
	if r.err != nil {
		return nil
	}
	if n > MaxLen || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

// Str copies a string out of the message: on its own, or into the memory
// Strings set aside.
func (r *Reader) Str() string {
	p := r.Bytes()
	if r.strs.Cap() == 0 || len(p) == 0 {
		return string(p)
	}
	// The builder only appends: the strings it returned stay as they
	// are, and keep its earlier memory alive if it has to grow.
	start := r.strs.Len()
	r.strs.Write(p)
	return r.strs.String()[start:]
}

// Strings makes the strings read from now on share one allocation of n
// bytes (or more when they need it) instead of one each: for a message
// of many small strings read once, whose strings are kept together.
func (r *Reader) Strings(n int) {
	if n > 0 {
		r.strs.Grow(min(n, len(r.b)))
	}
}

func (r *Reader) Bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) == 0 || r.b[0] > 1 {
		r.fail()
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

// Headers reads a header list of at most max headers whose names and
// values take at most maxBytes together. A longer list, or a header with
// an empty name (an HTTP field name never is), fails the read, before the
// list is allocated when the count is past max: a decoder gets no more
// headers than its caller can take, whatever the message's length allows
// (an empty header is two bytes on the wire and 32 in a domain.Header).
func (r *Reader) Headers(max, maxBytes int) []domain.Header {
	n := r.Uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(max) {
		r.failWith(fmt.Errorf("%w: %d headers, more than %d", ErrMalformed, n, max))
		return nil
	}
	if n > uint64(len(r.b))/3 { // a name of a byte or more, and two lengths
		r.fail()
		return nil
	}
	h := make([]domain.Header, 0, n)
	size := 0
	for range n {
		name, value := r.Str(), r.Str()
		if r.err != nil {
			return nil
		}
		if name == "" {
			r.failWith(fmt.Errorf("%w: a header without a name", ErrMalformed))
			return nil
		}
		if size += len(name) + len(value); size > maxBytes {
			r.failWith(fmt.Errorf("%w: headers past %d bytes", ErrMalformed, maxBytes))
			return nil
		}
		h = append(h, domain.Header{Name: name, Value: value})
	}
	return h
}

// Expect reads one byte that must be want (a format version or a kind).
func (r *Reader) Expect(want byte) {
	if r.err != nil {
		return
	}
	if len(r.b) == 0 || r.b[0] != want {
		r.fail()
		return
	}
	r.b = r.b[1:]
}

// More reports whether bytes are left to read (an optional last field).
func (r *Reader) More() bool { return r.err == nil && len(r.b) != 0 }

// End fails unless every byte was read, naming what was decoded.
func (r *Reader) End(what string) error {
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	if r.err != nil {
		return fmt.Errorf("decode %s: %w", what, r.err)
	}
	return nil
}
