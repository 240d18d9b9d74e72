package domain_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestCanonicalHeaders: the canonical header block is the documented one:
// names in lower case, sorted by name with one name's values in order,
// and without the fields an agent legitimately adds or rewrites.
func TestCanonicalHeaders(t *testing.T) {
	for _, tt := range []struct {
		name    string
		headers []domain.Header
		want    string
	}{
		{"empty", nil, ""},
		{"one", []domain.Header{{Name: "Content-Type", Value: "application/json"}}, "content-type: application/json\n"},
		{"sorted by name, repeats in order", []domain.Header{
			{Name: "X-B", Value: "2"}, {Name: "x-a", Value: "z"}, {Name: "X-A", Value: "y"}, {Name: "Accept", Value: "*/*"},
		}, "accept: */*\nx-a: z\nx-a: y\nx-b: 2\n"},
		{"value bytes kept as they are", []domain.Header{{Name: "X-V", Value: " a,\tb "}}, "x-v:  a,\tb \n"},
		{"empty value kept", []domain.Header{{Name: "X-Empty", Value: ""}}, "x-empty: \n"},
		{"excluded fields", []domain.Header{
			{Name: "Host", Value: "h"}, {Name: "content-length", Value: "3"}, {Name: "Connection", Value: "keep-alive, X-Hop"},
			{Name: "X-Hop", Value: "1"}, {Name: "Keep-Alive", Value: "timeout=5"}, {Name: "Transfer-Encoding", Value: "chunked"},
			{Name: "TE", Value: "trailers"}, {Name: "Upgrade", Value: "h2c"}, {Name: "Proxy-Authorization", Value: "x"},
			{Name: "Forwarded", Value: "for=1.2.3.4"}, {Name: "X-Forwarded-For", Value: "1.2.3.4"},
			{Name: "X-Forwarded-Host", Value: "h"}, {Name: "X-Forwarded-Proto", Value: "https"},
			{Name: "User-Agent", Value: ""}, {Name: "Stripe-Signature", Value: "t=1"},
		}, "stripe-signature: t=1\n"},
		{"a user agent with a value is kept", []domain.Header{{Name: "User-Agent", Value: "Stripe/1.0"}}, "user-agent: Stripe/1.0\n"},
		{"forwarded-like names are not excluded", []domain.Header{{Name: "X-Forwarded-Port", Value: "443"}}, "x-forwarded-port: 443\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(domain.CanonicalHeaders(tt.headers)); got != tt.want {
				t.Errorf("CanonicalHeaders = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDigestRequest: the digests are SHA-256 of the canonical forms, so
// anyone can recompute them from the documentation.
func TestDigestRequest(t *testing.T) {
	headers := []domain.Header{{Name: "X-B", Value: "2"}, {Name: "Content-Type", Value: "text/plain"}, {Name: "Host", Value: "relay"}}
	got := domain.DigestRequest("POST", "/hook?a=1&b", headers, []byte("hello"))
	want := domain.FidelityDigests{
		RequestLine: sha("POST /hook?a=1&b"),
		Headers:     sha("content-type: text/plain\nx-b: 2\n"),
		Body:        sha("hello"),
	}
	if got != want {
		t.Fatalf("DigestRequest = %+v, want %+v", got, want)
	}
	if empty := domain.DigestRequest("GET", "/", nil, nil); empty.Body != sha("") || empty.Headers != sha("") {
		t.Errorf("empty request: %+v", empty)
	}
}

// TestFidelityDifferences: each altered part, and only it, is named, in
// request order; what an agent legitimately changes is no difference.
func TestFidelityDifferences(t *testing.T) {
	method, target, body := "POST", "/hook", []byte(`{"a":1}`)
	headers := []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Sig", Value: "v1"}, {Name: "X-Sig", Value: "v2"}}
	sent := domain.DigestRequest(method, target, headers, body)
	with := func(hs ...domain.Header) []domain.Header { return append(append([]domain.Header{}, headers...), hs...) }
	for _, tt := range []struct {
		name    string
		method  string
		target  string
		headers []domain.Header
		body    []byte
		want    []string
	}{
		{"identical", method, target, headers, body, nil},
		{"name case and order between names", method, target, []domain.Header{
			{Name: "x-sig", Value: "v1"}, {Name: "CONTENT-TYPE", Value: "application/json"}, {Name: "X-SIG", Value: "v2"}}, body, nil},
		{"what an agent adds", method, target, with(
			domain.Header{Name: "Host", Value: "localhost:3000"}, domain.Header{Name: "Content-Length", Value: "7"},
			domain.Header{Name: "X-Forwarded-For", Value: "203.0.113.7"}, domain.Header{Name: "Forwarded", Value: "for=203.0.113.7"},
			domain.Header{Name: "User-Agent", Value: ""}), body, nil},
		{"method", "PUT", target, headers, body, []string{domain.PartRequestLine}},
		{"target", method, "/hook?x", headers, body, []string{domain.PartRequestLine}},
		{"a header value", method, target, []domain.Header{headers[0], {Name: "X-Sig", Value: "v1"}, {Name: "X-Sig", Value: "v3"}}, body, []string{domain.PartHeaders}},
		{"order of one name's values", method, target, []domain.Header{headers[0], headers[2], headers[1]}, body, []string{domain.PartHeaders}},
		{"a header added", method, target, with(domain.Header{Name: "X-Debug", Value: "1"}), body, []string{domain.PartHeaders}},
		{"a header dropped", method, target, headers[:2], body, []string{domain.PartHeaders}},
		{"one body byte", method, target, headers, []byte(`{"a":2}`), []string{domain.PartBody}},
		{"every part", "GET", "/", nil, nil, []string{domain.PartRequestLine, domain.PartHeaders, domain.PartBody}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := domain.Fidelity{Agent: domain.DigestRequest(tt.method, tt.target, tt.headers, tt.body), Relay: sent}
			if got := f.Differences(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Differences = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFidelityDigestsCheck: a report's digests must be SHA-256 in
// lower-case hex; the error names the part at fault.
func TestFidelityDigestsCheck(t *testing.T) {
	good := domain.DigestRequest("POST", "/", nil, nil)
	if err := good.Check("receipt"); err != nil {
		t.Fatalf("valid digests refused: %v", err)
	}
	for _, tt := range []struct {
		name  string
		edit  func(*domain.FidelityDigests)
		field string
	}{
		{"empty request line", func(d *domain.FidelityDigests) { d.RequestLine = "" }, "receipt.requestLine"},
		{"upper-case headers", func(d *domain.FidelityDigests) { d.Headers = strings.ToUpper(d.Headers) }, "receipt.headers"},
		{"short body", func(d *domain.FidelityDigests) { d.Body = d.Body[:63] }, "receipt.body"},
		{"long body", func(d *domain.FidelityDigests) { d.Body += "0" }, "receipt.body"},
		{"not hex", func(d *domain.FidelityDigests) { d.Body = strings.Repeat("g", 64) }, "receipt.body"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := good
			tt.edit(&d)
			var invalid *domain.InvalidInputError
			if err := d.Check("receipt"); !errors.As(err, &invalid) || invalid.Field != tt.field {
				t.Fatalf("Check = %v, want an invalid %s", err, tt.field)
			}
		})
	}
}

// BenchmarkDigestRequest: what a receipt costs each side per forward, for
// a typical webhook and a large body.
func BenchmarkDigestRequest(b *testing.B) {
	headers := []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Stripe-Signature", Value: "t=1,v1=" + strings.Repeat("a", 64)},
		{Name: "User-Agent", Value: "Stripe/1.0"}, {Name: "Host", Value: "x"}, {Name: "Content-Length", Value: "1"}, {Name: "Accept", Value: "*/*"}}
	for _, size := range []int{1 << 10, 1 << 20} {
		body := make([]byte, size)
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				domain.DigestRequest("POST", "/webhooks/stripe?x=1", headers, body)
			}
		})
	}
}

// referenceCanonicalHeaders is the canonical header block as the
// documentation states it, written plainly: DigestRequest must digest
// exactly these bytes, however it builds them.
func referenceCanonicalHeaders(headers []domain.Header) string {
	var lines []domain.Header
	for _, h := range domain.FidelityHeaders(headers) {
		lines = append(lines, domain.Header{Name: strings.ToLower(h.Name), Value: h.Value})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].Name < lines[j].Name })
	var b strings.Builder
	for _, h := range lines {
		b.WriteString(h.Name + ": " + h.Value + "\n")
	}
	return b.String()
}

// TestDigestRequestMatchesReference: the digests are those of the plainly
// built canonical forms for awkward inputs too: names in mixed and
// non-ASCII case, fields named by Connection, more fields than a typical
// request, a block past the stack buffer.
func TestDigestRequestMatchesReference(t *testing.T) {
	many := make([]domain.Header, 0, 80)
	for i := range 80 {
		many = append(many, domain.Header{Name: "X-F" + strconv.Itoa(79-i), Value: strings.Repeat("v", i)})
	}
	for _, tt := range []struct {
		name    string
		headers []domain.Header
	}{
		{"none", nil},
		{"mixed case, repeats", []domain.Header{{Name: "x-b", Value: "1"}, {Name: "X-A", Value: "2"}, {Name: "X-B", Value: "3"}, {Name: "x-a", Value: "4"}}},
		{"connection names", []domain.Header{{Name: "connection", Value: " x-hop ,, Keep-Alive,"}, {Name: "X-HOP", Value: "1"}, {Name: "X-Kept", Value: "2"}, {Name: "keep-alive", Value: "5"}}},
		{"non-ASCII names", []domain.Header{{Name: "Ä-B", Value: "1"}, {Name: "ä-a", Value: "2"}, {Name: "\xff", Value: "3"}, {Name: "A", Value: "4"}, {Name: "É", Value: "5"}}},
		{"invalid names kept as they are", []domain.Header{{Name: "x y", Value: "1"}, {Name: "HOST", Value: "h"}, {Name: "user-agent", Value: ""}, {Name: "User-Agent", Value: "ua"}}},
		{"prefixes sort first", []domain.Header{{Name: "X-Ab", Value: "1"}, {Name: "x-a", Value: "2"}, {Name: "X-A-", Value: "3"}}},
		{"many fields, a long block", many},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.name)
			got := domain.DigestRequest("POST", "/p?q", tt.headers, body)
			want := domain.FidelityDigests{RequestLine: sha("POST /p?q"), Headers: sha(referenceCanonicalHeaders(tt.headers)), Body: sha(tt.name)}
			if got != want {
				t.Errorf("DigestRequest = %+v, want %+v", got, want)
			}
			if c := string(domain.CanonicalHeaders(tt.headers)); c != referenceCanonicalHeaders(tt.headers) {
				t.Errorf("CanonicalHeaders = %q, want %q", c, referenceCanonicalHeaders(tt.headers))
			}
		})
	}
}

