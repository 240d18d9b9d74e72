// Package bundle is the replay bundle (docs/exports.md): JSON lines: a header line
// {"relay_bundle":1,...}, then one line per delivery, oldest first, with
// the recorded request's exact bytes. `relay deliveries export --format
// bundle` writes it; `relay replay` reads it without a relay. This file is
// the format: its lines, the reader with its limits, and the validation
// that keeps a hand-edited or hostile bundle from making replay write
// anything but one well-formed HTTP/1.1 request per line.
package bundle

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/jsoncount"
)

// Version is the relay_bundle value this program writes and reads.
const Version = 1

// MaxLine bounds one line of a bundle, and so what replay holds in
// memory per request: a stored body of 24 MiB in base64 with its headers
// fits (the relay stores 256 KiB by default, --capture-cap).
const MaxLine = 32 << 20

// MaxLineValues bounds the JSON values of one delivery line (objects,
// arrays, strings, numbers, literals), counted before the line is decoded
// (jsoncount): decoded, a value costs far more than its text (an empty
// header object, 3 bytes of the line, about 190 bytes), so a line of
// MaxLine of them would take about 2 GiB. A header is three values (the
// object, its name and its value), and a line holds at most
// maxStoredHeaders of them, with a few values besides.
const MaxLineValues = 3*maxStoredHeaders + 64

// maxStoredHeaders is the most header fields a delivery holds: a request's
// header block is at most 1 MiB (the ceiling of --max-header-bytes) plus
// net/http's 4 KiB of slack, and the shortest field line is "a:\n".
const maxStoredHeaders = (1<<20 + 4<<10) / 3

// Header is the first line of a bundle.
type Header struct {
	RelayBundle int    `json:"relay_bundle"`
	Address     string `json:"address"`
	URL         string `json:"url"`
	ExportedAt  string `json:"exportedAt"`
	Creator     string `json:"creator"`
}

// Field is a header of a bundle line: the value as text when it is
// valid UTF-8, else its bytes in valueBase64 (exactly one of the two).
type Field struct {
	Name        string  `json:"name"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"valueBase64,omitempty"`
}

// Line is one delivery of a bundle as written; pointers tell a
// missing field from a zero one when reading.
type Line struct {
	ID             string  `json:"id"`
	ReceivedAt     string  `json:"receivedAt"`
	Method         string  `json:"method"`
	Path           string  `json:"path"`
	PathBase64     *string `json:"pathBase64,omitempty"`
	HTTPVersion    string  `json:"httpVersion,omitempty"`
	Headers        []Field `json:"headers"`
	DroppedHeaders int     `json:"droppedHeaders,omitempty"`
	BodyBase64     *string `json:"bodyBase64"`
	BodySize       *int64  `json:"bodySize"`
	Complete       *bool   `json:"complete"`
	ResponseStatus *int    `json:"responseStatus,omitempty"`
}

// textOrBase64 is a Field for the exact bytes of value.
func textOrBase64(name, value string) Field {
	if utf8.ValidString(value) {
		return Field{Name: name, Value: &value}
	}
	b := base64.StdEncoding.EncodeToString([]byte(value))
	return Field{Name: name, ValueBase64: &b}
}

// Request is a bundle line read and checked: exact bytes, ready to
// be written as an HTTP/1.1 request.
type Request struct {
	ID, ReceivedAt string
	Method         string
	Target         string // the raw request target: path and query
	Headers        [][2]string
	Body           []byte
	BodySize       int64 // what the sender sent; more than len(Body) when incomplete
	Complete       bool
	DroppedHeaders int

	hasHost   bool // the line carries a Host header, which replay then sends
	chunked   bool // recorded with Transfer-Encoding: chunked
	addLength bool // recorded with no framing header (HTTP/2) but a body
}

// Size is about the memory r holds once read: its bytes, and 48 more a
// header for its slot and the rounding of small allocations (a header of
// a few bytes takes about that much). Replay counts it against the bytes
// it may have in flight.
func (r Request) Size() int64 {
	n := int64(len(r.ID) + len(r.ReceivedAt) + len(r.Method) + len(r.Target) + len(r.Body))
	for _, h := range r.Headers {
		n += int64(len(h[0]) + len(h[1]) + 48)
	}
	return n
}

// SkipReason says why replay does not send r, or "" when it does: a body
// or headers stored in part are not the request the sender made, and a
// provider's signature over them would not verify.
func (r Request) SkipReason() string {
	switch {
	case !r.Complete:
		return fmt.Sprintf("body stored in part (%d of %d bytes)", len(r.Body), r.BodySize)
	case r.DroppedHeaders > 0:
		return fmt.Sprintf("%d header values were not stored", r.DroppedHeaders)
	}
	return ""
}

