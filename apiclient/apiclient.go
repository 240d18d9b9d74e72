// Package apiclient calls the relay's GraphQL API over HTTP: the one client
// of the relay command's client commands and of other programs that drive a
// relay (the desktop agent).
//
//	c := apiclient.New("http://localhost:8080", token)
//	var out struct{ Endpoints []struct{ ID, Name string } }
//	err := c.Do(ctx, `{ endpoints{ id name } }`, nil, &out)
//
// Errors:
//   - *Error: the relay answered with a GraphQL error; Code is its
//     extensions.code (UNAUTHENTICATED, NOT_FOUND, INVALID_INPUT, ...) and
//     Refusal tells a refusal (retrying as is will not help) from a failure.
//   - *NotRelayError: what answered at Server/graphql is no relay GraphQL API.
//   - *UnreachableError: no connection to Server (nothing listens there).
//   - *PlainHTTPError: an https:// Server answered in plain HTTP.
//   - anything else: the network (wrapped *url.Error, context errors).
package apiclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxAnswer bounds the answer a client reads.
const maxAnswer = 64 << 20

// What Do decodes of an answer is bounded as it arrives, before anything
// is decoded: its bytes (maxAnswer), its JSON objects and values, and what
// it weighs as decoded (CheckDecode's budget), each refused once the part
// read passes it, the rest not read. A decoded value costs far more than
// its text: an empty object, 2 bytes, is a struct of up to 232 bytes in a
// slice that doubles as it grows.
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

// answerObjects and answerValues are the counts Do bounds an answer by
// (tests lower them).
var answerObjects, answerValues = MaxAnswerObjects, MaxAnswerValues

// AnswerTooLargeError is an answer with more JSON objects or values
// than Do decodes.
type AnswerTooLargeError struct {
	What  string // "objects" or "values"
	Limit int
}

func (e *AnswerTooLargeError) Error() string {
	return fmt.Sprintf("the answer holds over %d JSON %s, more than any answer of a relay, so it is not decoded", e.Limit, e.What)
}

// defaultHTTP is bounded, so a relay that accepts the connection and never
// answers cannot hang a command.
var defaultHTTP = &http.Client{Timeout: 2 * time.Minute}

// Client calls one relay with one token (empty: no account, as for signUp
// and createInspector).
type Client struct {
	Server string       // the relay's URL, e.g. http://localhost:8080
	Token  string       // API token, sent as Authorization: Bearer
	HTTP   *http.Client // nil: a client with a two-minute timeout
	// TLS is used for an https relay when HTTP is nil, and for the
	// WebSocket of Subscribe: nil trusts the system's roots (TLSConfig
	// adds a private CA's).
	TLS *tls.Config

	once sync.Once
	hc   *http.Client
}

// New returns a Client for server and token.
func New(server, token string) *Client { return &Client{Server: server, Token: token} }

// Error is a GraphQL error the relay answered with.
type Error struct {
	Message string
	Code    string // extensions.code; empty when the server gave none
	// Extensions holds the error's other extensions (retryAfterSeconds, ...).
	Extensions map[string]any
	// Server is the relay that answered, when known: a refused token is
	// reported with it and what to do.
	Server string
}

// wireError is a GraphQL error as a server sends it.
type wireError struct {
	Message    string
	Extensions extensions
}

// maxExtension bounds an extension's value that err decodes, and
// maxExtensions how many it decodes: the relay's are a code, a field's
// name and a number of seconds. A value decoded into any costs many
// times its text ("0," is a 16-byte interface), and an answer may hold
// thousands of extensions.
const (
	maxExtension  = 1 << 10
	maxExtensions = 16
)

// extensions is what err decodes of an error's extensions: the text of
// "code" and of the first maxExtensions others of at most maxExtension
// bytes each, copied; the others are passed over, not copied (held raw,
// an extension of 60 MiB was copied whole to be dropped).
type extensions struct {
	code  []byte
	names []string
	texts [][]byte
}