// FuzzCanonicalHeaders: any header list gives the documented block.
func FuzzCanonicalHeaders(f *testing.F) {
	f.Add("X-A", "1", "x-a", "2", "connection", "x-a")
	f.Add("Ä", "1", "a", "2", "Host", "h")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2, n3, v3 string) {
		headers := []domain.Header{{Name: n1, Value: v1}, {Name: n2, Value: v2}, {Name: n3, Value: v3}}
		if got, want := string(domain.CanonicalHeaders(headers)), referenceCanonicalHeaders(headers); got != want {
			t.Fatalf("CanonicalHeaders(%q) = %q, want %q", headers, got, want)
		}
	})
}

// TestDigestRequestAllocates: a typical request's digests cost the one
// string they share; the canonical forms stay in DigestRequest's buffer.
func TestDigestRequestAllocates(t *testing.T) {
	headers := []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Connection", Value: "X-Hop"},
		{Name: "X-Hop", Value: "1"}, {Name: "Stripe-Signature", Value: "t=1,v1=abc"}, {Name: "User-Agent", Value: "Stripe/1.0"}}
	body := []byte(strings.Repeat("x", 1024))
	if n := testing.AllocsPerRun(100, func() { _ = domain.DigestRequest("POST", "/hook", headers, body) }); n > 1 {
		t.Errorf("DigestRequest allocates %v times, want 1", n)
	}
}
