package ingress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
)

// readRequest parses raw bytes with net/http, as the server does.
func readRequest(t *testing.T, raw string) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatalf("ReadRequest(%q): %v", raw, err)
	}
	return r
}

func TestCaptureTarget(t *testing.T) {
	tests := []struct {
		method, target string
		want           string
		wantErr        error
	}{
		{method: "GET", target: "/", want: "/"},
		{method: "GET", target: "/x", want: "/x"},
		{method: "GET", target: "/x/", want: "/x/"},
		{method: "POST", target: "//a//b", want: "//a//b"},
		{method: "POST", target: "/a%2Fb?x=1&x=2", want: "/a%2Fb?x=1&x=2"},
		{method: "GET", target: "/%7Euser?q=a+b", want: "/%7Euser?q=a+b"},
		{method: "GET", target: "/a/../b/./c", want: "/a/../b/./c"},
		{method: "GET", target: "/?", want: "/?"},
		{method: "GET", target: "/x?a=%zz;b", want: "/x?a=%zz;b"},
		{method: "OPTIONS", target: "*", want: "*"},
		{method: "GET", target: "http://abc.localhost/p//q/?z=1", want: "/p//q/?z=1"},
		{method: "GET", target: "http://abc.localhost:8080", want: "/"},
		{method: "GET", target: "http://abc.localhost?x=1", want: "/?x=1"},
		{method: "CONNECT", target: "abc.localhost:443", wantErr: ErrUnsupportedTarget},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			r := readRequest(t, tt.method+" "+tt.target+" HTTP/1.1\r\nHost: abc.localhost\r\n\r\n")
			req, _, err := Capture(r, 16, 64)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Capture error = %v, want %v", err, tt.wantErr)
			}
			if err == nil && req.Target != tt.want {
				t.Errorf("Target = %q, want %q", req.Target, tt.want)
			}
		})
	}
}

func TestCaptureHeaders(t *testing.T) {
	raw := "POST /hook HTTP/1.1\r\n" +
		"Host: abc.localhost:8080\r\n" +
		"X-Sig: first\r\n" +
		"content-type: application/json\r\n" +
		"X-Sig: second\r\n" +
		"X-Empty:\r\n" +
		"X-Sig: third\r\n" +
		"Content-Length: 2\r\n" +
		"\r\n{}"
	r := readRequest(t, raw)
	r.RemoteAddr = "127.0.0.1:5555"
	req, full, err := Capture(r, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	want := domain.CapturedRequest{
		Method: "POST", Target: "/hook", Host: "abc.localhost:8080", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:5555", Scheme: "http",
		Headers: []domain.Header{
			{Name: "Content-Length", Value: "2"},
			{Name: "Content-Type", Value: "application/json"},
			{Name: "X-Empty", Value: ""},
			{Name: "X-Sig", Value: "first"},
			{Name: "X-Sig", Value: "second"},
			{Name: "X-Sig", Value: "third"},
		},
		Body: []byte("{}"), BodySize: 2, Complete: true,
	}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("Capture =\n%+v\nwant\n%+v", req, want)
	}
	if string(full) != "{}" {
		t.Errorf("full = %q", full)
	}
}

