package bundle

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/internal/jsoncount"
)

const testBundleHead = `{"relay_bundle":1,"address":"abc","url":"http://abc.localhost:8080/","exportedAt":"2026-01-02T03:04:05Z","creator":"relay test"}`

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// readBundle reads every request of a bundle, stopping at the first error.
func readBundle(t *testing.T, text string) ([]Request, error) {
	t.Helper()
	br, err := NewReader(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	var out []Request
	for {
		r, err := br.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

// TestBundleReader: good lines read back to the exact bytes; every kind of
// bad line is refused with an error naming its line and the reason.
func TestBundleReader(t *testing.T) {
	binary := "\x00\xff\xfe"
	good := `{"id":"d1","receivedAt":"2026-01-02T03:04:05Z","method":"POST","path":"/hook?a=1&a=2",` +
		`"headers":[{"name":"X-Sig","value":"one"},{"name":"X-Sig","value":"two"},{"name":"X-Raw","valueBase64":"` + b64("v\xff") + `"},` +
		`{"name":"Content-Length","value":"3"}],"bodyBase64":"` + b64(binary) + `","bodySize":3,"complete":true}`
	tests := []struct {
		name  string
		lines []string // after the header line
		head  string   // the header line; testBundleHead when empty
		want  int      // requests read before the error
		err   string   // in the error; "" for none
	}{
		{name: "one good line", lines: []string{good}, want: 1},
		{name: "CRLF line ends", lines: []string{good + "\r"}, want: 1},
		{name: "no deliveries", lines: nil, want: 0},
		{name: "path bytes that are not UTF-8", lines: []string{`{"id":"d","method":"GET","path":"/?","pathBase64":"` + b64("/\xff?q") + `","headers":[],"bodyBase64":"","complete":true}`}, want: 1},
		{name: "incomplete, its framing not checked", lines: []string{`{"id":"d","method":"POST","path":"/","headers":[{"name":"Content-Length","value":"999"}],"bodyBase64":"` + b64("ab") + `","bodySize":999,"complete":false}`}, want: 1},
		{name: "empty file", head: "-", err: "bundle line 1: the file is empty"},
		{name: "not a bundle", head: `{"entries":[]}`, err: "bundle line 1: not a relay bundle"},
		{name: "a HAR file", head: `{"log":{"version":"1.2","creator":{"name":"relay"},"entries":[`, err: "bundle line 1: a HAR file, not a relay bundle: export a replay bundle with relay deliveries export ADDRESS --format bundle -o FILE"},
		{name: "a later version", head: `{"relay_bundle":2}`, err: "bundle line 1: bundle version 2"},
		{name: "not JSON", lines: []string{good, "POST / HTTP/1.1"}, want: 1, err: "bundle line 3: not a JSON object"},
		{name: "two values", lines: []string{good + " {}"}, err: "bundle line 2: more than one JSON value"},
		{name: "empty line", lines: []string{good, "", good}, want: 1, err: "bundle line 3: empty line"},
		{name: "no id", lines: []string{`{"method":"GET","path":"/","headers":[],"bodyBase64":"","complete":true}`}, err: "bundle line 2: no id"},
		{name: "no body", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[],"complete":true}`}, err: "no bodyBase64"},
		{name: "no complete", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[],"bodyBase64":""}`}, err: "no complete"},
		{name: "body base64 with JSON escapes", lines: []string{`{"id":"d","method":"POST","path":"/","headers":[],"bodyBase64":"\/\/\/\u002f","bodySize":3,"complete":true}`}, want: 1},
		{name: "body null", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[],"bodyBase64":null,"complete":true}`}, err: "no bodyBase64"},
		{name: "body not a string", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[],"bodyBase64":12,"complete":true}`}, err: "bodyBase64: not a string"},
		{name: "body not base64", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[],"bodyBase64":"%%%","complete":true}`}, err: "bodyBase64"},
		{name: "method with a space", lines: []string{`{"id":"d","method":"GET /x","path":"/","headers":[],"bodyBase64":"","complete":true}`}, err: `method "GET /x" is not an HTTP method`},
		{name: "request smuggled into the path", lines: []string{`{"id":"d","method":"GET","path":"/ HTTP/1.1\r\nHost: x\r\n\r\nGET /admin","headers":[],"bodyBase64":"","complete":true}`}, err: "which no request target may"},
		{name: "path not origin-form", lines: []string{`{"id":"d","method":"GET","path":"http://evil/","headers":[],"bodyBase64":"","complete":true}`}, err: "does not start with /"},
		{name: "path with a bad escape", lines: []string{`{"id":"d","method":"GET","path":"/%zz","headers":[],"bodyBase64":"","complete":true}`}, err: "invalid URL escape"},
		{name: "header name with a colon", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[{"name":"X:Y","value":"v"}],"bodyBase64":"","complete":true}`}, err: "header 1: name \"X:Y\""},
		{name: "header value with a line break", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[{"name":"X","value":"a\r\nInjected: 1"}],"bodyBase64":"","complete":true}`}, err: "control byte 0xd"},
		{name: "header value bytes with a line break", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[{"name":"X","valueBase64":"` + b64("a\nb") + `"}],"bodyBase64":"","complete":true}`}, err: "control byte 0xa"},
		{name: "header value with outer space", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[{"name":"X","value":" a"}],"bodyBase64":"","complete":true}`}, err: "whitespace"},
		{name: "header with two values", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[{"name":"X","value":"a","valueBase64":"YQ=="}],"bodyBase64":"","complete":true}`}, err: "both value and valueBase64"},
		{name: "header with no value", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[{"name":"X"}],"bodyBase64":"","complete":true}`}, err: "X has no value"},
		{name: "Content-Length not the body's", lines: []string{`{"id":"d","method":"POST","path":"/","headers":[{"name":"Content-Length","value":"10"}],"bodyBase64":"` + b64("ab") + `","complete":true}`}, err: `Content-Length "10" is not the body's length 2`},
		{name: "two Content-Lengths", lines: []string{`{"id":"d","method":"POST","path":"/","headers":[{"name":"Content-Length","value":"2"},{"name":"Content-Length","value":"2"}],"bodyBase64":"` + b64("ab") + `","complete":true}`}, err: "more than one Content-Length"},
		{name: "Content-Length and chunked", lines: []string{`{"id":"d","method":"POST","path":"/","headers":[{"name":"Content-Length","value":"2"},{"name":"Transfer-Encoding","value":"chunked"}],"bodyBase64":"` + b64("ab") + `","complete":true}`}, err: "both Content-Length and Transfer-Encoding"},
		{name: "a coding other than chunked", lines: []string{`{"id":"d","method":"POST","path":"/","headers":[{"name":"Transfer-Encoding","value":"gzip"}],"bodyBase64":"","complete":true}`}, err: "only chunked"},
		{name: "two Hosts", lines: []string{`{"id":"d","method":"GET","path":"/","headers":[{"name":"Host","value":"a"},{"name":"Host","value":"b"}],"bodyBase64":"","complete":true}`}, err: "more than one Host"},
		{name: "bodySize below the stored body", lines: []string{`{"id":"d","method":"POST","path":"/","headers":[],"bodyBase64":"` + b64("abc") + `","bodySize":1,"complete":false}`}, err: "bodySize 1 does not fit"},
		{name: "a line over the limit", lines: []string{good, `{"id":"` + strings.Repeat("x", MaxLine) + `"}`}, want: 1, err: "bundle line 3: longer than 32 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			head := testBundleHead
			switch tt.head {
			case "-":
				head = ""
			case "":
			default:
				head = tt.head
			}
			text := head
			if head != "" {
				text += "\n"
			}
			for _, l := range tt.lines {
				text += l + "\n"
			}
			got, err := readBundle(t, text)
			if len(got) != tt.want {
				t.Errorf("read %d requests, want %d", len(got), tt.want)
			}
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one containing %q", err, tt.err)
			}
		})
	}
}

