package agentcli

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/bodyread"
)

// maxResponseBody bounds the local response the agent reports.
const maxResponseBody = 10 << 20

// localRequest is one forward request as the relay recorded it.
type localRequest struct {
	Method  string
	Path    string // raw request target: path and query exactly as sent
	Headers []domain.Header
	Body    []byte
	Origin  origin // told to the local process in X-Forwarded-* and Forwarded
}

// localResult is what the local target answered, or why it did not.
type localResult struct {
	Status   int // the local status; 502 or 504 when Err is set
	Headers  []domain.Header
	Body     []byte
	Duration time.Duration
	Err      error  // in full, for the Endpoint's owner (the attempt's error)
	Failure  string // with Err: short and stable, for the sender; names the target, no local socket
	// Signature is Options.Verify's verdict on the request, "" without it.
	Signature string
	// Receipt is the digests of the request as handed to the HTTP client
	// for the local target; nil when none was built.
	Receipt *domain.FidelityDigests
}

// forwarder sends forward requests to the one local target it was given.
type forwarder struct {
	target  Target
	timeout time.Duration
	// client sends the local request as it is: no http.Client in
	// between, so no redirect is looked at, let alone followed (see do).
	client *localClient
	// preserveHost sends the public host as Host (--host-header preserve).
	preserveHost bool
}

// newForwarder sends to target; insecure accepts any certificate of an
// https target (a self-signed local one).
func newForwarder(target Target, timeout time.Duration, insecure bool) *forwarder {
	return &forwarder{target: target, timeout: timeout, client: newLocalClient(target, insecure)}
}

// close drops idle connections to the target.
func (f *forwarder) close() { f.client.closeIdle() }

// forward sends req to the local target and reads its answer.
func (f *forwarder) forward(ctx context.Context, req localRequest) localResult {
	start := time.Now()
	res := f.do(ctx, req)
	res.Duration = time.Since(start)
	return res
}

func (f *forwarder) do(ctx context.Context, req localRequest) localResult {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	out := new(outgoing)
	hreq, err := f.newRequest(ctx, req, out)
	if err != nil {
		return f.requestFailure(err)
	}
	receipt := f.receipt(hreq, req.Body, &out.receipt)
	// Sent as it is, not through an http.Client: the sender gets the local
	// 3xx as it is, like any other answer, also one whose Location does
	// not parse (an http.Client parses it before any CheckRedirect, and
	// fails). ctx bounds the whole exchange.
	resp, conn, err := f.client.roundTrip(hreq)
	if err != nil {
		res := f.failure(ctx, err)
		res.Receipt = receipt
		return res
	}
	// Up to one byte past maxResponseBody (refused below); the claimed
	// length sizes the first buffer only up to bodyread.FirstRead.
	body, err := bodyread.Read(resp.Body, maxResponseBody+1, resp.ContentLength)
	// Released (and closed unless the body was read to its end) before
	// the body is closed, which would otherwise read the rest of it.
	f.client.release(conn, resp, err == nil && len(body) <= maxResponseBody)
	resp.Body.Close()
	if err != nil {
		return f.failure(ctx, err)
	}
	if len(body) > maxResponseBody {
		failure := fmt.Sprintf("the answer of the local target %s is larger than %d MiB", f.target.Host, maxResponseBody>>20)
		return localResult{Status: 502, Err: errors.New(failure), Failure: failure}
	}
	headers := responseHeaders(resp)
	if _, kept := resp.Header["Connection"]; resp.Close && !kept {
		// net/http dropped a "Connection: close" field; the names it
		// listed besides close are hop-by-hop too.
		headers = dropNames(headers, conn.head.connectionNames())
	}
	return localResult{Status: resp.StatusCode, Headers: headers, Body: body, Receipt: receipt}
}

// outgoing holds what a local request needs besides the http.Request and
// its header map, so that they cost one allocation, not one each.
type outgoing struct {
	url     url.URL
	body    bytes.Reader
	receipt domain.FidelityDigests
}