func TestCaptureChunked(t *testing.T) {
	raw := "POST /c HTTP/1.1\r\nHost: abc.localhost\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"3\r\nabc\r\n" + "5\r\ndefgh\r\n" + "0\r\n\r\n"
	r := readRequest(t, raw)
	req, full, err := Capture(r, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	if string(full) != "abcdefgh" || string(req.Body) != "abcd" || req.BodySize != 8 || req.Complete {
		t.Errorf("full %q body %q size %d complete %v", full, req.Body, req.BodySize, req.Complete)
	}
	wantHeaders := []domain.Header{{Name: "Transfer-Encoding", Value: "chunked"}}
	if !reflect.DeepEqual(req.Headers, wantHeaders) {
		t.Errorf("Headers = %+v, want %+v", req.Headers, wantHeaders)
	}
}

// TestCaptureTrailers: trailer fields after a chunked body are recorded as
// sent, repeats in order, also when the Trailer header did not announce them.
func TestCaptureTrailers(t *testing.T) {
	raw := "POST /t HTTP/1.1\r\nHost: abc.localhost\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
		"3\r\nabc\r\n0\r\nX-Sum: 1\r\nX-Sum: 2\r\nX-Late: caf\xe9\r\n\r\n"
	for _, keepFull := range []bool{true, false} {
		req, _, _, err := capture(readRequest(t, raw), 64, 64, keepFull, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		want := []domain.Header{{Name: "X-Late", Value: "caf\xe9"}, {Name: "X-Sum", Value: "1"}, {Name: "X-Sum", Value: "2"}}
		if !reflect.DeepEqual(req.Trailers, want) || string(req.Body) != "abc" {
			t.Errorf("keepFull=%v: trailers %+v body %q, want %+v", keepFull, req.Trailers, req.Body, want)
		}
	}
}

func TestCaptureBodyLimits(t *testing.T) {
	tests := []struct {
		name         string
		body         string
		cap, max     int64
		wantBody     string
		wantSize     int64
		wantComplete bool
		wantFull     bool
		wantTooLarge bool
	}{
		{name: "empty", body: "", cap: 4, max: 10, wantBody: "", wantSize: 0, wantComplete: true, wantFull: true},
		{name: "under cap", body: "abc", cap: 4, max: 10, wantBody: "abc", wantSize: 3, wantComplete: true, wantFull: true},
		{name: "at cap", body: "abcd", cap: 4, max: 10, wantBody: "abcd", wantSize: 4, wantComplete: true, wantFull: true},
		{name: "over cap", body: "abcde", cap: 4, max: 10, wantBody: "abcd", wantSize: 5, wantFull: true},
		{name: "at max", body: "abcdefghij", cap: 4, max: 10, wantBody: "abcd", wantSize: 10, wantFull: true},
		{name: "over max", body: "abcdefghijklmnop", cap: 4, max: 10, wantBody: "abcd", wantSize: 11, wantTooLarge: true},
		{name: "cap above max", body: "abcdefghijklmnop", cap: 100, max: 10, wantBody: "abcdefghij", wantSize: 11, wantTooLarge: true},
		{name: "zero cap", body: "ab", cap: 0, max: 10, wantBody: "", wantSize: 2, wantFull: true},
	}
	for _, tt := range tests {
		for _, keepFull := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/keepFull=%v", tt.name, keepFull), func(t *testing.T) {
				raw := fmt.Sprintf("PUT /b HTTP/1.1\r\nHost: a.localhost\r\nContent-Length: %d\r\n\r\n%s", len(tt.body), tt.body)
				req, full, _, err := capture(readRequest(t, raw), tt.cap, tt.max, keepFull, nil, "")
				// Only a forwarded body stops at max; a recorded one is
				// read and counted to its end.
				wantTooLarge, wantSize := tt.wantTooLarge && keepFull, tt.wantSize
				if tt.wantTooLarge && !keepFull {
					wantSize = int64(len(tt.body))
				}
				if errors.Is(err, ErrBodyTooLarge) != wantTooLarge {
					t.Fatalf("err = %v, want too large %v", err, wantTooLarge)
				}
				var tooLarge *BodyTooLargeError
				if wantTooLarge && (!errors.As(err, &tooLarge) || tooLarge.Max != tt.max) {
					t.Errorf("err = %#v, want *BodyTooLargeError{Max: %d}", err, tt.max)
				}
				if string(req.Body) != tt.wantBody || req.BodySize != wantSize || req.Complete != tt.wantComplete || req.BodyUnread != wantTooLarge {
					t.Errorf("body %q size %d complete %v unread %v; want %q %d %v %v",
						req.Body, req.BodySize, req.Complete, req.BodyUnread, tt.wantBody, wantSize, tt.wantComplete, wantTooLarge)
				}
				if req.Body == nil {
					t.Error("Body is nil, want empty slice")
				}
				switch {
				case keepFull && tt.wantFull && string(full) != tt.body:
					t.Errorf("full = %q, want %q", full, tt.body)
				case (!keepFull || !tt.wantFull) && full != nil:
					t.Errorf("full = %q, want nil", full)
				}
				if _, err := domain.ReceiveDelivery("d1", "a", domain.AddressInspector, "", req); err != nil {
					t.Errorf("captured request breaks a delivery invariant: %v", err)
				}
			})
		}
	}
}

func TestCaptureBodyCopyIsIndependent(t *testing.T) {
	r := readRequest(t, "POST / HTTP/1.1\r\nHost: a.localhost\r\nContent-Length: 3\r\n\r\nabc")
	req, full, err := Capture(r, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	full[0] = 'X'
	if string(req.Body) != "abc" {
		t.Errorf("Body changed with full: %q", req.Body)
	}
}

func TestCaptureTruncatedBody(t *testing.T) {
	r := readRequest(t, "POST / HTTP/1.1\r\nHost: a.localhost\r\nContent-Length: 10\r\n\r\nabcde")
	req, full, err := Capture(r, 16, 64)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want unexpected EOF", err)
	}
	if string(req.Body) != "abcde" || req.BodySize != 5 || full != nil {
		t.Errorf("body %q size %d full %q", req.Body, req.BodySize, full)
	}
}

