package domain

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Filters decide which deliveries a listener is given. One filter names a
// part of the request and the values it may have (any of them matches); a
// list of filters matches when every filter does. The text form, parsed
// only by ParseFilter, is:
//
//	method=POST,PUT                      the request method (case-insensitive)
//	path=/webhooks/stripe                the path, exactly (query left out)
//	path=/webhooks/*                     the path, by prefix (a trailing *)
//	header:X-GitHub-Event=push,pull_request   a header's value (any of its lines)
//	json:data.object.status=succeeded    a field of a JSON body, by dotted path
//	event=charge.succeeded,invoice.paid  the provider's event type (DetectProvider)

// FilterKind names the part of a request a filter looks at.
type FilterKind string

const (
	FilterMethod FilterKind = "method"
	FilterPath   FilterKind = "path"
	FilterHeader FilterKind = "header"
	FilterJSON   FilterKind = "json"
	FilterEvent  FilterKind = "event"
)

// Limits of filters: a listener's filters are checked for every delivery.
const (
	MaxFilters        = 16  // per listener or Endpoint
	MaxFilterValues   = 32  // per filter
	MaxFilterTextSize = 512 // bytes of one filter's text form
)

// Filter is one parsed filter. Name is the header name or the JSON path
// (empty for the other kinds); Values are what the part may be.
type Filter struct {
	Kind   FilterKind `json:"kind"`
	Name   string     `json:"name,omitempty"`
	Values []string   `json:"values"`
}

// String is the filter's text form, which ParseFilter reads back.
func (f Filter) String() string {
	head := string(f.Kind)
	if f.Name != "" {
		head += ":" + f.Name
	}
	return head + "=" + strings.Join(f.Values, ",")
}

// ParseFilter reads one filter's text form. Errors are *InvalidInputError
// naming the fault.
func ParseFilter(text string) (Filter, error) {
	bad := func(format string, a ...any) (Filter, error) {
		return Filter{}, &InvalidInputError{Field: "filter " + strconv.Quote(text), Reason: fmt.Sprintf(format, a...)}
	}
	if len(text) > MaxFilterTextSize {
		return bad("longer than %d bytes", MaxFilterTextSize)
	}
	head, values, ok := strings.Cut(text, "=")
	if !ok {
		return bad("no '=': write kind=value, e.g. method=POST or json:type=charge.succeeded")
	}
	kind, name, named := strings.Cut(strings.TrimSpace(head), ":")
	f := Filter{Kind: FilterKind(strings.ToLower(strings.TrimSpace(kind))), Name: strings.TrimSpace(name)}
	for _, v := range strings.Split(values, ",") {
		f.Values = append(f.Values, strings.TrimSpace(v))
	}
	if f.Kind == FilterHeader || f.Kind == FilterJSON {
		if !named || f.Name == "" {
			return bad("%s needs a name: %s:NAME=VALUE", f.Kind, f.Kind)
		}
	} else if named {
		return bad("%s takes no name (only header: and json: do)", f.Kind)
	}
	if err := f.Validate(); err != nil {
		return Filter{}, &InvalidInputError{Field: "filter " + strconv.Quote(text), Reason: err.(*InvalidInputError).Reason}
	}
	return f, nil
}

