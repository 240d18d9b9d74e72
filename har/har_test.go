package har

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/relayhq/relay/deliveryjson"
)

// TestHARQueryString: parameters in order with repeats, decoded as a form
// would be; what does not decode to text is kept as sent.
func TestHARQueryString(t *testing.T) {
	tests := []struct {
		target string
		want   []harNameValue
	}{
		{"/x", []harNameValue{}},
		{"/x?", []harNameValue{}},
		{"/x?a=1&a=2&b", []harNameValue{{"a", "1"}, {"a", "2"}, {"b", ""}}},
		{"/x?q=a+b%20c&&e=", []harNameValue{{"q", "a b c"}, {"e", ""}}},
		{"/x?s=%E2%9C%93&bad=%zz&raw=%FF", []harNameValue{{"s", "✓"}, {"bad", "%zz"}, {"raw", "%FF"}}},
		{"/x?bytes=\xff", []harNameValue{{"bytes", "%FF"}}},
		{"/x?k=v=w", []harNameValue{{"k", "v=w"}}},
	}
	for _, tt := range tests {
		if got := queryString(tt.target); !slices.Equal(got, tt.want) {
			t.Errorf("queryString(%q) = %q, want %q", tt.target, got, tt.want)
		}
	}
}

// TestHARResponse: the recorded answer, status 0 for none yet, and a
// comment wherever the entry does not hold what the sender got.
func TestHARResponse(t *testing.T) {
	status := func(n int) *int { return &n }
	bytesOf := func(s string) *string { e := b64(s); return &e }
	tests := []struct {
		name     string
		d        deliveryjson.Export
		status   int
		text     string
		encoding string
		bodySize int
		comment  string // in the response's or its content's comment; "" for none
	}{
		{name: "no answer yet", d: deliveryjson.Export{}, status: 0, bodySize: -1, comment: "no answer recorded yet"},
		{name: "the relay's 204", d: deliveryjson.Export{ResponseStatus: status(204)}, status: 204, bodySize: 0},
		{name: "an answer not captured", d: deliveryjson.Export{ResponseStatus: status(503)}, status: 503, bodySize: -1, comment: "body not recorded"},
		{name: "a text answer", d: deliveryjson.Export{ResponseStatus: status(200), ResponseBodyBase64: bytesOf("ok")}, status: 200, text: "ok", bodySize: 2},
		{name: "a binary answer", d: deliveryjson.Export{ResponseStatus: status(200), ResponseBodyBase64: bytesOf("\xff\x00")}, status: 200, text: "/wA=", encoding: "base64", bodySize: 2},
		{name: "after a retry", d: deliveryjson.Export{ResponseStatus: status(200), ResponseBodyBase64: bytesOf(""),
			Attempts: []deliveryjson.Attempt{{Status: status(502)}, {Status: status(200), Retry: true}}}, status: 200, bodySize: 0, comment: "latest attempt (a retry)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := harResponseOf(tt.d)
			if r.Status != tt.status || r.Content.Text != tt.text || r.Content.Encoding != tt.encoding || r.BodySize != tt.bodySize {
				t.Errorf("got status %d, text %q (%q), bodySize %d; want %d, %q (%q), %d", r.Status, r.Content.Text, r.Content.Encoding, r.BodySize,
					tt.status, tt.text, tt.encoding, tt.bodySize)
			}
			comments := r.Comment + "|" + r.Content.Comment
			if tt.comment == "" && comments != "|" || !strings.Contains(comments, tt.comment) {
				t.Errorf("comments %q, want %q", comments, tt.comment)
			}
		})
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
