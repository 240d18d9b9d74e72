// Package har writes HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/)
// as `relay deliveries export` writes it; docs/exports.md maps every field.
// The document is written entry by entry: only one delivery is held at a
// time.
package har

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relayhq/relay/deliveryjson"
)

type harNameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// harHeader is a HAR header; _valueBase64 (a custom field, which HAR
// allows with a leading underscore) carries the exact bytes of a value
// that is not UTF-8, since JSON text cannot.
type harHeader struct {
	Name        string  `json:"name"`
	Value       string  `json:"value"`
	ValueBase64 *string `json:"_valueBase64,omitempty"`
}

type harCookie struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// harPostData is the request body. HAR 1.2 defines "encoding" only for
// response content; bytes that are not UTF-8 go here the same way (base64
// text, "encoding": "base64"), an extension several HAR tools read and
// har-schema (which har-validator checks against) allows. A tool that
// does not know it sees base64 text, never bytes mangled into U+FFFD
// (docs/exports.md).
type harPostData struct {
	MimeType string `json:"mimeType"`
	Text     string `json:"text"`
	Encoding string `json:"encoding,omitempty"`
	Comment  string `json:"comment,omitempty"`
}

type harRequest struct {
	Method      string         `json:"method"`
	URL         string         `json:"url"`
	HTTPVersion string         `json:"httpVersion"`
	Cookies     []harCookie    `json:"cookies"`
	Headers     []harHeader    `json:"headers"`
	QueryString []harNameValue `json:"queryString"`
	PostData    *harPostData   `json:"postData,omitempty"`
	HeadersSize int            `json:"headersSize"`
	BodySize    int            `json:"bodySize"`
	Comment     string         `json:"comment,omitempty"`
}

type harContent struct {
	Size     int    `json:"size"`
	MimeType string `json:"mimeType"`
	Text     string `json:"text,omitempty"`
	Encoding string `json:"encoding,omitempty"`
	Comment  string `json:"comment,omitempty"`
}

type harResponse struct {
	Status      int         `json:"status"`
	StatusText  string      `json:"statusText"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []harCookie `json:"cookies"`
	Headers     []harHeader `json:"headers"`
	Content     harContent  `json:"content"`
	RedirectURL string      `json:"redirectURL"`
	HeadersSize int         `json:"headersSize"`
	BodySize    int         `json:"bodySize"`
	Comment     string      `json:"comment,omitempty"`
}

// harTimings: the relay knows how long the local process took to answer
// (wait); the phases of the sender's own connection are not recorded (-1).
type harTimings struct {
	Blocked int `json:"blocked"`
	DNS     int `json:"dns"`
	Connect int `json:"connect"`
	Send    int `json:"send"`
	Wait    int `json:"wait"`
	Receive int `json:"receive"`
	SSL     int `json:"ssl"`
}

// harRelay is an entry's _relay field: what HAR has no place for.
type harRelay struct {
	DeliveryID     string  `json:"deliveryId"`
	Address        string  `json:"address"`
	Path           string  `json:"path"`       // the raw request target, as sent
	PathBase64     *string `json:"pathBase64"` // its bytes, when not UTF-8
	Complete       bool    `json:"complete"`   // the body is stored whole
	BodySize       int     `json:"bodySize"`   // bytes the sender sent
	StoredBytes    int     `json:"storedBytes"`
	BodyUnread     bool    `json:"bodyUnread"`
	DroppedHeaders int     `json:"droppedHeaders"`
	// Incomplete says what is not stored; absent when all of it is.
	Incomplete string                 `json:"incomplete,omitempty"`
	Attempts   []deliveryjson.Attempt `json:"attempts"`
}

type harEntry struct {
	StartedDateTime string      `json:"startedDateTime"`
	Time            int         `json:"time"`
	Request         harRequest  `json:"request"`
	Response        harResponse `json:"response"`
	Cache           struct{}    `json:"cache"`
	Timings         harTimings  `json:"timings"`
	Comment         string      `json:"comment,omitempty"`
	Relay           harRelay    `json:"_relay"`
}

// Writer streams a HAR document: the log's head, the entries as they
// come, then the closing brackets.
type Writer struct {
	w       io.Writer
	baseURL string
	n       int
}

// NewWriter is a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (h *Writer) Begin(m deliveryjson.Meta) error {
	h.baseURL = strings.TrimRight(m.URL, "/")
	head := struct {
		Version string `json:"version"`
		Creator struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"creator"`
		Comment string `json:"comment"`
		Relay   struct {
			Address    string `json:"address"`
			URL        string `json:"url"`
			ExportedAt string `json:"exportedAt"`
			Filter     string `json:"filter"`
		} `json:"_relay"`
	}{Version: "1.2", Comment: fmt.Sprintf("Deliveries of %s (%s), oldest first: %s", m.Address, m.URL, m.Filter)}
	head.Creator.Name, head.Creator.Version = "relay", m.Version
	head.Relay.Address, head.Relay.URL, head.Relay.ExportedAt, head.Relay.Filter = m.Address, m.URL, m.ExportedAt.Format(time.RFC3339Nano), m.Filter
	b, err := marshalJSON(head)
	if err != nil {
		return err
	}
	// The head's closing brace is replaced by the entries array, which the
	// entries then fill one by one.
	_, err = fmt.Fprintf(h.w, "{\"log\":%s,\"entries\":[", b[:len(b)-1])
	return err
}