// requestFailure is the result of a request that could not be built.
func (f *forwarder) requestFailure(err error) localResult {
	var dot *DotSegmentError
	if errors.As(err, &dot) {
		return localResult{Status: http.StatusBadRequest, Err: err, Failure: dot.Failure()}
	}
	return localResult{Status: 502, Err: err, Failure: "the request could not be sent to the local target " + f.target.Host}
}

// receipt digests the request as built for the HTTP client, not as the
// relay sent it, so that a fault between the two shows: the method, the
// target without the agent's own prefix, the header fields it holds (a
// map: the canonical form's order does not depend on theirs) and the body
// bytes it reads.
func (f *forwarder) receipt(hreq *http.Request, body []byte, d *domain.FidelityDigests) *domain.FidelityDigests {
	target := hreq.URL.RequestURI()
	if target != "*" {
		target = strings.TrimPrefix(target, f.target.Prefix)
	}
	// On the stack for a typical request: DigestRequest keeps nothing.
	var small [32]domain.Header
	headers := small[:0]
	for name, values := range hreq.Header {
		for _, v := range values {
			headers = append(headers, domain.Header{Name: name, Value: v})
		}
	}
	*d = domain.DigestRequest(hreq.Method, target, headers, body)
	return d
}

// dropNames returns headers without those named in names.
func dropNames(headers []domain.Header, names []string) []domain.Header {
	if len(names) == 0 {
		return headers
	}
	out := headers[:0:0]
	for _, h := range headers {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, h.Name) }) {
			out = append(out, h)
		}
	}
	return out
}

// newRequest builds the local request from the agent's own target and the
// recorded request, in out. The server never chooses the host.
//
// It is what http.NewRequestWithContext would build, without parsing a
// URL it would replace and with the body in out: the method checked, the
// body with its length and a GetBody (the Transport rewinds a body with it
// to retry a request that a closing keep-alive connection lost).
func (f *forwarder) newRequest(ctx context.Context, req localRequest, out *outgoing) (*http.Request, error) {
	if err := fillURL(&out.url, f.target, req.Path); err != nil {
		return nil, err
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !validMethod(method) {
		return nil, fmt.Errorf("build request: net/http: invalid method %q", method)
	}
	hreq := (&http.Request{
		Method:     method,
		URL:        &out.url,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Host:       f.target.Host,
		Body:       http.NoBody,
	}).WithContext(ctx)
	if len(req.Body) > 0 {
		// io.NopCloser of a *bytes.Reader, as http.NewRequest makes it:
		// the Transport knows that body is in memory and writes it with
		// the head in one write; of a reader it does not know it sends
		// the head first, and the body in a second write.
		body := req.Body
		out.body.Reset(body)
		hreq.Body = io.NopCloser(&out.body)
		hreq.ContentLength = int64(len(body))
		hreq.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(body)), nil
		}
	}
	var small [32]domain.Header
	fields := domain.AppendEndToEnd(small[:0], req.Headers)
	// The map is sized for the fields and the ones the agent adds, and
	// their values share one array (see fieldValues).
	hreq.Header = make(http.Header, len(fields)+forwardedFields+1)
	vals := make(fieldValues, 0, len(fields)+forwardedFields+1)
	for _, h := range fields {
		k := http.CanonicalHeaderKey(h.Name)
		switch k {
		case "Host", "Content-Length":
			continue // set from the target and the body
		}
		if prev, ok := hreq.Header[k]; ok {
			hreq.Header[k] = append(prev, h.Value)
			continue
		}
		hreq.Header[k] = vals.one(h.Value)
	}
	addForwardedHeaders(hreq.Header, req.Origin, &vals)
	if f.preserveHost && req.Origin.Host != "" {
		hreq.Host = req.Origin.Host
	}
	if _, ok := hreq.Header["User-Agent"]; !ok {
		// An empty value keeps Go from adding its own User-Agent.
		hreq.Header["User-Agent"] = vals.one("")
	}
	return hreq, nil
}