// FuzzCapture drives Capture with requests parsed by net/http from raw
// bytes, in both body framings, and checks its invariants.
func FuzzCapture(f *testing.F) {
	f.Add("POST", "/hook?x=1&x=2", "X-A: 1\nX-A: 2\nContent-Type: text/plain", []byte("hello"), false)
	f.Add("GET", "//a//b", "", []byte{}, false)
	f.Add("PUT", "/a%2Fb", "X-Long: v", bytes.Repeat([]byte("z"), 100), true)
	f.Add("OPTIONS", "*", "", []byte{}, false)
	f.Add("PATCH", "http://abc.localhost/p?q", "Connection: close", []byte("0123456789abcdef0"), true)
	f.Add("PURGE", "/%7Euser?q=a+b", "te: trailers\nx-b: ", bytes.Repeat([]byte{0}, 64), false)
	f.Add("DELETE", "/x/", "A: 1", bytes.Repeat([]byte{0xff}, 65), false)
	const capBytes, maxBody = 16, 64
	f.Fuzz(func(t *testing.T, method, target, headerLines string, body []byte, chunked bool) {
		var raw bytes.Buffer
		fmt.Fprintf(&raw, "%s %s HTTP/1.1\r\nHost: abc.localhost\r\n", method, target)
		for line := range strings.SplitSeq(headerLines, "\n") {
			if line != "" {
				raw.WriteString(line + "\r\n")
			}
		}
		if chunked {
			raw.WriteString("Transfer-Encoding: chunked\r\n\r\n")
			for rest := body; len(rest) > 0; {
				n := min(len(rest), 7)
				fmt.Fprintf(&raw, "%x\r\n%s\r\n", n, rest[:n])
				rest = rest[n:]
			}
			raw.WriteString("0\r\n\r\n")
		} else {
			fmt.Fprintf(&raw, "Content-Length: %d\r\n\r\n%s", len(body), body)
		}
		r, err := http.ReadRequest(bufio.NewReader(&raw))
		if err != nil {
			return // net/http refuses it before any handler runs
		}
		if !chunked && r.ContentLength != int64(len(body)) {
			return // the fuzzed headers changed the framing
		}
		sentBody := body

		req, full, err := Capture(r, capBytes, maxBody)
		if errors.Is(err, ErrUnsupportedTarget) {
			if strings.HasPrefix(target, "/") || target == "*" || strings.Contains(target, "://") {
				t.Fatalf("target %q refused: %v", target, err)
			}
			return
		}
		if len(req.Body) > capBytes {
			t.Fatalf("len(Body) = %d > cap %d", len(req.Body), capBytes)
		}
		if req.Complete != (int64(len(req.Body)) == req.BodySize) {
			t.Fatalf("Complete = %v with len(Body) %d and BodySize %d", req.Complete, len(req.Body), req.BodySize)
		}
		if req.BodySize > maxBody+1 {
			t.Fatalf("BodySize %d read past max body %d", req.BodySize, maxBody)
		}
		if !bytes.HasPrefix(sentBody, req.Body) {
			t.Fatalf("Body %q is not a prefix of the sent body %q", req.Body, sentBody)
		}
		switch {
		case len(sentBody) > maxBody:
			if !errors.Is(err, ErrBodyTooLarge) || full != nil || req.BodySize != maxBody+1 {
				t.Fatalf("body of %d bytes: err %v, full %d bytes, size %d", len(sentBody), err, len(full), req.BodySize)
			}
		case err != nil:
			t.Fatalf("Capture: %v", err)
		default:
			if !bytes.Equal(full, sentBody) || req.BodySize != int64(len(sentBody)) {
				t.Fatalf("full %q size %d, sent %q", full, req.BodySize, sentBody)
			}
		}
		switch {
		case strings.HasPrefix(target, "/") || target == "*":
			if req.Target != target {
				t.Fatalf("Target = %q, sent %q", req.Target, target)
			}
		case !strings.HasPrefix(req.Target, "/") || !strings.HasSuffix(target, strings.TrimPrefix(req.Target, "/")):
			t.Fatalf("Target = %q is not the path and query of %q", req.Target, target)
		}
		if req.Method != method {
			t.Fatalf("Method = %q, sent %q", req.Method, method)
		}
		values := 0
		for _, vs := range r.Header {
			values += len(vs)
		}
		if chunked {
			values++ // Transfer-Encoding, which net/http keeps apart
		}
		if len(req.Headers) != values {
			t.Fatalf("%d headers captured, request has %d values", len(req.Headers), values)
		}
	})
}