func (x *extensions) UnmarshalJSON(text []byte) error {
	*x = extensions{}
	members(text, maxExtension, func(key, value []byte) {
		switch {
		case key == nil || len(value) > maxExtension:
		case string(key) == "code":
			x.code = bytes.Clone(value)
		default:
			for i, name := range x.names {
				if name == string(key) { // the last is kept, as in a map
					x.texts[i] = bytes.Clone(value)
					return
				}
			}
			if len(x.names) < maxExtensions {
				x.names = append(x.names, string(key))
				x.texts = append(x.texts, bytes.Clone(value))
			}
		}
	})
	return nil
}

// err is the error e tells of, with its code and at most maxExtensions
// extensions in all.
func (e wireError) err() *Error {
	out := &Error{Message: e.Message}
	x := e.Extensions
	names, texts := x.names, x.texts
	if x.code != nil {
		names, texts = append([]string{"code"}, names...), append([][]byte{x.code}, texts...)
	}
	for i := range min(len(names), maxExtensions) {
		var v any
		if json.Unmarshal(texts[i], &v) != nil {
			continue
		}
		if out.Extensions == nil {
			out.Extensions = map[string]any{}
		}
		out.Extensions[names[i]] = v
	}
	out.Code, _ = out.Extensions["code"].(string)
	return out
}

func (e *Error) Error() string {
	if e.Code == "UNAUTHENTICATED" && e.Server != "" {
		return fmt.Sprintf("token refused by %s: %s; run `relay login --server %s` (UNAUTHENTICATED)", e.Server, e.Message, e.Server)
	}
	if e.Code == "" {
		return "refused: " + e.Message
	}
	return fmt.Sprintf("refused: %s (%s)", e.Message, e.Code)
}

// Refusal reports whether the relay refused the request as asked (bad
// token, unknown id, invalid input) rather than failing to carry it out
// (unavailable, rate limited, a concurrent change, an internal error, a
// live subscription that fell behind and may subscribe again),
// which a later try may change.
func (e *Error) Refusal() bool {
	switch e.Code {
	case "", "INTERNAL", "UNAVAILABLE", "RATE_LIMITED", "CONFLICT", "FELL_BEHIND":
		return false
	}
	return true
}

// NotRelayError is an answer that is not a GraphQL response: the server
// named is not a relay (or not at that path).
type NotRelayError struct {
	Server, URL, Status, Why string
}

func (e *NotRelayError) Error() string {
	return fmt.Sprintf("no relay GraphQL API at %s (%s answered %s, %s)", e.Server, e.URL, e.Status, e.Why)
}

// UnreachableError is a relay the client could not connect to: nothing
// listens at Server (no relay started, a wrong port), or its name does
// not resolve. It says so and where the relay's URL comes from, instead
// of the HTTP client's "Post \"…/graphql\": dial tcp …".
type UnreachableError struct {
	Server string
	Err    error // the dial's error, a *url.Error
}

