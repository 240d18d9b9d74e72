package domain

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestMarshalMatchesEncodingJSON: the codec's marshal skips encoding/json's
// second pass over MarshalJSON's output; the stored bytes must stay exactly
// what json.Marshal wrote, for every kind of text a sender controls.
func TestMarshalMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "/plain", "/a?b=<c>&d=\"e\"", "\x00\x1f\u2028\u2029\\", "/bad\xff\xfe", "émoji 🙂", "\x7f"} {
		checkMarshal(t, s, []byte(s))
	}
}

// FuzzMarshalMatchesEncodingJSON is the same with any target, header value
// and body.
func FuzzMarshalMatchesEncodingJSON(f *testing.F) {
	f.Add("/a?b=<c>", "v1=\xfe", []byte("{}"))
	f.Fuzz(func(t *testing.T, target, value string, body []byte) {
		checkMarshal(t, target, body, Header{Name: "X-" + value, Value: value})
	})
}

func checkMarshal(t *testing.T, text string, body []byte, extra ...Header) {
	t.Helper()
	events := []Event{
		DeliveryReceived{DeliveryID: "d", Address: text, Method: "POST", Target: text, Host: text, Body: body,
			Headers: append([]Header{{Name: "A", Value: text}}, extra...), Trailers: []Header{{Name: "T", Value: text}}},
		ForwardResponded{DeliveryID: "d", AttemptID: "a", Status: 200, Headers: append([]Header{{Name: "B", Value: text}}, extra...), Body: body},
		ForwardFailed{DeliveryID: "d", AttemptID: "a", Error: text},
	}
	for _, e := range events {
		want, werr := json.Marshal(e)
		got, gerr := marshal(e)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%T with %q:\n got %s (%v)\nwant %s (%v)", e, text, got, gerr, want, werr)
		}
	}
}