func (h *Writer) Entry(d deliveryjson.Export) error {
	b, err := marshalJSON(harEntryOf(d, h.baseURL))
	if err != nil {
		return fmt.Errorf("delivery %s: %w", d.ID, err)
	}
	sep := "\n"
	if h.n > 0 {
		sep = ",\n"
	}
	h.n++
	_, err = fmt.Fprintf(h.w, "%s%s", sep, b)
	return err
}

func (h *Writer) End() error {
	_, err := io.WriteString(h.w, "\n]}}\n")
	return err
}

// marshalJSON is json.Marshal without HTML escaping (a body's < stays <).
func marshalJSON(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}

// harEntryOf maps a delivery to a HAR entry (docs/exports.md).
func harEntryOf(d deliveryjson.Export, baseURL string) harEntry {
	body := d.Body()
	target := d.Target()
	e := harEntry{
		StartedDateTime: d.ReceivedAt,
		Request: harRequest{
			Method: d.Method, URL: baseURL + urlSafe(target), HTTPVersion: d.HTTPVersion,
			Cookies: []harCookie{}, Headers: harHeaders(d.Headers), QueryString: queryString(target),
			HeadersSize: -1, BodySize: d.BodySize,
		},
		Timings: harTimings{Blocked: -1, DNS: -1, Connect: -1, SSL: -1},
		Relay: harRelay{DeliveryID: d.ID, Address: d.Address, Path: d.Path, PathBase64: d.PathBase64,
			Complete: d.Complete, BodySize: d.BodySize, StoredBytes: len(body), BodyUnread: d.BodyUnread,
			DroppedHeaders: d.DroppedHeaders, Incomplete: d.IncompleteText(), Attempts: d.Attempts},
	}
	if e.Relay.Attempts == nil {
		e.Relay.Attempts = []deliveryjson.Attempt{}
	}
	for _, h := range d.Headers {
		if strings.EqualFold(h.Name, "Cookie") {
			e.Request.Cookies = append(e.Request.Cookies, parseCookies(h.Value)...)
		}
	}
	if len(body) > 0 || d.BodySize > 0 {
		e.Request.PostData = &harPostData{MimeType: headerValue(d.Headers, "Content-Type")}
		e.Request.PostData.Text, e.Request.PostData.Encoding = textOrEncoded(body)
	}
	if why := e.Relay.Incomplete; why != "" {
		// Never silently: the comment is what HAR viewers show.
		e.Comment = "Incomplete: " + why + ". The request here is what the relay stored, not all the sender sent."
		if e.Request.PostData != nil && !d.Complete {
			e.Request.PostData.Comment = fmt.Sprintf("the first %d of %d bytes", len(body), d.BodySize)
		}
	}
	e.Response = harResponseOf(d)
	// wait: the first attempt's time to the local answer, which the sender
	// waited for; 0 where the relay answered at once.
	for _, a := range d.Attempts {
		if !a.Retry {
			if a.DurationMs != nil {
				e.Timings.Wait = *a.DurationMs
			}
			break
		}
	}
	e.Time = e.Timings.Send + e.Timings.Wait + e.Timings.Receive
	return e
}