// TestBundleRequestExactBytes: a line reads back to the recorded bytes, and
// is written as exactly those bytes: no header added, none reordered, the
// repeats kept, the target as sent.
func TestBundleRequestExactBytes(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{
			name: "headers in order with repeats and binary bytes",
			line: `{"id":"d1","method":"POST","path":"//a/../b?x=%2F&x=2","headers":[{"name":"X-Sig","value":"one"},` +
				`{"name":"Content-Type","value":"application/octet-stream"},{"name":"X-Sig","value":"two"},{"name":"X-Raw","valueBase64":"` + b64("v\xff") + `"},` +
				`{"name":"Content-Length","value":"3"}],"bodyBase64":"` + b64("\x00\xff\n") + `","complete":true}`,
			want: "POST //a/../b?x=%2F&x=2 HTTP/1.1\r\nHost: localhost:3000\r\nX-Sig: one\r\nContent-Type: application/octet-stream\r\nX-Sig: two\r\nX-Raw: v\xff\r\nContent-Length: 3\r\n\r\n\x00\xff\n",
		},
		{
			name: "no User-Agent or Accept-Encoding, an empty value kept",
			line: `{"id":"d2","method":"GET","path":"/","headers":[{"name":"X-Empty","value":""}],"bodyBase64":"","complete":true}`,
			want: "GET / HTTP/1.1\r\nHost: localhost:3000\r\nX-Empty:\r\n\r\n",
		},
		{
			name: "chunked as recorded",
			line: `{"id":"d3","method":"PUT","path":"/c","headers":[{"name":"Transfer-Encoding","value":"chunked"}],"bodyBase64":"` + b64("hello") + `","complete":true}`,
			want: "PUT /c HTTP/1.1\r\nHost: localhost:3000\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		},
		{
			name: "recorded over HTTP/2 without a length",
			line: `{"id":"d4","method":"POST","path":"/h2","headers":[],"bodyBase64":"` + b64("ab") + `","complete":true}`,
			want: "POST /h2 HTTP/1.1\r\nHost: localhost:3000\r\nContent-Length: 2\r\n\r\nab",
		},
		{
			name: "the line's own Host",
			line: `{"id":"d5","method":"GET","path":"/p","headers":[{"name":"Accept","value":"*/*"},{"name":"Host","value":"shop.example"}],"bodyBase64":"","complete":true}`,
			want: "GET /api/p HTTP/1.1\r\nAccept: */*\r\nHost: shop.example\r\n\r\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseLine([]byte(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			prefix := ""
			if r.hasHost {
				prefix = "/api"
			}
			var b bytes.Buffer
			if err := r.WriteRequest(&b, "localhost:3000", prefix); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("wrote\n%q\nwant\n%q", b.String(), tt.want)
			}
		})
	}
}