// ParseLine reads one delivery line. It refuses what no HTTP/1.1
// server could have recorded (a method that is no token, a target or a
// header with control bytes, a name with separators), so that a hostile
// line cannot smuggle a second request into what replay writes, and
// framing that does not match the body.
func ParseLine(line []byte) (Request, error) {
	if _, over := jsoncount.Values(line, MaxLineValues); over {
		return Request{}, fmt.Errorf("more than %d JSON values (%d headers at most), refused before decoding", MaxLineValues, maxStoredHeaders)
	}
	// The body's base64 is kept as its text in line and decoded from there
	// into one buffer of the body's size: json.Decoder copied the whole
	// line into a buffer of its own, and the base64 into a string, before
	// the body was decoded (3.7 times a line's size).
	var l struct {
		Line
		BodyBase64 *lineText `json:"bodyBase64"` // shadows Line's
	}
	if err := json.Unmarshal(line, &l); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) && syntax.Offset > 0 && json.Valid(line[:syntax.Offset-1]) {
			return Request{}, errors.New("more than one JSON value")
		}
		return Request{}, fmt.Errorf("not a JSON object: %w", err)
	}
	switch {
	case l.ID == "":
		return Request{}, errors.New("no id")
	case l.BodyBase64 == nil:
		return Request{}, errors.New("no bodyBase64")
	case l.Complete == nil:
		return Request{}, errors.New("no complete")
	case l.DroppedHeaders < 0:
		return Request{}, errors.New("droppedHeaders is negative")
	}
	if !domain.IsToken(l.Method) {
		return Request{}, fmt.Errorf("method %q is not an HTTP method", l.Method)
	}
	r := Request{ID: l.ID, ReceivedAt: l.ReceivedAt, Method: l.Method, Target: l.Path,
		Complete: *l.Complete, DroppedHeaders: l.DroppedHeaders}
	if l.PathBase64 != nil {
		b, err := base64.StdEncoding.DecodeString(*l.PathBase64)
		if err != nil {
			return Request{}, fmt.Errorf("pathBase64: %w", err)
		}
		r.Target = string(b)
	}
	if err := checkTarget(r.Target); err != nil {
		return Request{}, err
	}
	body, err := l.BodyBase64.decodeBase64()
	if err != nil {
		return Request{}, fmt.Errorf("bodyBase64: %w", err)
	}
	r.Body = body
	r.BodySize = int64(len(body))
	if l.BodySize != nil {
		r.BodySize = *l.BodySize
	}
	if r.BodySize < int64(len(body)) || (r.Complete && r.BodySize != int64(len(body))) {
		return Request{}, fmt.Errorf("bodySize %d does not fit a body of %d bytes (complete: %v)", r.BodySize, len(body), r.Complete)
	}
	var lengths, codings []string
	for i, h := range l.Headers {
		name, value, err := h.bytes()
		if err != nil {
			return Request{}, fmt.Errorf("header %d: %w", i+1, err)
		}
		switch strings.ToLower(name) {
		case "host":
			if r.hasHost {
				return Request{}, errors.New("more than one Host header")
			}
			r.hasHost = true
		case "content-length":
			if len(lengths) > 0 {
				// A server keeps one (they must agree), so none was recorded.
				return Request{}, errors.New("more than one Content-Length header")
			}
			lengths = append(lengths, value)
		case "transfer-encoding":
			codings = append(codings, value)
		}
		r.Headers = append(r.Headers, [2]string{name, value})
	}
	if r.SkipReason() != "" {
		// Not sent, so its framing need not match the stored part.
		return r, nil
	}
	if err := r.frame(lengths, codings); err != nil {
		return Request{}, err
	}
	return r, nil
}

// lineText is a JSON value of a line as its text: the part of the line it
// was read from, not a copy of it.
type lineText []byte

func (t *lineText) UnmarshalJSON(data []byte) error {
	*t = data
	return nil
}

// decodeBase64 is the bytes of t, a JSON string of base64, decoded into
// one buffer. Only a string with escapes (valid JSON, though no writer of
// bundles makes them) is unquoted into a copy first.
func (t lineText) decodeBase64() ([]byte, error) {
	text := []byte(t)
	if len(text) < 2 || text[0] != '"' || text[len(text)-1] != '"' {
		return nil, errors.New("not a string")
	}
	text = text[1 : len(text)-1]
	if bytes.IndexByte(text, '\\') >= 0 {
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return nil, err
		}
		text = []byte(s)
	}
	body := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	n, err := base64.StdEncoding.Decode(body, text)
	if err != nil {
		return nil, err
	}
	return body[:n], nil
}