// harResponseOf is the answer the relay recorded for d: for a retried
// delivery the latest attempt's (so says its comment), and status 0, as
// browsers write a request with no answer, when none is recorded yet.
func harResponseOf(d deliveryjson.Export) harResponse {
	r := harResponse{HTTPVersion: d.HTTPVersion, Cookies: []harCookie{}, Headers: harHeaders(d.ResponseHeaders),
		HeadersSize: -1, BodySize: -1, RedirectURL: headerValue(d.ResponseHeaders, "Location")}
	r.Content.MimeType = headerValue(d.ResponseHeaders, "Content-Type")
	for _, h := range d.ResponseHeaders {
		if strings.EqualFold(h.Name, "Set-Cookie") {
			if c, err := http.ParseSetCookie(h.Value); err == nil {
				r.Cookies = append(r.Cookies, harCookie{Name: c.Name, Value: c.Value})
			}
		}
	}
	if d.ResponseStatus == nil {
		r.HTTPVersion = ""
		r.Comment = "no answer recorded yet"
		r.Content.Size = 0
		return r
	}
	r.Status = *d.ResponseStatus
	r.StatusText = http.StatusText(r.Status)
	for _, a := range d.Attempts {
		if a.Retry {
			r.Comment = "the answer to the latest attempt (a retry), not necessarily the one the sender got"
		}
	}
	switch {
	case d.ResponseBodyBase64 != nil:
		b, _ := base64.StdEncoding.DecodeString(*d.ResponseBodyBase64)
		r.Content.Size, r.BodySize = len(b), len(b)
		r.Content.Text, r.Content.Encoding = textOrEncoded(b)
	case r.Status == http.StatusNoContent || r.Status == http.StatusNotModified:
		r.BodySize = 0
	default:
		r.Content.Comment = "body not recorded (the relay's own answer, or an Endpoint without response capture)"
	}
	return r
}

// textOrEncoded is b as text, or as base64 with the encoding "base64" when
// it is not UTF-8.
func textOrEncoded(b []byte) (text, encoding string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

func harHeaders(hs []deliveryjson.Header) []harHeader {
	out := make([]harHeader, 0, len(hs))
	for _, h := range hs {
		out = append(out, harHeader(h))
	}
	return out
}

// headerValue is the first value of a header, or "".
func headerValue(hs []deliveryjson.Header, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

func parseCookies(line string) []harCookie {
	cs, err := http.ParseCookie(line)
	if err != nil {
		return nil
	}
	out := make([]harCookie, 0, len(cs))
	for _, c := range cs {
		out = append(out, harCookie{Name: c.Name, Value: c.Value})
	}
	return out
}

// urlSafe is a request target fit for a URL in JSON: bytes that are not
// UTF-8 percent-encoded (their exact form is in _relay.pathBase64).
func urlSafe(target string) string {
	if utf8.ValidString(target) {
		return target
	}
	var b strings.Builder
	for i := 0; i < len(target); {
		r, size := utf8.DecodeRuneInString(target[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, "%%%02X", target[i])
		} else {
			b.WriteString(target[i : i+size])
		}
		i += size
	}
	return b.String()
}

// queryString lists the target's query parameters in order, repeats kept,
// decoded as a form would be ("+" is a space); a part that does not decode
// to UTF-8 text is kept as sent.
func queryString(target string) []harNameValue {
	out := []harNameValue{}
	_, query, ok := strings.Cut(target, "?")
	if !ok {
		return out
	}
	for part := range strings.SplitSeq(query, "&") {
		if part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		out = append(out, harNameValue{Name: formDecode(name), Value: formDecode(value)})
	}
	return out
}

func formDecode(s string) string {
	d, err := url.QueryUnescape(s)
	if err != nil || !utf8.ValidString(d) {
		return urlSafe(s)
	}
	return d
}
