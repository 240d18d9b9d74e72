package nodebus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
)

// Forward commands and replies cross the bus as a compact binary encoding
// rather than JSON: they carry whole request and response bodies, and JSON
// spent a base64 encoding and a full scan on each of them twice per proxied
// request, several percent of the relay's CPU. The first byte is a format
// version, so a node of another version is refused rather than misread
// (several nodes may share a distributed Pub/Sub). Strings and byte slices
// are a uvarint length and the bytes; integers are varints.

const (
	wireCommandV2 = 2 // 1 had no host, scheme and sender address
	wireReplyV3   = 3 // 1 had no log position, 2 no failure text
	// wireMaxLen bounds one decoded string, header list or body, so a
	// corrupt length cannot make the decoder allocate without limit.
	wireMaxLen = 64 << 20
)

var errWire = errors.New("malformed bus message")

type wireWriter struct{ b []byte }

func (w *wireWriter) str(s string) {
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}
func (w *wireWriter) bytes(p []byte) {
	w.b = binary.AppendUvarint(w.b, uint64(len(p)))
	w.b = append(w.b, p...)
}
func (w *wireWriter) int(n int64)   { w.b = binary.AppendVarint(w.b, n) }
func (w *wireWriter) uint(n uint64) { w.b = binary.AppendUvarint(w.b, n) }

func (w *wireWriter) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

func (w *wireWriter) headers(h []domain.Header) {
	w.uint(uint64(len(h)))
	for _, x := range h {
		w.str(x.Name)
		w.str(x.Value)
	}
}

// wireReader reads what wireWriter wrote; the first error sticks and every
// later read returns zero values.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) fail() { r.err, r.b = errWire, nil }

func (r *wireReader) uint() uint64 {
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

func (r *wireReader) int() int64 {
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

func (r *wireReader) raw() []byte {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > wireMaxLen || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *wireReader) str() string { return string(r.raw()) }

// bytes shares the payload's memory instead of copying a body of up to
// --max-body: each message's payload is a fresh buffer from its encoder,
// decoded once and never written to.
func (r *wireReader) bytes() []byte { return r.raw() }

func (r *wireReader) bool() bool {
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

func (r *wireReader) headers() []domain.Header {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b))/2 { // each header takes at least two bytes
		r.fail()
		return nil
	}
	h := make([]domain.Header, 0, n)
	for range n {
		h = append(h, domain.Header{Name: r.str(), Value: r.str()})
	}
	return h
}

func (r *wireReader) version(want byte) {
	if len(r.b) == 0 || r.b[0] != want {
		r.fail()
		return
	}
	r.b = r.b[1:]
}

func (r *wireReader) end(what string) error {
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	if r.err != nil {
		return fmt.Errorf("decode %s: %w", what, r.err)
	}
	return nil
}

func encodeCommand(c domain.ForwardCommand) []byte {
	w := wireWriter{b: make([]byte, 0, 256+len(c.Body))}
	w.b = append(w.b, wireCommandV2)
	w.str(c.DeliveryID)
	w.str(c.AttemptID)
	w.str(c.EndpointID)
	w.str(c.AccountID)
	w.str(c.Method)
	w.str(c.Target)
	w.headers(c.Headers)
	w.bytes(c.Body)
	w.int(int64(c.Timeout))
	w.bool(c.CaptureResponse)
	w.str(c.CorrelationID)
	w.str(c.RequestEventID)
	w.uint(c.RequestRevision)
	w.str(c.Host)
	w.str(c.Scheme)
	w.str(c.RemoteAddr)
	return w.b
}

func decodeCommand(b []byte) (domain.ForwardCommand, error) {
	r := wireReader{b: b}
	r.version(wireCommandV2)
	c := domain.ForwardCommand{
		DeliveryID: r.str(), AttemptID: r.str(), EndpointID: r.str(), AccountID: r.str(),
		Method: r.str(), Target: r.str(), Headers: r.headers(), Body: r.bytes(),
		Timeout: time.Duration(r.int()), CaptureResponse: r.bool(), CorrelationID: r.str(),
		RequestEventID: r.str(), RequestRevision: r.uint(),
		Host: r.str(), Scheme: r.str(), RemoteAddr: r.str(),
	}
	if err := r.end("forward command"); err != nil {
		return domain.ForwardCommand{}, err
	}
	return c, nil
}

func encodeReply(rep reply) []byte {
	o := rep.Outcome
	w := wireWriter{b: make([]byte, 0, 128+len(o.Body))}
	w.b = append(w.b, wireReplyV3)
	w.str(o.AttemptID)
	w.int(int64(o.Status))
	w.headers(o.Headers)
	w.bytes(o.Body)
	w.str(o.Error)
	w.str(o.Failure)
	w.int(o.DurationMs)
	w.str(o.AgentID)
	w.uint(o.Position)
	w.str(rep.Error)
	return w.b
}

func decodeReply(b []byte) (reply, error) {
	r := wireReader{b: b}
	r.version(wireReplyV3)
	rep := reply{Outcome: domain.ForwardOutcome{
		AttemptID: r.str(), Status: int(r.int()), Headers: r.headers(), Body: r.bytes(),
		Error: r.str(), Failure: r.str(), DurationMs: r.int(), AgentID: r.str(), Position: r.uint(),
	}}
	rep.Error = r.str()
	if err := r.end("forward reply"); err != nil {
		return reply{}, err
	}
	return rep, nil
}