// bytes is the header's name and its value's exact bytes.
func (h Field) bytes() (name, value string, err error) {
	if !domain.IsToken(h.Name) {
		return "", "", fmt.Errorf("name %q is not a header name", h.Name)
	}
	switch {
	case h.Value != nil && h.ValueBase64 != nil:
		return "", "", fmt.Errorf("%s has both value and valueBase64", h.Name)
	case h.Value != nil:
		value = *h.Value
	case h.ValueBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*h.ValueBase64)
		if err != nil {
			return "", "", fmt.Errorf("%s: valueBase64: %w", h.Name, err)
		}
		value = string(b)
	default:
		return "", "", fmt.Errorf("%s has no value", h.Name)
	}
	if err := checkFieldValue(value); err != nil {
		return "", "", fmt.Errorf("%s: %w", h.Name, err)
	}
	return h.Name, value, nil
}

// frame decides how the body is delimited on the wire, as recorded:
// Content-Length must be the body's length, a
// Transfer-Encoding must be chunked, and a request may not have both
// (a server and a proxy could read them differently). A body recorded
// with neither (HTTP/2 needs no Content-Length) gets one.
func (r *Request) frame(lengths, codings []string) error {
	switch {
	case len(lengths) > 0 && len(codings) > 0:
		return errors.New("both Content-Length and Transfer-Encoding")
	case len(codings) > 1 || (len(codings) == 1 && !strings.EqualFold(codings[0], "chunked")):
		return fmt.Errorf("Transfer-Encoding %q: only chunked can be replayed", strings.Join(codings, ", "))
	case len(codings) == 1:
		r.chunked = true
	}
	if len(lengths) == 1 && lengths[0] != strconv.Itoa(len(r.Body)) {
		return fmt.Errorf("Content-Length %q is not the body's length %d", lengths[0], len(r.Body))
	}
	r.addLength = len(lengths) == 0 && !r.chunked && len(r.Body) > 0
	return nil
}

// checkTarget accepts an origin-form target ("/path?query") or "*", with
// no byte that would end the request line (space, CR, LF) or that HTTP
// forbids there (controls); other bytes, also ones that are not UTF-8,
// are sent as recorded.
func checkTarget(t string) error {
	if t != "*" && !strings.HasPrefix(t, "/") {
		return fmt.Errorf("path %q does not start with /", t)
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("path %q holds byte %#x, which no request target may", t, c)
		}
	}
	if _, err := url.ParseRequestURI(t); err != nil {
		return fmt.Errorf("path %q: %w", t, err)
	}
	return nil
}

// checkFieldValue accepts what an HTTP server records as a field value:
// no control bytes but tab, and no whitespace at either end (servers trim
// it, so a recorded value never has it).
func checkFieldValue(v string) error {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return fmt.Errorf("value holds control byte %#x", c)
		}
	}
	if strings.TrimLeft(v, " \t") != v || strings.TrimRight(v, " \t") != v {
		return errors.New("value starts or ends with whitespace")
	}
	return nil
}

// WriteRequest writes r as one HTTP/1.1 request for host (the --to URL's
// authority; the line's own Host header when it has one): the request
// line with the recorded target, the recorded headers in order with
// repeats and nothing else but the framing a body recorded without any
// needs, then the body. prefix goes before the target (--to's path).
func (r Request) WriteRequest(w io.Writer, host, prefix string) error {
	// bufio.Writer keeps its first error for Flush, which returns it.
	bw := bufio.NewWriter(w)
	target := r.Target
	if prefix != "" && target != "*" {
		target = prefix + target
	}
	fmt.Fprintf(bw, "%s %s HTTP/1.1\r\n", r.Method, target)
	if !r.hasHost {
		fmt.Fprintf(bw, "Host: %s\r\n", host)
	}
	for _, h := range r.Headers {
		if h[1] == "" {
			fmt.Fprintf(bw, "%s:\r\n", h[0])
		} else {
			fmt.Fprintf(bw, "%s: %s\r\n", h[0], h[1])
		}
	}
	if r.addLength {
		fmt.Fprintf(bw, "Content-Length: %d\r\n", len(r.Body))
	}
	io.WriteString(bw, "\r\n")
	switch {
	case r.chunked && len(r.Body) > 0:
		fmt.Fprintf(bw, "%x\r\n", len(r.Body))
		_, _ = bw.Write(r.Body)
		io.WriteString(bw, "\r\n0\r\n\r\n")
	case r.chunked:
		io.WriteString(bw, "0\r\n\r\n")
	default:
		_, _ = bw.Write(r.Body)
	}
	return bw.Flush()
}

