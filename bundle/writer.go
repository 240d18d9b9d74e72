package bundle

import (
	"encoding/json"
	"io"
	"time"

	"github.com/relayhq/relay/deliveryjson"
)

// Writer writes a replay bundle: the header line, then one line
// per delivery.
type Writer struct {
	w   io.Writer
	enc *json.Encoder
}

func (b *Writer) Begin(m deliveryjson.Meta) error {
	b.enc = json.NewEncoder(b.w)
	b.enc.SetEscapeHTML(false)
	return b.enc.Encode(Header{RelayBundle: Version, Address: m.Address, URL: m.URL,
		ExportedAt: m.ExportedAt.Format(time.RFC3339Nano), Creator: "relay " + m.Version})
}

func (b *Writer) Entry(d deliveryjson.Export) error {
	body := d.BodyBase64
	size := int64(d.BodySize)
	complete := d.Complete
	l := Line{ID: d.ID, ReceivedAt: d.ReceivedAt, Method: d.Method, Path: d.Path, PathBase64: d.PathBase64,
		HTTPVersion: d.HTTPVersion, Headers: make([]Field, 0, len(d.Headers)), DroppedHeaders: d.DroppedHeaders,
		BodyBase64: &body, BodySize: &size, Complete: &complete, ResponseStatus: d.ResponseStatus}
	for _, h := range d.Headers {
		l.Headers = append(l.Headers, textOrBase64(h.Name, deliveryjson.ExactText(h.Value, h.ValueBase64)))
	}
	return b.enc.Encode(l)
}

func (b *Writer) End() error { return nil }

// NewWriter is a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }
