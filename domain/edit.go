package domain

import (
	"fmt"
	"strconv"
	"strings"
)

// RequestEdit is what a retry changes in the recorded request before it
// sends it: only what is set. The recorded request stays as it was; the
// attempt's ForwardRequested carries the edit, so the log says exactly what
// was sent.
type RequestEdit struct {
	Method string `json:"method,omitempty"`
	Target string `json:"target,omitempty"` // path and query
	// SetHeaders replace every value of their name (the first keeps its
	// place, a new name goes last); several of one name are all kept.
	SetHeaders   []Header `json:"set_headers,omitempty"`
	UnsetHeaders []string `json:"unset_headers,omitempty"`
	Body         *[]byte  `json:"body,omitempty"` // nil: unchanged
}

// Empty reports whether the edit changes nothing.
func (e RequestEdit) Empty() bool {
	return e.Method == "" && e.Target == "" && len(e.SetHeaders) == 0 && len(e.UnsetHeaders) == 0 && e.Body == nil
}

// Bounds of an edit: a request the ingress would also have taken. The
// names and values set are held to the ingress's default
// --max-header-bytes, so that the event that records the edit stays within
// what relay events verify reads of an export line.
const (
	maxEditHeaders     = 100
	maxEditTarget      = 8 << 10
	maxEditHeaderBytes = 64 << 10
)

// Check refuses an edit that would not make a valid HTTP request, or a
// body over maxBody, naming the field.
func (e RequestEdit) Check(maxBody int64) error {
	bad := func(field, reason string) error { return &InvalidInputError{Field: "edit." + field, Reason: reason} }
	switch {
	case e.Method != "" && !IsToken(e.Method):
		return bad("method", "must be an HTTP method token such as POST")
	case e.Target != "" && (!strings.HasPrefix(e.Target, "/") || len(e.Target) > maxEditTarget || strings.ContainsAny(e.Target, " \t\r\n\x00")):
		return bad("path", "must start with / and hold no spaces or control characters (at most 8 KiB)")
	case len(e.SetHeaders)+len(e.UnsetHeaders) > maxEditHeaders:
		return bad("setHeaders", fmt.Sprintf("at most %d headers set and unset", maxEditHeaders))
	case e.Body != nil && int64(len(*e.Body)) > maxBody:
		return bad("body", fmt.Sprintf("is %d bytes, over the relay's %d-byte body limit", len(*e.Body), maxBody))
	case headerBytes(e.SetHeaders) > maxEditHeaderBytes:
		return bad("setHeaders", fmt.Sprintf("at most %d bytes of names and values set", maxEditHeaderBytes))
	}
	for _, h := range e.SetHeaders {
		if !IsToken(h.Name) {
			return bad("setHeaders", fmt.Sprintf("%q is not a valid header name", h.Name))
		}
		if strings.ContainsAny(h.Value, "\r\n\x00") {
			return bad("setHeaders", fmt.Sprintf("the value of %s holds a line break or NUL", h.Name))
		}
		if isFraming(h.Name) {
			return bad("setHeaders", h.Name+" is set by the relay from the body: edit the body instead")
		}
	}
	for _, n := range e.UnsetHeaders {
		if !IsToken(n) {
			return bad("unsetHeaders", fmt.Sprintf("%q is not a valid header name", n))
		}
	}
	return nil
}

func headerBytes(hs []Header) int {
	n := 0
	for _, h := range hs {
		n += len(h.Name) + len(h.Value)
	}
	return n
}

// Apply returns the request the edit makes of a recorded one. With a new
// body, a recorded Content-Length follows it.
func (e RequestEdit) Apply(method, target string, headers []Header, body []byte) (string, string, []Header, []byte) {
	if e.Method != "" {
		method = e.Method
	}
	if e.Target != "" {
		target = e.Target
	}
	out := make([]Header, 0, len(headers)+len(e.SetHeaders))
	unset := func(name string) bool {
		for _, n := range e.UnsetHeaders {
			if strings.EqualFold(n, name) {
				return true
			}
		}
		return false
	}
	placed := map[string]bool{}
	for _, h := range headers {
		key := strings.ToLower(h.Name)
		if unset(h.Name) {
			continue
		}
		if set := e.valuesOf(key); set != nil {
			if !placed[key] {
				out = append(out, set...)
				placed[key] = true
			}
			continue
		}
		out = append(out, h)
	}
	for _, h := range e.SetHeaders {
		if key := strings.ToLower(h.Name); !placed[key] {
			out = append(out, e.valuesOf(key)...)
			placed[key] = true
		}
	}
	if e.Body != nil {
		body = *e.Body
		for i, h := range out {
			if strings.EqualFold(h.Name, "Content-Length") {
				out[i].Value = strconv.Itoa(len(body))
			}
		}
	}
	return method, target, out, body
}

// valuesOf is the set headers of a lower-cased name, nil when none.
func (e RequestEdit) valuesOf(key string) []Header {
	var out []Header
	for _, h := range e.SetHeaders {
		if strings.ToLower(h.Name) == key {
			out = append(out, h)
		}
	}
	return out
}

// isFraming names the headers the body's framing decides.
func isFraming(name string) bool {
	return strings.EqualFold(name, "Content-Length") || strings.EqualFold(name, "Transfer-Encoding")
}

// IsToken reports whether s is an HTTP token (RFC 9110 section 5.6.2): a
// method or a header name. Written here because the domain imports no
// framework (x/net's httpguts has the same rule).
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
