package ingress

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/bodyread"
	"github.com/relayhq/relay/internal/clientkey"
	"github.com/relayhq/relay/internal/forwarded"
)

// ErrBodyTooLarge matches (errors.Is) a *BodyTooLargeError.
var ErrBodyTooLarge = errors.New("request body too large")

// ErrUnsupportedTarget is returned for request targets that name no path,
// such as the authority form of CONNECT ("host:443"): they cannot be
// recorded or forwarded.
var ErrUnsupportedTarget = errors.New("unsupported request target")

// BodyTooLargeError reports a body longer than the max-body limit. Reading
// stopped after Max+1 bytes, so the real size is unknown beyond "more".
type BodyTooLargeError struct {
	Max int64
}

func (e *BodyTooLargeError) Error() string {
	return fmt.Sprintf("%s%d bytes", domain.ReasonBodyTooLarge, e.Max)
}

// Is makes errors.Is(err, ErrBodyTooLarge) true.
func (e *BodyTooLargeError) Is(target error) bool { return target == ErrBodyTooLarge }

// Capture turns r into a domain request exactly as the sender sent it, and
// returns the whole body in full so it can be forwarded.
//
// req.Body holds at most captureCap bytes; full holds the whole body when it
// is at most maxBody bytes. A longer body is read only up to maxBody+1 bytes
// (never unbounded): Capture then returns a *BodyTooLargeError, a nil full
// and a req with BodySize = maxBody+1 (the bytes read), BodyUnread and
// Complete = false that can still be recorded. Any other read error is
// returned with the part read so far.
func Capture(r *http.Request, captureCap, maxBody int64) (req domain.CapturedRequest, full []byte, err error) {
	req, full, _, err = capture(r, captureCap, maxBody, true, nil, "")
	return req, full, err
}

// captureProxied is Capture with the whole body's memory taken from budget,
// for its sender and account, the Endpoint's: it returns the bytes
// reserved, which the caller releases once the body is no longer held
// (releaseBody), and ErrBodyBudget (with the part read so far recorded as
// for a body too large) when the budget ran out.
func captureProxied(r *http.Request, captureCap, maxBody int64, budget *BodyBudget, account string) (domain.CapturedRequest, []byte, int64, error) {
	return capture(r, captureCap, maxBody, true, budget, account)
}

// releaseBody gives back the bytes captureProxied reserved for r's body
// to an Endpoint of account.
func releaseBody(budget *BodyBudget, r *http.Request, account string, reserved int64) {
	budget.release(budgetKey(sender(r)), account, reserved)
}

// captureRecord is Capture for requests that are only recorded: bytes past
// the capture cap are counted and discarded instead of buffered, so a large
// body to an inspector costs no more memory than the cap, and every byte
// received is counted, also past maxBody (which bounds only what is
// forwarded; the body timeout bounds how long a sender may keep sending).
// The part kept is held in budget, RecordedBodyWeight bytes of it a byte,
// for its sender and account (an inspector's: none), as captureProxied
// holds a forwarded body: it returns the bytes reserved, which the caller
// releases once the record is committed, and ErrBodyBudget when the budget
// ran out (nothing of the body read).
func captureRecord(r *http.Request, captureCap, maxBody int64, budget *BodyBudget, account string) (domain.CapturedRequest, int64, error) {
	req, _, reserved, err := capture(r, captureCap, maxBody, false, budget, account)
	return req, reserved, err
}

// RecordedBodyWeight is the budget a byte of a recorded body takes (at
// most as much as one body of --max-body): until its record is committed,
// the body is held as itself, in its event's JSON (base64: 4/3 of it) and
// in the log's row, compressed from that JSON (as much again when it does
// not compress), about 3.7 times its size. Counting it not at all let 256
// requests from one address, each with 256 KiB of random body to an
// inspector, hold 350 MiB while waiting for the log's writer.
const RecordedBodyWeight = 4