// FuzzParseBundleLine: whatever a line holds, reading it allocates within a
// bound of its bytes and JSON values, and it is refused, or it is
// written as exactly one HTTP/1.1 request that a server reads back with the
// line's method, target, headers and body, and nothing after it (no
// request smuggled in through a field).
func FuzzParseBundleLine(f *testing.F) {
	for _, seed := range []string{
		`{"id":"d","method":"POST","path":"/x?a=1","headers":[{"name":"X","value":"1"},{"name":"X","value":"2"}],"bodyBase64":"` + b64("\x00\xff") + `","complete":true}`,
		`{"id":"d","method":"PUT","path":"/c","headers":[{"name":"Transfer-Encoding","value":"chunked"}],"bodyBase64":"` + b64("hi") + `","complete":true}`,
		`{"id":"d","method":"GET","path":"*","headers":[{"name":"Host","value":"h"}],"bodyBase64":"","complete":true}`,
		`{"id":"d","method":"GET","pathBase64":"` + b64("/\xff") + `","path":"","headers":[{"name":"V","valueBase64":"` + b64("\x80\t\x81") + `"}],"bodyBase64":"","complete":true}`,
		`{"id":"d","method":"POST","path":"/","headers":[{"name":"Content-Length","value":"1"}],"bodyBase64":"YQ==","complete":true}`,
		`{"id":"d","method":"GET","path":"/ HTTP/1.1\r\nX: y","headers":[],"bodyBase64":"","complete":true}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var (
			r   Request
			err error
		)
		n := allocated(func() { r, err = ParseLine(line) })
		// A line costs what its text and its values do, no more (an empty
		// object decoded is about 190 bytes); past MaxLineValues nothing
		// is decoded.
		values, _ := jsoncount.Values(line, -1)
		if limit := uint64(8*len(line)+256*min(values, MaxLineValues)) + 64<<10; n > limit {
			t.Fatalf("a line of %d bytes and %d JSON values allocated %d bytes, over %d", len(line), values, n, limit)
		}
		if err != nil || r.SkipReason() != "" {
			return
		}
		for _, h := range r.Headers {
			// A server moves Trailer out of the headers of a chunked
			// request and refuses some names in it: not replay's concern.
			if strings.EqualFold(h[0], "Trailer") {
				return
			}
		}
		var wire bytes.Buffer
		if err := r.WriteRequest(&wire, "replay.test", ""); err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(bytes.NewReader(wire.Bytes()))
		got, err := http.ReadRequest(rd)
		if err != nil {
			t.Fatalf("a server cannot read what replay writes: %v\n%q", err, wire.Bytes())
		}
		body, err := io.ReadAll(got.Body)
		if err != nil {
			t.Fatalf("read the body: %v\n%q", err, wire.Bytes())
		}
		if rest, _ := io.ReadAll(rd); len(rest) > 0 {
			t.Fatalf("%d bytes after the request (a second request?): %q\n%q", len(rest), rest, wire.Bytes())
		}
		if got.Method != r.Method || got.RequestURI != r.Target || !bytes.Equal(body, r.Body) {
			t.Fatalf("read %s %q with %q, want %s %q with %q", got.Method, got.RequestURI, body, r.Method, r.Target, r.Body)
		}
		want := map[string][]string{}
		host := "replay.test"
		for _, h := range r.Headers {
			name := textproto.CanonicalMIMEHeaderKey(h[0])
			switch name {
			case "Host":
				host = h[1]
			case "Transfer-Encoding":
			default:
				want[name] = append(want[name], h[1])
			}
		}
		if r.addLength {
			want["Content-Length"] = []string{got.Header.Get("Content-Length")}
		}
		if _, ok := want["Pragma"]; ok && want["Cache-Control"] == nil && got.Header["Cache-Control"] != nil {
			// net/http adds it for Pragma: no-cache.
			want["Cache-Control"] = got.Header["Cache-Control"]
		}
		if got.Host != host {
			t.Fatalf("Host %q, want %q", got.Host, host)
		}
		if len(got.Header) != len(want) {
			t.Fatalf("headers %q, want %q", got.Header, want)
		}
		for name, values := range want {
			if !slices.Equal(got.Header[name], values) {
				t.Fatalf("header %s: %q, want %q", name, got.Header[name], values)
			}
		}
	})
}

// allocated is what f allocates on the heap, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// lineOf is a delivery line whose headers array repeats unit up to n bytes.
func lineOf(unit string, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":"d","method":"GET","path":"/","bodyBase64":"","complete":true,"headers":[`)
	for b.Len() < n {
		b.WriteString(unit)
		b.WriteByte(',')
	}
	b.WriteString(`{"name":"a","value":""}]}`)
	return b.Bytes()
}