func (e *UnreachableError) Error() string {
	why := e.Err.Error()
	var op *net.OpError
	switch {
	case errors.Is(e.Err, syscall.ECONNREFUSED):
		why = "connection refused"
	case errors.As(e.Err, &op):
		why = op.Err.Error()
	}
	return fmt.Sprintf("cannot reach the relay at %s (%s): is `relay serve` running there? --server, RELAY_SERVER or `relay login --server URL` choose the relay", e.Server, why)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// PlainHTTPError is an https:// relay URL whose server answered the TLS
// handshake in plain HTTP: the relay serves http:// there. It says which
// URL to give instead of the HTTP client's "server gave HTTP response to
// HTTPS client". Exit code 2: retrying the same URL cannot succeed.
type PlainHTTPError struct {
	Server string
	Err    error
}

func (e *PlainHTTPError) Error() string {
	return fmt.Sprintf("the relay at %s answers plain HTTP; use %s", e.Server, "http://"+strings.TrimPrefix(e.Server, "https://"))
}

func (e *PlainHTTPError) Unwrap() error { return e.Err }

// ExitCode is 2, a refusal: the command line names the wrong scheme.
func (e *PlainHTTPError) ExitCode() int { return 2 }

// AnsweredPlainHTTP reports whether err is a TLS handshake that a
// plain-HTTP server answered: net/http says so with ErrSchemeMismatch;
// other clients (the WebSocket dialer) get crypto/tls's record error,
// whose record starts with "HTTP/".
func AnsweredPlainHTTP(err error) bool {
	var rec tls.RecordHeaderError
	return errors.Is(err, http.ErrSchemeMismatch) ||
		(errors.As(err, &rec) && string(rec.RecordHeader[:]) == "HTTP/")
}

// transportError is err, the HTTP client's failure to get an answer from
// server, as an *UnreachableError when no connection was made and as a
// *PlainHTTPError when an https:// URL met a plain-HTTP server; a
// cancelled context (Ctrl-C) is returned as it is.
func transportError(server string, err error) error {
	var op *net.OpError
	switch {
	case errors.Is(err, context.Canceled):
	case AnsweredPlainHTTP(err):
		return &PlainHTTPError{Server: server, Err: err}
	case errors.As(err, &op) && op.Op == "dial":
		return &UnreachableError{Server: server, Err: err}
	}
	return err
}

// GraphQLURL is server's GraphQL endpoint: server/graphql.
func GraphQLURL(server string) string { return strings.TrimRight(server, "/") + "/graphql" }

// Do posts one GraphQL operation and decodes its data into out (nil: the
// data is dropped). A GraphQL error is returned as an *Error (the first
// one); an answer that is not a GraphQL response as a *NotRelayError.
func (c *Client) Do(ctx context.Context, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	endpoint := GraphQLURL(c.Server)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("server %q: %w", c.Server, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/graphql-response+json, application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return transportError(c.Server, err)
	}
	defer resp.Body.Close()
	notRelay := func(why string) error {
		return &NotRelayError{Server: c.Server, URL: endpoint, Status: resp.Status, Why: why}
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" && ct != "application/graphql-response+json" {
		return notRelay(fmt.Sprintf("content type %q", resp.Header.Get("Content-Type")))
	}
	// The answer is weighed as it is read, for its errors and for its
	// data as out, and refused once the part read passes a bound; then it
	// is decoded, its data in place, not copied.
	answer, bounds, err := readAnswer(resp.Body, resp.ContentLength, answerType(out))
	if bounds != nil {
		return fmt.Errorf("decode answer: %w", bounds)
	}
	if err != nil {
		return notRelay("not a GraphQL response: " + err.Error())
	}
	var res struct {
		Data   []byte `json:"-"` // dataOf's
		Errors []wireError
	}
	if err := json.Unmarshal(answer, &res); err != nil {
		return notRelay("not a GraphQL response: " + err.Error())
	}
	res.Data = dataOf(answer)
	if len(res.Errors) > 0 {
		e := res.Errors[0].err()
		e.Server = c.Server
		return e
	}
	if len(res.Data) == 0 || bytes.Equal(res.Data, []byte("null")) {
		return notRelay("no data and no errors")
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(res.Data, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// answerType is what Do weighs an answer as: its errors, and its data
// as decoded into out (nil: not decoded, weighing nothing).
func answerType(out any) reflect.Type {
	data := reflect.StructField{Name: "Data", Type: reflect.TypeFor[struct{}](), Tag: `json:"-"`}
	if out != nil {
		data = reflect.StructField{Name: "Data", Type: reflect.TypeOf(out)}
	}
	return reflect.PointerTo(reflect.StructOf([]reflect.StructField{
		data, {Name: "Errors", Type: reflect.TypeFor[[]wireError]()},
	}))
}

// errAnswerTooLong is an answer longer than maxAnswer.
var errAnswerTooLong = fmt.Errorf("an answer over %d MiB, more than a relay answers", maxAnswer>>20)

// readAnswer reads an answer's body (or a subscription's message),
// weighing it as it arrives for what
// it decodes into as t (as CheckDecode does) and counting its JSON
// objects and values: past maxAnswer bytes (err), or once the part read
// passes a weight or a count (bounds), it stops reading. The answer is
// read into one buffer of its length when the relay gave it, else into
// pieces of 4 KiB, then 64 KiB, joined once, so that no buffer grows by
// copying (a doubling buffer held up to twice the answer beside the
// copies it left) and at most 64 KiB of the last piece go unused (pieces
// doubling up to 1 MiB left up to half of a small answer unused). What
// follows the JSON value is read only while it is white space: anything
// else is not JSON, which decoding tells.
func readAnswer(body io.Reader, length int64, t reflect.Type) (answer []byte, bounds, err error) {
	if length > maxAnswer {
		return nil, nil, errAnswerTooLong
	}
	a := answerReader{r: body}
	if length >= 0 {
		a.cur, a.known = make([]byte, 0, length), true
	}
	s := sizer{next: a.next, maxObjects: answerObjects, maxValues: answerValues}
	s.value(t, 0)
	s.ws()
	if err := s.err(); err != nil {
		return nil, err, nil
	}
	if a.err != nil && a.err != io.EOF {
		return nil, nil, a.err // a read failed, or the body is too long
	}
	return a.bytes(), nil, nil
}

// answerReader reads a body in parts, each kept, for a sizer.
type answerReader struct {
	r      io.Reader
	cur    []byte   // being filled
	known  bool     // cur has the body's length
	pieces [][]byte // filled before cur
	n      int      // read
	err    error    // io.EOF at the end
}

// next reads the body's next part: nil at its end, after a failure, or
// past maxAnswer (errAnswerTooLong).
func (a *answerReader) next() []byte {
	for a.err == nil {
		if len(a.cur) == cap(a.cur) {
			if a.known {
				a.err = io.EOF
				break
			}
			if len(a.cur) > 0 {
				a.pieces = append(a.pieces, a.cur)
			}
			a.cur = make([]byte, 0, min(max(16*cap(a.cur), 4<<10), 64<<10))
		}
		free := a.cur[len(a.cur):cap(a.cur)]
		k, err := a.r.Read(free[:min(len(free), maxAnswer+1-a.n)])
		part := a.cur[len(a.cur) : len(a.cur)+k]
		a.cur, a.n = a.cur[:len(a.cur)+k], a.n+k
		switch {
		case a.n > maxAnswer:
			a.err = errAnswerTooLong
			return nil
		case err == io.EOF && a.known && len(a.cur) < cap(a.cur):
			a.err = fmt.Errorf("read answer: %w", io.ErrUnexpectedEOF)
		case err == io.EOF:
			a.err = err
		case err != nil:
			a.err = fmt.Errorf("read answer: %w", err)
		}
		if k > 0 {
			return part
		}
	}
	return nil
}

// bytes is what was read, in one buffer.
func (a *answerReader) bytes() []byte {
	if len(a.pieces) == 0 {
		return a.cur
	}
	b := make([]byte, 0, a.n)
	for _, p := range a.pieces {
		b = append(b, p...)
	}
	return append(b, a.cur...)
}

// httpClient is HTTP, else a bounded client trusting TLS's roots.
func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	if c.TLS == nil {
		return defaultHTTP
	}
	c.once.Do(func() {
		c.hc = &http.Client{Timeout: defaultHTTP.Timeout, Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, TLSClientConfig: c.TLS,
			TLSHandshakeTimeout: 10 * time.Second, IdleConnTimeout: 90 * time.Second,
		}}
	})
	return c.hc
}