func capture(r *http.Request, captureCap, maxBody int64, keepFull bool, budget *BodyBudget, account string) (domain.CapturedRequest, []byte, int64, error) {
	target, err := requestTarget(originalTarget(r))
	if err != nil {
		return domain.CapturedRequest{}, nil, 0, err
	}
	client := sender(r)
	req := domain.CapturedRequest{
		Method:     r.Method,
		Target:     target,
		Host:       r.Host,
		Proto:      r.Proto,
		RemoteAddr: client.Addr,
		Peer:       client.Peer,
		Scheme:     client.Proto,
		Headers:    captureHeaders(r),
	}
	maxBody = max(maxBody, 0)
	// Never store more than maxBody bytes, so that a body cut at maxBody+1
	// always reads as incomplete (len(Body) < BodySize).
	keep := min(max(captureCap, 0), maxBody)

	var body io.Reader = http.NoBody
	if r.Body != nil {
		body = r.Body
	}
	var limited io.Reader = body
	if keepFull {
		limited = io.LimitReader(body, maxBody+1)
	}

	var stored, full []byte
	var n, reserved int64
	if keepFull {
		// Content-Length is only the sender's claim: it is reserved from
		// the budget (so senders are admitted whole, one by one), but
		// memory is allocated as bytes arrive, growing by doubling, so one
		// that declares 10 MiB and sends a byte holds budget, not memory.
		full, reserved, err = readBudgeted(limited, budget, budgetKey(client), account, maxBody+1, min(r.ContentLength, maxBody+1), 1)
		n = int64(len(full))
		// A copy: Body shares no memory with full, which callers hand on.
		stored = append([]byte{}, full[:min(n, keep)]...)
	} else {
		// The buffer is Body itself: no copy, and never nil (an empty
		// body is recorded as empty, not as absent).
		if budget != nil && r.ContentLength != 0 { // an empty body holds nothing
			declared := r.ContentLength
			if declared >= 0 {
				declared = min(declared, keep)
			}
			stored, reserved, err = readBudgeted(io.LimitReader(limited, keep), budget, budgetKey(client), account, keep, declared, RecordedBodyWeight)
		} else {
			stored, err = bodyread.Read(limited, keep, r.ContentLength)
		}
		n = int64(len(stored))
		if err == nil {
			var rest int64
			rest, err = io.Copy(io.Discard, limited)
			n += rest
		}
	}
	req.Body = stored
	req.BodySize = n
	// A failed read (a sender that stopped sending) leaves the body cut
	// short: not complete, even when all that arrived is stored.
	req.Complete = int64(len(req.Body)) == n && err == nil
	switch {
	case errors.Is(err, ErrBodyBudget):
		req.BodyUnread = true // reading stopped where the budget did
		return req, nil, reserved, err
	case err != nil:
		return req, nil, reserved, fmt.Errorf("capture body: %w", err)
	case keepFull && n > maxBody:
		req.BodyUnread = true // reading stopped at maxBody+1
		return req, nil, reserved, &BodyTooLargeError{Max: maxBody}
	}
	// Trailer fields are known once the body was read to its end.
	req.Trailers = trailers(r.Trailer)
	return req, full, reserved, nil
}

// budgetKey is the client's share of the body budget: its IP, or its /64
// for IPv6 (one client, many connections and addresses).
func budgetKey(c forwarded.Client) string { return clientkey.Of(c.Addr) }

// sender is who sent r: as forwarded.Handler resolved it, or the socket's
// peer and the connection's protocol when no resolver ran.
func sender(r *http.Request) forwarded.Client {
	if c, ok := forwarded.FromContext(r.Context()); ok {
		return c
	}
	c := forwarded.Client{Addr: r.RemoteAddr, Proto: "http"}
	if r.TLS != nil {
		c.Proto, c.Known = "https", true
	}
	return c
}

