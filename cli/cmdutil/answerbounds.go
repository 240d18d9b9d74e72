package cmdutil

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// What a command decodes of one answer of a relay (or one message of a
// subscription) is bounded by what it holds, counted as it arrives,
// before anything is decoded: a decoded value costs far more than its
// text (an empty object, 2 bytes, is a struct of up to 232 bytes in a
// slice that doubles as it grows), so the 64 MiB apiclient reads of an
// answer could decode into gigabytes. What is within these counts is then
// weighed by the type it decodes into (apiclient.CheckDecode).
const (
	// MaxAnswerObjects bounds the JSON objects of an answer: a delivery's
	// request and response each hold at most 350 890 header fields (a
	// 1 MiB header block of "a:" lines), one object each, and a few
	// hundred attempts.
	MaxAnswerObjects = 1 << 20
	// MaxAnswerValues bounds its values of any kind (objects, arrays,
	// strings, numbers, literals; not an object's keys): a header field
	// is four (the object, its name, value and valueBase64).
	MaxAnswerValues = 4 << 20
)

// AnswerTooLargeError is an answer with more JSON objects or values
// than a command decodes.
type AnswerTooLargeError struct {
	What  string // "objects" or "values"
	Limit int
}

func (e *AnswerTooLargeError) Error() string {
	return fmt.Sprintf("the answer holds over %d JSON %s, more than any answer of a relay, so it is not decoded", e.Limit, e.What)
}

// jsonCounter counts the objects and values of a JSON text fed to it in
// pieces, as jsoncount does a whole one: each byte looked at once,
// nothing allocated. On anything but JSON the counts are some numbers
// that do not matter: such a text does not decode.
type jsonCounter struct {
	objects, values int
	inString        bool
	escaped         bool // the byte before was a backslash in a string
	inScalar        bool // in a number, true, false or null
	afterString     bool // a string ended: a value unless a colon follows
}

// feed counts p, failing once a bound is passed.
func (c *jsonCounter) feed(p []byte) error {
	for i := 0; i < len(p); i++ {
		if c.inString {
			if c.escaped {
				c.escaped = false
				continue
			}
			// Most of an answer is inside strings (bodies in base64): skip
			// to the next quote or backslash.
			j := bytes.IndexAny(p[i:], `"\`)
			if j < 0 {
				return nil
			}
			i += j
			if p[i] == '\\' {
				c.escaped = true
				continue
			}
			c.inString, c.afterString = false, true
			continue
		}
		b := p[i]
		switch b {
		case ' ', '\t', '\n', '\r':
			c.inScalar = false
			continue
		}
		if c.afterString {
			// The string before was a value, not an object's key.
			c.afterString = false
			if b != ':' {
				c.values++
			}
		}
		switch b {
		case '"':
			c.inScalar, c.inString = false, true
		case '{':
			c.inScalar = false
			c.objects++
			c.values++
		case '[':
			c.inScalar = false
			c.values++
		case '}', ']', ',', ':':
			c.inScalar = false
		default:
			if !c.inScalar {
				c.inScalar = true
				c.values++
			}
		}
		if err := c.check(); err != nil {
			return err
		}
	}
	return nil
}

// end counts a string the text ended with, and checks the bounds.
func (c *jsonCounter) end() error {
	if c.afterString {
		c.afterString = false
		c.values++
	}
	return c.check()
}

func (c *jsonCounter) check() error {
	switch {
	case c.objects > MaxAnswerObjects:
		return &AnswerTooLargeError{What: "objects", Limit: MaxAnswerObjects}
	case c.values > MaxAnswerValues:
		return &AnswerTooLargeError{What: "values", Limit: MaxAnswerValues}
	}
	return nil
}

// countedBody is an answer's body read through a jsonCounter: a read
// that passes a bound fails, so the answer is never decoded.
type countedBody struct {
	io.ReadCloser
	c   jsonCounter
	err error
}

func (b *countedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	if cerr := b.c.feed(p[:n]); cerr != nil {
		b.err = cerr
		return 0, cerr
	}
	if err == io.EOF {
		if cerr := b.c.end(); cerr != nil {
			b.err = cerr
			return 0, cerr
		}
	}
	return n, err
}

// countedAnswers is a RoundTripper whose answers' bodies are counted.
type countedAnswers struct{ base http.RoundTripper }

func (t countedAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body}
	return resp, nil
}