func TestLimitHeaders(t *testing.T) {
	h := func(name, value string) domain.Header { return domain.Header{Name: name, Value: value} }
	all := []domain.Header{h("A", "1234"), h("B", "12"), h("B", "34"), h("C", "123456")}
	tests := []struct {
		name        string
		maxCount    int
		maxBytes    int64
		wantKept    int
		wantDropped int
	}{
		{"under both limits", 10, 100, 4, 0},
		{"exactly at both limits", 4, 20, 4, 0},
		{"count", 2, 100, 2, 2},
		{"bytes", 10, 10, 2, 2},
		{"first header alone too large", 10, 4, 0, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, dropped := limitHeaders(all, tt.maxCount, tt.maxBytes)
			if len(kept) != tt.wantKept || dropped != tt.wantDropped {
				t.Fatalf("kept %d, dropped %d; want %d, %d", len(kept), dropped, tt.wantKept, tt.wantDropped)
			}
			for i := range kept {
				if kept[i] != all[i] {
					t.Fatalf("kept[%d] = %v, want the leading headers in order", i, kept[i])
				}
			}
			before := append([]domain.Header{}, all...)
			_ = append(kept, h("X", "y"))
			if !reflect.DeepEqual(all, before) {
				t.Fatalf("appending to what was kept changed the received headers: %v", all)
			}
		})
	}
}

// TestCaptureProxiedBudget: a proxied body takes its buffer's memory from
// the budget as it grows; one that does not fit is refused with
// ErrBodyBudget and recorded as unread, and what was reserved is returned.
func TestCaptureProxiedBudget(t *testing.T) {
	body := strings.Repeat("x", 200<<10)
	declared := "POST /big HTTP/1.1\r\nHost: abc.localhost\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	chunked := "POST /big HTTP/1.1\r\nHost: abc.localhost\r\nTransfer-Encoding: chunked\r\n\r\n" +
		fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	for _, tt := range []struct {
		name, raw string
		budget    int64
		fits      bool
	}{
		{"declared, room for the body", declared, 1 << 20, true},
		{"declared, room for part of it", declared, 100 << 10, false},
		{"declared, no room at all", declared, 1 << 10, false},
		{"chunked, room for the body", chunked, 1 << 20, true},
		{"chunked, room for part of it", chunked, 100 << 10, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBodyBudget(tt.budget, 0)
			b.perClient, b.perAccount = tt.budget, tt.budget
			req, full, reserved, err := captureProxied(readRequest(t, tt.raw), 16, 10<<20, b, "acc1")
			if got := b.InUse(); got != reserved || reserved > tt.budget || b.byAccount["acc1"] != reserved {
				t.Errorf("in use %d (%d for the account), reserved %d, budget %d", got, b.byAccount["acc1"], reserved, tt.budget)
			}
			releaseBody(b, readRequest(t, tt.raw), "acc1", reserved)
			if b.InUse() != 0 || len(b.byClient)+len(b.byNetwork)+len(b.byAccount) != 0 {
				t.Errorf("after release, %d in use, held by %v %v %v", b.InUse(), b.byClient, b.byNetwork, b.byAccount)
			}
			if tt.fits {
				if err != nil || string(full) != body {
					t.Fatalf("err %v, %d bytes", err, len(full))
				}
				return
			}
			if !errors.Is(err, ErrBodyBudget) || full != nil || !req.BodyUnread || req.Complete {
				t.Errorf("err %v, full %d bytes, unread %v, complete %v: want ErrBodyBudget, nothing, unread, incomplete", err, len(full), req.BodyUnread, req.Complete)
			}
			// Stored is what was read before the budget ran out (nothing,
			// when a declared length did not fit), up to the cap.
			if !strings.HasPrefix(body, string(req.Body)) || len(req.Body) > 16 {
				t.Errorf("stored %q", req.Body)
			}
		})
	}
}