// trailers lists trailer fields the sender sent after a chunked body, in
// the order captureHeaders uses. Fields announced in Trailer but never
// sent are left out (net/http lists them with no value).
func trailers(t http.Header) []domain.Header {
	names := make([]string, 0, len(t))
	for name := range t {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []domain.Header
	for _, name := range names {
		for _, v := range t[name] {
			out = append(out, domain.Header{Name: name, Value: v})
		}
	}
	return out
}

// requestTarget returns the raw path and query the sender put on the request
// line. An absolute-form target ("http://host/p?q") keeps its path and query
// as sent; "*" (OPTIONS *) stays "*".
func requestTarget(uri string) (string, error) {
	if strings.HasPrefix(uri, "/") || uri == "*" {
		return uri, nil
	}
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "", fmt.Errorf("%w %q", ErrUnsupportedTarget, uri)
	}
	i := strings.IndexAny(rest, "/?#")
	if i < 0 {
		return "/", nil
	}
	if rest[i] != '/' {
		return "/" + rest[i:], nil
	}
	return rest[i:], nil
}

// captureHeaders lists every header value, names sorted for determinism and
// repeats in the order they were sent. Host is kept apart in Request.Host.
// net/http moves Transfer-Encoding out of the header map; it is put back so
// the record shows how the body was framed.
func captureHeaders(r *http.Request) []domain.Header {
	// The fields are sorted on the stack when they are few (most
	// requests), with their values: no second lookup of each name.
	var onStack [32]headerField
	fields := onStack[:0]
	count := 0
	for name, values := range r.Header {
		fields = append(fields, headerField{name, values})
		count += len(values)
	}
	if _, hasTE := r.Header["Transfer-Encoding"]; len(r.TransferEncoding) > 0 && !hasTE {
		fields = append(fields, headerField{"Transfer-Encoding", r.TransferEncoding})
		count += len(r.TransferEncoding)
	}
	slices.SortFunc(fields, func(a, b headerField) int { return strings.Compare(a.name, b.name) })
	out := make([]domain.Header, 0, count)
	for _, f := range fields {
		for _, v := range f.values {
			out = append(out, domain.Header{Name: f.name, Value: v})
		}
	}
	return out
}

type headerField struct {
	name   string
	values []string
}

// limitStored holds what req stores of its header fields to the headers'
// bounds (maxCount values, maxBytes of names and values): its headers
// first, then its trailer fields in the room they left, the rest of both
// counted in DroppedHeaders. Trailers were stored whole: a chunked body's
// trailer of 4 KiB (net/http's bound) held 1 020 fields, an HTTP/2 one
// as many as its header block may (about 2 000), where 200 headers were.
// received is every header as it came, for forwarding (trailers are not
// forwarded).
func limitStored(req *domain.CapturedRequest, maxCount int, maxBytes int64) (received []domain.Header) {
	received = req.Headers
	req.Headers, req.DroppedHeaders = limitHeaders(req.Headers, maxCount, maxBytes)
	if len(req.Trailers) == 0 {
		return received
	}
	if req.DroppedHeaders > 0 {
		req.DroppedHeaders += len(req.Trailers)
		req.Trailers = nil
		return received
	}
	var size int64
	for _, h := range req.Headers {
		size += int64(len(h.Name) + len(h.Value))
	}
	var dropped int
	req.Trailers, dropped = limitHeaders(req.Trailers, maxCount-len(req.Headers), maxBytes-size)
	if len(req.Trailers) == 0 {
		req.Trailers = nil
	}
	req.DroppedHeaders += dropped
	return received
}

// limitHeaders returns the leading headers of all that fit maxCount values
// and maxBytes of names and values, and how many were left out. Storage
// has these limits because every read of a delivery returns its headers;
// forwarding does not, so the caller keeps all to forward.
func limitHeaders(all []domain.Header, maxCount int, maxBytes int64) (kept []domain.Header, dropped int) {
	var size int64
	for i, h := range all {
		size += int64(len(h.Name) + len(h.Value))
		if i >= maxCount || size > maxBytes {
			return all[:i:i], len(all) - i
		}
	}
	return all, 0
}