// ParseFilters reads several filters' text forms, in order.
func ParseFilters(texts []string) ([]Filter, error) {
	if len(texts) > MaxFilters {
		return nil, &InvalidInputError{Field: "filters", Reason: fmt.Sprintf("%d filters, at most %d", len(texts), MaxFilters)}
	}
	var out []Filter
	for _, t := range texts {
		f, err := ParseFilter(t)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// Validate checks a filter given as a structure (the API's input), as
// ParseFilter checks its text. It normalises nothing.
func (f Filter) Validate() error {
	bad := func(format string, a ...any) error {
		return &InvalidInputError{Field: "filter " + strconv.Quote(f.String()), Reason: fmt.Sprintf(format, a...)}
	}
	switch f.Kind {
	case FilterMethod, FilterPath, FilterEvent:
		if f.Name != "" {
			return bad("%s takes no name (only header and json do)", f.Kind)
		}
	case FilterHeader:
		if !ValidHeaderName(f.Name) {
			return bad("%q is not a header name", f.Name)
		}
	case FilterJSON:
		for _, seg := range strings.Split(f.Name, ".") {
			if seg == "" {
				return bad("JSON path %q has an empty segment", f.Name)
			}
		}
	default:
		return bad("unknown kind %q: use method, path, header:NAME, json:PATH or event", f.Kind)
	}
	if len(f.String()) > MaxFilterTextSize {
		return bad("longer than %d bytes", MaxFilterTextSize)
	}
	if len(f.Values) == 0 {
		return bad("no value")
	}
	if len(f.Values) > MaxFilterValues {
		return bad("%d values, at most %d", len(f.Values), MaxFilterValues)
	}
	for _, v := range f.Values {
		switch {
		case v == "":
			return bad("empty value")
		case strings.ContainsAny(v, ",\r\n\x00"):
			return bad("value %q holds a comma or a control character", v)
		case f.Kind == FilterMethod && !ValidHeaderName(v):
			return bad("%q is not an HTTP method", v)
		case f.Kind == FilterPath && !strings.HasPrefix(v, "/"):
			return bad("path %q does not start with /", v)
		case f.Kind == FilterPath && strings.Contains(strings.TrimSuffix(v, "*"), "*"):
			return bad("path %q: * may only end a path (a prefix)", v)
		}
	}
	return nil
}

// ValidateFilters checks a list of filters given as structures.
func ValidateFilters(fs []Filter) error {
	if len(fs) > MaxFilters {
		return &InvalidInputError{Field: "filters", Reason: fmt.Sprintf("%d filters, at most %d", len(fs), MaxFilters)}
	}
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// ValidHeaderName reports whether s is an HTTP token (RFC 9110 5.6.2), as
// header names and methods are.
func ValidHeaderName(s string) bool {
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

// FilterRequest is what filters look at: a request as forwarded. Each
// JSON path is looked up once, at first need (LookupJSON: at most
// MaxJSONScanBody bytes, no tree built), as is the provider.
type FilterRequest struct {
	Method  string
	Target  string // raw request target: the path and query
	Headers []Header
	Body    []byte

	fields   map[string]jsonField // the paths looked up so far
	scans    int                  // passes over the body so far
	provided bool
	event    string
	// headers holds the values of each header name (by foldKey), built
	// in one pass over Headers at the first header filter: a filter then
	// costs a lookup per value it lists, whatever the request's headers.
	headers map[string]*headerLines
	// headerWork counts the header lines visited (indexing them, building
	// a name's set) and the values compared or looked up by header
	// filters, for the tests that hold them to their bounds.
	headerWork headerWork
}

// headerWork is what header filters cost one request so far.
type headerWork struct {
	lines   int // header lines visited: once to index them, once more for a name's set
	lookups int // a value compared with a line, or looked up in a name's set
}

// headerLines is the values a request gives one header name, in order,
// and the set of them once one filter has looked them up.
type headerLines struct {
	values []string
	set    map[string]struct{}
	text   *string // the values joined for a filter's why, once needed
}

// setFrom is how many lines of one name are looked up through a set
// rather than compared with each value a filter lists.
const setFrom = 4

// has reports whether any line is one of want: at most len(want) lookups
// in a set built once per request, or for a few lines, at most
// setFrom×len(want) comparisons.
func (h *headerLines) has(want []string, work *headerWork) bool {
	if len(h.values) <= setFrom {
		for _, g := range h.values {
			for _, v := range want {
				work.lookups++
				if v == g {
					return true
				}
			}
		}
		return false
	}
	if h.set == nil {
		h.set = make(map[string]struct{}, len(h.values))
		for _, g := range h.values {
			h.set[g] = struct{}{}
		}
		work.lines += len(h.values)
	}
	for _, v := range want {
		work.lookups++
		if _, ok := h.set[v]; ok {
			return true
		}
	}
	return false
}

// headerLines is the lines of header name in r (no lines: nil), names
// compared without regard to case.
func (r *FilterRequest) headerLines(name string) *headerLines {
	if r.headers == nil {
		r.headers = make(map[string]*headerLines)
		for _, h := range r.Headers {
			k := foldKey(h.Name)
			hl := r.headers[k]
			if hl == nil {
				hl = &headerLines{}
				r.headers[k] = hl
			}
			hl.values = append(hl.values, h.Value)
		}
		r.headerWork.lines += len(r.Headers)
	}
	return r.headers[foldKey(name)]
}

// foldKey is a header name as the filters compare it: without regard to
// case. Header names are HTTP tokens (ASCII: net/http refuses others, and
// ValidateFilters refuses a filter's), for which lower case is what
// strings.EqualFold compares.
func foldKey(s string) string { return strings.ToLower(s) }

// joined is the lines joined with commas, for a filter's why: empty when
// longer than bound allows (it is not built then).
func (h *headerLines) joined() string {
	if h.text == nil {
		n := len(h.values) - 1
		for _, g := range h.values {
			if n += len(g); n > maxProviderField {
				break
			}
		}
		t := ""
		if n <= maxProviderField {
			t = bound(strings.Join(h.values, ","))
		}
		h.text = &t
	}
	return *h.text
}

// jsonField is one JSON path's lookup: its value, or why the body was not
// looked inside.
type jsonField struct {
	value JSONValue
	err   error
}

// NewFilterRequest wraps a forward command for filters.
func NewFilterRequest(cmd ForwardCommand) *FilterRequest {
	return &FilterRequest{Method: cmd.Method, Target: cmd.Target, Headers: cmd.Headers, Body: cmd.Body}
}

// Match reports whether every filter matches r; when one does not, why
// names the first that failed, e.g. `json type=charge.failed not in [charge.succeeded]`.
func Match(fs []Filter, r *FilterRequest) (ok bool, why string) {
	r.Prepare(fs)
	for _, f := range fs {
		if ok, why := f.match(r); !ok {
			return false, why
		}
	}
	return true, ""
}

func (f Filter) match(r *FilterRequest) (bool, string) {
	label := string(f.Kind)
	if f.Name != "" {
		label += " " + f.Name
	}
	var got []string
	absent := " absent" // why nothing was got
	switch f.Kind {
	case FilterMethod:
		for _, v := range f.Values {
			if strings.EqualFold(v, r.Method) {
				return true, ""
			}
		}
		got = []string{r.Method}
	case FilterPath:
		path, _, _ := strings.Cut(r.Target, "?")
		for _, v := range f.Values {
			if p, prefix := strings.CutSuffix(v, "*"); (prefix && strings.HasPrefix(path, p)) || path == v {
				return true, ""
			}
		}
		got = []string{path}
	case FilterHeader:
		// One lookup per listed value in the set of the name's lines
		// (built once per request), not a comparison of every line with
		// every value: a request's headers cost each filter nothing more.
		hl := r.headerLines(f.Name)
		if hl == nil {
			break
		}
		if hl.has(f.Values, &r.headerWork) {
			return true, ""
		}
		return false, label + "=" + hl.joined() + " not in [" + strings.Join(f.Values, ",") + "]"
	case FilterJSON:
		v, err := r.jsonField(f.Name)
		switch {
		case err != nil: // a *JSONScanError: the body was not looked inside
			absent = " not examined: " + err.Error()
		case v.Found:
			got = []string{v.Text}
		}
	case FilterEvent:
		if e := r.eventType(); e != "" {
			got = []string{e}
		}
	}
	for _, g := range got {
		for _, v := range f.Values {
			if g == v {
				return true, ""
			}
		}
	}
	want := "[" + strings.Join(f.Values, ",") + "]"
	if len(got) == 0 {
		return false, label + absent + ", wanted " + want
	}
	return false, label + "=" + bound(strings.Join(got, ",")) + " not in " + want
}

// jsonField is the body's field at a dotted path: a string as it is, a
// number, boolean or null as JSON writes it. Array elements are named by
// their index. An object or array is no single value: not Found.
func (r *FilterRequest) jsonField(path string) (JSONValue, error) {
	f, ok := r.fields[path]
	if !ok {
		r.lookup([]string{path})
		f = r.fields[path]
	}
	return f.value, f.err
}

// Prepare looks up every JSON path the filter lists name that r has not
// looked up yet, in one scan of the body per MaxJSONScanPaths paths: a
// delivery matched against many listeners' filters costs one pass over its
// body, not one per distinct path.
func (r *FilterRequest) Prepare(lists ...[]Filter) {
	var paths []string
	for _, fs := range lists {
		for _, f := range fs {
			if _, done := r.fields[f.Name]; f.Kind != FilterJSON || done || slices.Contains(paths, f.Name) {
				continue
			}
			paths = append(paths, f.Name)
		}
	}
	for len(paths) > 0 {
		n := min(len(paths), MaxJSONScanPaths)
		r.lookup(paths[:n])
		paths = paths[n:]
	}
}

// lookup scans the body once for paths and keeps what it found for each.
func (r *FilterRequest) lookup(paths []string) {
	segs := make([][]string, len(paths))
	for i, p := range paths {
		segs[i] = strings.Split(p, ".")
	}
	vs, err := LookupJSON(r.Body, segs...)
	r.scans++
	if r.fields == nil {
		r.fields = make(map[string]jsonField, len(paths))
	}
	for i, p := range paths {
		f := jsonField{err: err}
		if err == nil {
			f.value = vs[i]
		}
		r.fields[p] = f
	}
}

func (r *FilterRequest) eventType() string {
	if !r.provided {
		r.provided = true
		if p := DetectProvider(r.Headers, r.Body, true); p != nil {
			r.event = p.EventType
		}
	}
	return r.event
}

// FilterTexts is the text form of each filter.
func FilterTexts(fs []Filter) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}