// TestLineValuesBounded: a line's JSON values are counted before it is
// decoded. Decoded, an empty header object (3 bytes of the line) takes
// about 190 bytes, so a line of them cost some 60 times its size, and a
// line of MaxLine about 2 GiB. A line over MaxLineValues is refused having
// allocated next to nothing; one just under it, and the line the relay
// could write with the most headers, are decoded within 192 MiB.
func TestLineValuesBounded(t *testing.T) {
	hostile := lineOf(`{}`, 4<<20)
	var err error
	n := allocated(func() { _, err = ParseLine(hostile) })
	t.Logf("a %d MiB line of empty headers: %v, %d MiB allocated", len(hostile)>>20, err, n>>20)
	if err == nil || !strings.Contains(err.Error(), "JSON values") {
		t.Errorf("a line of %d empty headers: %v, want a refusal naming its JSON values", len(hostile)/3, err)
	}
	if n > 1<<20 {
		t.Errorf("refusing a %d MiB line allocated %d MiB", len(hostile)>>20, n>>20)
	}

	// Just under the bound, the same line is decoded (and refused for its
	// headers without names): the most a line can cost.
	under := lineOf(`{}`, 3*(MaxLineValues-16))
	n = allocated(func() { _, err = ParseLine(under) })
	t.Logf("a line of %d empty headers: %v, %d MiB allocated", len(under)/3, err, n>>20)
	if err == nil || !strings.Contains(err.Error(), "not a header name") {
		t.Errorf("a line just under the bound: %v, want it decoded and refused for its empty names", err)
	}
	if n > 192<<20 {
		t.Errorf("a line of %d empty headers allocated %d MiB", len(under)/3, n>>20)
	}

	// The most headers a delivery holds, each as short as it may be.
	var b bytes.Buffer
	b.WriteString(`{"id":"d","method":"GET","path":"/","bodyBase64":"","complete":true,"headers":[`)
	for i := range maxStoredHeaders {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":"a","value":""}`)
	}
	b.WriteString(`]}`)
	var r Request
	n = allocated(func() { r, err = ParseLine(b.Bytes()) })
	t.Logf("a line of %d headers (%d MiB): %v, %d MiB allocated", len(r.Headers), b.Len()>>20, err, n>>20)
	if err != nil || len(r.Headers) != maxStoredHeaders {
		t.Fatalf("the line with the most headers: %d headers, %v", len(r.Headers), err)
	}
	if n > 192<<20 {
		t.Errorf("reading %d headers allocated %d MiB", len(r.Headers), n>>20)
	}

	// Unknown fields are skipped, not decoded, in the first line as in the
	// others: they take nothing.
	head := []byte(`{"relay_bundle":1,"more":[` + strings.Repeat(`{},`, 4<<20/3) + `{}]}` + "\n")
	n = allocated(func() { _, err = NewReader(bytes.NewReader(head)) })
	t.Logf("a %d MiB first line of unknown values: %v, %d MiB allocated", len(head)>>20, err, n>>20)
	if err != nil {
		t.Errorf("a first line with an unknown field: %v", err)
	}
	// The line itself is read in blocks and copied once into a buffer of
	// its size (TestReadLineAllocatesItsSize): twice the line.
	if n > 2*uint64(len(head))+256<<10 {
		t.Errorf("a first line of %d MiB allocated %d MiB", len(head)>>20, n>>20)
	}
}