// TestBodyBudgetShares: one client holds at most a quarter of the budget,
// so a client that declares large bodies and trickles them cannot take the
// budget from everyone else; past three quarters, only a client and
// network that hold at most a sixteenth (here one body of 10 bytes and
// its extra byte) are admitted, up to the whole budget.
func TestBodyBudgetShares(t *testing.T) {
	b := newBodyBudget(100, 10) // a quarter: 25; a network: 50; open: 75; small: 11
	for i, tt := range []struct {
		client  string
		n       int64
		release bool
		want    bool
	}{
		{client: "198.51.100.1", n: 11, want: true},
		{client: "198.51.100.1", n: 11, want: true},
		{client: "198.51.100.1", n: 11},            // past its quarter
		{client: "192.0.2.2", n: 11, want: true},   // each of its own network
		{client: "192.0.2.2", n: 11, want: true},   //
		{client: "198.18.0.3", n: 11, want: true},  //
		{client: "198.18.0.3", n: 11, want: true},  // 66 in use
		{client: "192.0.2.2", n: 11},               // 77: into the reserve, holding 22
		{client: "203.0.113.4", n: 11, want: true}, // 77: holding nothing
		{client: "203.0.113.4", n: 1},              // holding a small share
		{client: "203.0.113.5", n: 11},             // its network holds a small share
		{client: "198.18.5.9", n: 11, want: true},  // 88
		{client: "233.252.0.1", n: 11, want: true}, // 99
		{client: "233.252.1.1", n: 2},              // past the total
		{client: "198.51.100.1", n: 22, release: true},
		{client: "233.252.1.1", n: 2, want: true}, // a release made room
	} {
		if tt.release {
			b.Release(tt.client, tt.n)
			continue
		}
		if got := b.Reserve(tt.client, tt.n); got != tt.want {
			t.Errorf("step %d: %s reserving %d with %d in use: %v, want %v", i, tt.client, tt.n, b.InUse(), got, tt.want)
		}
		if b.InUse() > b.Total() {
			t.Fatalf("step %d: %d in use of %d", i, b.InUse(), b.Total())
		}
	}
}

// captureHeadersBefore is captureHeaders as it was written first (names
// sorted with sort.Strings, each looked up again): the reference the
// faster one must equal.
func captureHeadersBefore(r *http.Request) []domain.Header {
	names := make([]string, 0, len(r.Header)+1)
	count := 0
	for name, values := range r.Header {
		names = append(names, name)
		count += len(values)
	}
	_, hasTE := r.Header["Transfer-Encoding"]
	if len(r.TransferEncoding) > 0 && !hasTE {
		names = append(names, "Transfer-Encoding")
		count += len(r.TransferEncoding)
	}
	sort.Strings(names)
	out := make([]domain.Header, 0, count)
	for _, name := range names {
		values := r.Header[name]
		if name == "Transfer-Encoding" && !hasTE {
			values = r.TransferEncoding
		}
		for _, v := range values {
			out = append(out, domain.Header{Name: name, Value: v})
		}
	}
	return out
}

func checkCaptureHeaders(t *testing.T, r *http.Request) {
	t.Helper()
	got, want := captureHeaders(r), captureHeadersBefore(r)
	if !reflect.DeepEqual(got, want) || got == nil {
		t.Fatalf("captureHeaders = %q, want %q", got, want)
	}
}

func TestCaptureHeadersAsBefore(t *testing.T) {
	many := http.Header{}
	for i := range 100 { // past the fields sorted on the stack
		many.Add(fmt.Sprintf("X-H-%03d", 99-i), strconv.Itoa(i))
		many.Add(fmt.Sprintf("X-H-%03d", 99-i), "again")
	}
	tests := []struct {
		name string
		r    *http.Request
	}{
		{"none", &http.Request{Header: http.Header{}}},
		{"nil header", &http.Request{}},
		{"repeats", &http.Request{Header: http.Header{"B": {"2", "1"}, "A": {"x"}, "a": {"lower"}}}},
		{"empty value", &http.Request{Header: http.Header{"X-Empty": {""}, "X-No-Values": {}}}},
		{"chunked", &http.Request{Header: http.Header{"Content-Type": {"text/plain"}}, TransferEncoding: []string{"chunked"}}},
		{"chunked and a header of it", &http.Request{Header: http.Header{"Transfer-Encoding": {"gzip"}}, TransferEncoding: []string{"chunked"}}},
		{"many", &http.Request{Header: many}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCaptureHeaders(t, tt.r) })
	}
}

func FuzzCaptureHeaders(f *testing.F) {
	f.Add("X-A: 1\nX-A: 2\nContent-Type: text/plain\nx-b: 3", true)
	f.Add("Transfer-Encoding: gzip\nA: b", false)
	f.Add("", true)
	f.Fuzz(func(t *testing.T, lines string, chunked bool) {
		var raw strings.Builder
		raw.WriteString("POST /hook HTTP/1.1\r\nHost: abc.localhost\r\n")
		for line := range strings.SplitSeq(lines, "\n") {
			if line != "" {
				raw.WriteString(line + "\r\n")
			}
		}
		if chunked {
			raw.WriteString("Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		} else {
			raw.WriteString("Content-Length: 0\r\n\r\n")
		}
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw.String())))
		if err != nil {
			return
		}
		checkCaptureHeaders(t, r)
	})
}
