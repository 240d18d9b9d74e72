package domain

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
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

// TestHeaderJSONMatchesEncodingJSON: Header writes valid UTF-8 by hand;
// its bytes must be exactly json.Marshal's, HTML and control characters,
// U+2028 and U+2029 included, and text that is not UTF-8 keeps the
// encoding/json path (with its base64 sibling).
func TestHeaderJSONMatchesEncodingJSON(t *testing.T) {
	all := make([]byte, 0, 128)
	for c := range 128 {
		all = append(all, byte(c))
	}
	for _, s := range []string{"", "plain", "a<b>&c", "\"quoted\" \\ back", "\x00\x01\x08\x0c\n\r\t\x1f\x7f",
		"\u2028\u2029", "émoji 🙂 中文", "caf\xe9", "\xff", string(all), "t=1492774577,v1=5257a869e7ecebeda32aff"} {
		checkHeaderJSON(t, Header{Name: "X-Test", Value: s})
		checkHeaderJSON(t, Header{Name: s, Value: "v"})
	}
}

// FuzzHeaderJSONMatchesEncodingJSON is the same with any name and value.
func FuzzHeaderJSONMatchesEncodingJSON(f *testing.F) {
	f.Add("X-A", "a<b>\u2028\x00")
	f.Add("X-B", "caf\xe9")
	f.Fuzz(func(t *testing.T, name, value string) {
		checkHeaderJSON(t, Header{Name: name, Value: value})
	})
}

func checkHeaderJSON(t *testing.T, h Header) {
	t.Helper()
	want, err := json.Marshal(struct {
		headerJSON
		ValueB64 []byte `json:"value_b64,omitempty"`
	}{headerJSON(h), func() []byte {
		if utf8.ValidString(h.Value) {
			return nil
		}
		return []byte(h.Value)
	}()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.MarshalJSON()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("header %q: %q\n got %s (%v)\nwant %s", h.Name, h.Value, got, err, want)
	}
}
