package jetstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
)

// subjectToken is a stream name as one NATS subject token. Letters, digits
// and "-" stay as they are (the relay's names, "delivery-<uuid>", read
// unchanged); every other byte, "_" included, becomes "_" and two hex
// digits. The mapping is one-to-one and the result never holds ".", "*",
// ">" or white space.
func subjectToken(stream string) string {
	var b strings.Builder
	b.Grow(len(stream))
	for i := 0; i < len(stream); i++ {
		c := stream[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return b.String()
}

// bodyVersion starts every message body, so the layout can change later
// without misreading old messages.
const bodyVersion = 1

// batch is the content of one message: the events of one append.
type batch struct {
	stream   string
	revision uint64 // of the first event
	events   []domain.EventData
	// meta holds each event's metadata as the body carries it (the bytes
	// its leaf hashes); set by encodeBatch and decodeBatch.
	meta [][]byte
}

// encodeBatch lays a batch out as: version byte, revision (uvarint), stream,
// event count (uvarint), then each event's ID, type, metadata (JSON, see
// envelope.EncodeMetadata) and data. Strings and byte fields are a uvarint
// length followed by the bytes, so data travels byte for byte.
func encodeBatch(b batch) ([]byte, error) {
	out, _, err := encodeBatchMeta(b)
	return out, err
}

// encodeBatchMeta is encodeBatch, and each event's metadata as encoded.
func encodeBatchMeta(b batch) ([]byte, [][]byte, error) {
	meta := make([][]byte, len(b.events))
	out := []byte{bodyVersion}
	out = binary.AppendUvarint(out, b.revision)
	out = appendField(out, []byte(b.stream))
	out = binary.AppendUvarint(out, uint64(len(b.events)))
	for i, e := range b.events {
		md, err := envelope.EncodeMetadata(e.Metadata)
		if err != nil {
			return nil, nil, fmt.Errorf("event %s: %w", e.ID, err)
		}
		meta[i] = md
		out = appendField(out, []byte(e.ID))
		out = appendField(out, []byte(e.Type))
		out = appendField(out, md)
		out = appendField(out, e.Data)
	}
	return out, meta, nil
}

func appendField(out, field []byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(field)))
	return append(out, field...)
}

var errBadBody = errors.New("malformed event message")

// decodeBatch reverses encodeBatch. It never trusts a length: a body cut
// short or padded fails with errBadBody instead of reading past its end.
func decodeBatch(body []byte) (batch, error) {
	r := reader{buf: body}
	if v := r.byte(); v != bodyVersion {
		return batch{}, fmt.Errorf("%w: version %d", errBadBody, v)
	}
	b := batch{revision: r.uvarint(), stream: string(r.field())}
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > MaxAppendEvents) {
		return batch{}, fmt.Errorf("%w: %d events", errBadBody, n)
	}
	for i := uint64(0); r.err == nil && i < n; i++ {
		e := domain.EventData{ID: string(r.field()), Type: string(r.field())}
		md := r.field()
		e.Data = r.field()
		if r.err != nil {
			break
		}
		var err error
		if e.Metadata, err = envelope.DecodeMetadata(md); err != nil {
			return batch{}, fmt.Errorf("%w: event %s: %w", errBadBody, e.ID, err)
		}
		b.events = append(b.events, e)
		b.meta = append(b.meta, md)
	}
	if r.err == nil && len(r.buf) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", errBadBody, len(r.buf))
	}
	if r.err != nil {
		return batch{}, r.err
	}
	return b, nil
}

// reader consumes a body and remembers the first error.
type reader struct {
	buf []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errBadBody, what)
	}
	r.buf = nil
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.buf) == 0 {
		r.fail("empty")
		return 0
	}
	c := r.buf[0]
	r.buf = r.buf[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.fail("bad length")
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// field returns a length-prefixed field; the bytes are copied so a record
// does not pin the whole message.
func (r *reader) field() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.buf)) {
		r.fail("field longer than the message")
		return nil
	}
	if n == 0 {
		return nil
	}
	f := make([]byte, n)
	copy(f, r.buf[:n])
	r.buf = r.buf[n:]
	return f
}
