package bundle

import (
	"bytes"
	"encoding/base64"
	"testing"
	"time"

	"github.com/relayhq/relay/deliveryjson"
)

// TestWriterReadBack: what the writer writes the reader reads back to the
// exact bytes: the target, repeated headers, a value that is not UTF-8,
// and a binary body.
func TestWriterReadBack(t *testing.T) {
	raw := "v\xff"
	rawB64 := base64.StdEncoding.EncodeToString([]byte(raw))
	body := "\x00\x01<b>"
	d := deliveryjson.Export{ID: "d1", Method: "POST", Path: "/hook?a=1", ReceivedAt: "2026-01-02T03:04:05Z", HTTPVersion: "HTTP/1.1",
		Headers:    []deliveryjson.Header{{Name: "X-Sig", Value: "one"}, {Name: "X-Sig", Value: "two"}, {Name: "X-Raw", Value: "v\uFFFD", ValueBase64: &rawB64}},
		BodyBase64: base64.StdEncoding.EncodeToString([]byte(body)), BodySize: len(body), Complete: true}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.Begin(deliveryjson.Meta{Address: "abc", URL: "http://abc.localhost:8080/", ExportedAt: time.Unix(0, 0), Version: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Entry(d); err != nil {
		t.Fatal(err)
	}
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&buf)
	if err != nil {
		t.Fatalf("read the header of %q: %v", buf.String(), err)
	}
	got, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"X-Sig", "one"}, {"X-Sig", "two"}, {"X-Raw", raw}}
	if got.ID != "d1" || got.Method != "POST" || got.Target != "/hook?a=1" || string(got.Body) != body || !got.Complete || len(got.Headers) != len(want) {
		t.Fatalf("read back %+v", got)
	}
	for i, h := range want {
		if got.Headers[i] != h {
			t.Errorf("header %d = %q, want %q", i, got.Headers[i], h)
		}
	}
}