// fieldValues hands out one-value slices of a single array, so that the
// values of a request's header map cost one allocation, not one a field.
// Each slice's capacity is its length: appending a second value to a field
// copies it out and cannot overwrite the next field's.
type fieldValues []string

// one returns []string{v}, from the array while it has room.
func (f *fieldValues) one(v string) []string {
	if len(*f) == cap(*f) {
		return []string{v}
	}
	*f = append(*f, v)
	n := len(*f)
	return (*f)[n-1 : n : n]
}

// localURL is the target plus the raw path (after the target's prefix),
// arranged so that Go writes the request line with the path byte for byte.
// Opaque is written verbatim, except when it starts with "//" (it would
// turn into an absolute URL); such paths go through Path and RawPath,
// which keep double slashes.
func localURL(target Target, raw string) (*url.URL, error) {
	u := new(url.URL)
	if err := fillURL(u, target, raw); err != nil {
		return nil, err
	}
	return u, nil
}

// fillURL is localURL into u.
func fillURL(u *url.URL, target Target, raw string) error {
	if raw == "" || (raw[0] != '/' && raw != "*") {
		return fmt.Errorf("invalid request target %q", raw)
	}
	if strings.ContainsAny(raw, " \t\r\n") || strings.ContainsRune(raw, 0x7f) {
		return fmt.Errorf("invalid request target %q", raw)
	}
	if raw != "*" && target.Prefix != "" {
		// Without a prefix the local server gets the path as sent and
		// resolves it as it would any other request; with one, a
		// dot-segment could take it out of the prefix.
		if hasDotSegment(raw) {
			return &DotSegmentError{Path: raw, Target: target}
		}
		raw = target.Prefix + raw
	}
	*u = url.URL{Scheme: target.Scheme, Host: target.Host}
	path, query, hasQuery := strings.Cut(raw, "?")
	u.RawQuery = query
	u.ForceQuery = hasQuery && query == ""
	if !strings.HasPrefix(path, "//") {
		u.Opaque = path
		return nil
	}
	p, err := url.PathUnescape(path)
	if err != nil {
		return fmt.Errorf("invalid request target %q: %w", raw, err)
	}
	u.Path, u.RawPath = p, path
	return nil
}

// validMethod is net/http's check of a request method: a token, as a
// field name is.
func validMethod(m string) bool { return httpguts.ValidHeaderFieldName(m) }

// responseHeaders lists the local response headers without hop-by-hop
// fields, repeats kept in order, names sorted for a stable report.
func responseHeaders(resp *http.Response) []domain.Header {
	var small [32]string
	names, fields := small[:0], 0
	for name, values := range resp.Header {
		names = append(names, name)
		fields += len(values)
	}
	slices.Sort(names)
	out := make([]domain.Header, 0, fields)
	for _, name := range names {
		for _, v := range resp.Header[name] {
			out = append(out, domain.Header{Name: name, Value: v})
		}
	}
	return domain.AppendEndToEnd(out[:0], out)
}

// failure says why the target gave no answer: a stable text that names the
// target for the sender, and the same with the detail (local sockets,
// system errors) for the attempt's recorded error.
func (f *forwarder) failure(ctx context.Context, err error) localResult {
	status, text := 502, ""
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		text = "nothing listening on " + f.target.Host
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		status, text = 504, fmt.Sprintf("the local target %s did not answer within %s", f.target.Host, f.timeout)
	case ctx.Err() != nil:
		text = "the request to the local target " + f.target.Host + " was cancelled"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		text = "the local target " + f.target.Host + " closed the connection"
	default:
		text = "no valid HTTP answer from the local target " + f.target.Host
		var rec tls.RecordHeaderError
		if errors.As(err, &rec) && string(rec.RecordHeader[:]) == "HTTP/" {
			// What http.Client says of it: the target speaks plain HTTP.
			err = http.ErrSchemeMismatch
		}
	}
	return localResult{Status: status, Err: fmt.Errorf("%s: %w", text, unwrapURLError(err)), Failure: text}
}

// unwrapURLError drops net/http's `Get "http://…":` prefix: the message
// already names the target.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