// TestReadLineAllocatesItsSize: a line is read through blocks the reader
// keeps and copied once into a buffer of the line's size, which the next
// line reuses. A buffer grown by append while reading took about five
// times a large line (19 MiB for a 4 MiB line), so reading lines at
// MaxLine allocated 160 MiB or more.
func TestReadLineAllocatesItsSize(t *testing.T) {
	line := bytes.Repeat([]byte("a"), 4<<20)
	file := append(append(append([]byte(testBundleHead), '\n'), line...), '\n')
	file = append(append(file, line...), '\n')
	br, err := NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	first := allocated(func() { got, err = br.readLine() })
	if err != nil || !bytes.Equal(got, line) {
		t.Fatalf("the first line read back %d bytes, %v", len(got), err)
	}
	second := allocated(func() { got, err = br.readLine() })
	if err != nil || !bytes.Equal(got, line) {
		t.Fatalf("the second line read back %d bytes, %v", len(got), err)
	}
	t.Logf("a %d MiB line: %.1f MiB allocated reading it, %.1f MiB reading another as long",
		len(line)>>20, float64(first)/(1<<20), float64(second)/(1<<20))
	// The blocks and the line's own buffer, and a little besides.
	if limit := 2*uint64(len(line)) + 256<<10; first > limit {
		t.Errorf("reading a %d MiB line allocated %d KiB, want at most %d KiB", len(line)>>20, first>>10, limit>>10)
	}
	if second > 256<<10 {
		t.Errorf("reading a second %d MiB line allocated %d KiB, want its buffers reused", len(line)>>20, second>>10)
	}
}

// TestParseLineAllocatesNearItsBody: a line's body is decoded from its
// base64 straight into one buffer of the body's size. Through
// json.Decoder (which buffers the whole line again) into a string, then
// decoded, a line of MaxLine took about 3.7 times its size (120 MiB).
func TestParseLineAllocatesNearItsBody(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), (MaxLine/4*3-64<<10)/16)
	line := []byte(`{"id":"d","receivedAt":"2026-01-01T00:00:00Z","method":"POST","path":"/hook",` +
		`"headers":[{"name":"Content-Type","value":"application/json"}],` +
		`"bodyBase64":"` + base64.StdEncoding.EncodeToString(body) + `","bodySize":` + strconv.Itoa(len(body)) + `,"complete":true}`)
	var (
		r   Request
		err error
	)
	n := allocated(func() { r, err = ParseLine(line) })
	t.Logf("a %.1f MiB line with a %.1f MiB body: %.1f MiB allocated", float64(len(line))/(1<<20), float64(len(body))/(1<<20), float64(n)/(1<<20))
	if err != nil || !bytes.Equal(r.Body, body) {
		t.Fatalf("the line read back a body of %d bytes, %v", len(r.Body), err)
	}
	// The body's buffer, and a little besides.
	if limit := uint64(len(body)) + 256<<10; n > limit {
		t.Errorf("parsing a %d MiB line allocated %d KiB, want at most %d KiB (its body and 256 KiB)", len(line)>>20, n>>10, limit>>10)
	}
}