// Reader reads a bundle line by line, each line at most
// MaxLine bytes, so memory stays bounded whatever the file holds: the
// reader keeps at most twice its longest line (readLine).
type Reader struct {
	r      *bufio.Reader
	line   int      // the number of the line last read
	blocks [][]byte // a long line's parts as read, kept for the next long line
	buf    []byte   // the line last read, whole
	Header Header
}

// readBuffer is the size of the reader's buffer, and of each block a
// longer line is gathered in.
const readBuffer = 64 << 10

// LineError is a bundle line that cannot be read, by its number.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("bundle line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// startsHAR tells whether line begins a HAR file, the other format of
// relay deliveries export, which writes {"log":{... on its first line.
func startsHAR(line []byte) bool {
	d := json.NewDecoder(bytes.NewReader(line))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	t, err := d.Token()
	return err == nil && t == "log"
}

// NewReader reads and checks the header line.
func NewReader(r io.Reader) (*Reader, error) {
	b := &Reader{r: bufio.NewReaderSize(r, readBuffer)}
	line, err := b.readLine()
	if errors.Is(err, io.EOF) {
		return nil, &LineError{Line: 1, Err: errors.New("the file is empty: not a relay bundle")}
	}
	if err != nil {
		return nil, err
	}
	var head struct {
		RelayBundle *int `json:"relay_bundle"`
	}
	if json.Unmarshal(line, &head) != nil || head.RelayBundle == nil {
		if startsHAR(line) {
			return nil, &LineError{Line: 1, Err: errors.New("a HAR file, not a relay bundle: export a replay bundle with relay deliveries export ADDRESS --format bundle -o FILE")}
		}
		return nil, &LineError{Line: 1, Err: errors.New(`not a relay bundle (the first line has no "relay_bundle")`)}
	}
	if *head.RelayBundle != Version {
		return nil, &LineError{Line: 1, Err: fmt.Errorf("bundle version %d; this relay reads version %d", *head.RelayBundle, Version)}
	}
	if err := json.Unmarshal(line, &b.Header); err != nil {
		return nil, &LineError{Line: 1, Err: err}
	}
	return b, nil
}

// Next reads the next delivery; io.EOF after the last.
func (b *Reader) Next() (Request, error) {
	line, err := b.readLine()
	if err != nil {
		return Request{}, err
	}
	req, err := ParseLine(line)
	if err != nil {
		return Request{}, &LineError{Line: b.line, Err: err}
	}
	return req, nil
}

// readLine reads one line without its newline, refusing an empty line and
// one longer than MaxLine (the rest of it is not read). A line longer than
// the read buffer is gathered in blocks of that size, then copied once
// into a buffer of its own length: a buffer grown by append on the way
// allocates about five times a long line. Both are kept for the next
// line, so reading takes at most twice the longest line, allocated once.
func (b *Reader) readLine() ([]byte, error) {
	n, parts := 0, 0 // the bytes and blocks of the line gathered so far
	for {
		chunk, err := b.r.ReadSlice('\n')
		if n+len(chunk) > MaxLine+1 {
			return nil, &LineError{Line: b.line + 1, Err: fmt.Errorf("longer than %d MiB", MaxLine>>20)}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			// chunk is bufio's buffer, which the next read overwrites.
			if parts == len(b.blocks) {
				b.blocks = append(b.blocks, make([]byte, 0, readBuffer))
			}
			b.blocks[parts] = append(b.blocks[parts][:0], chunk...)
			parts++
			n += len(chunk)
			continue
		case errors.Is(err, io.EOF) && n+len(chunk) == 0:
			return nil, io.EOF
		case err != nil && !errors.Is(err, io.EOF):
			return nil, fmt.Errorf("read bundle line %d: %w", b.line+1, err)
		}
		if size := n + len(chunk); cap(b.buf) < size {
			b.buf = nil // the shorter line's buffer is not needed for the copy
			b.buf = make([]byte, 0, size)
		}
		b.buf = b.buf[:0]
		for _, part := range b.blocks[:parts] {
			b.buf = append(b.buf, part...)
		}
		b.buf = append(b.buf, chunk...)
		b.line++
		line := bytes.TrimSuffix(bytes.TrimSuffix(b.buf, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			return nil, &LineError{Line: b.line, Err: errors.New("empty line")}
		}
		return line, nil
	}
}
