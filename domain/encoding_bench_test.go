package domain_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/binwire"
)

// benchDelivery is a typical proxied webhook as the log records it: a 1 KiB
// JSON body and the six headers of a signed webhook.
func benchDelivery() domain.DeliveryReceived {
	body := []byte(`{"type":"payment_intent.succeeded","data":{"pad":"`)
	body = append(body, bytes.Repeat([]byte("x"), 1024-len(body)-3)...)
	body = append(body, `"}}`...)
	return domain.DeliveryReceived{
		DeliveryID: "0f6c1e0c-8b4e-4a43-9a53-6f4c2ad3e8a1", Address: "ep-1", AddressKind: domain.AddressEndpoint,
		AccountID: "acc-1", Method: "POST", Target: "/webhooks/stripe", Host: "ep-1.relay.example", Proto: "HTTP/1.1",
		RemoteAddr: "192.0.2.10:40000", Body: body, BodySize: int64(len(body)), Complete: true,
		Headers: []domain.Header{
			{Name: "Accept", Value: "*/*"}, {Name: "Content-Type", Value: "application/json"},
			{Name: "User-Agent", Value: "Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
			{Name: "Stripe-Signature", Value: "t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"},
			{Name: "X-Request-Id", Value: "0f6c1e0c-8b4e-4a43-9a53-6f4c2ad3e8a1"}, {Name: "Accept-Encoding", Value: "gzip"},
		},
	}
}

// BenchmarkEncodeDelivery measures what the log's event encoding costs per
// delivery: the JSON envelope payload with a base64 body, as stored, beside
// a length-prefixed binary encoding of the same fields (what the node bus
// and the agents' frames use), for scale. bytes/op is the encoded size.
//
//	go test -run '^$' -bench EncodeDelivery -benchmem ./domain
func BenchmarkEncodeDelivery(b *testing.B) {
	codec := domain.NewCodec()
	d := benchDelivery()
	at := time.Unix(1764000000, 0)
	b.Run("json", func(b *testing.B) {
		var n int
		for b.Loop() {
			e, err := codec.Encode("0f6c1e0c-8b4e-4a43-9a53-6f4c2ad3e8a1", d, at, domain.Trace{})
			if err != nil {
				b.Fatal(err)
			}
			n = len(e.Data)
		}
		b.ReportMetric(float64(n), "bytes/event")
	})
	b.Run("responded", func(b *testing.B) {
		fr := domain.ForwardResponded{DeliveryID: d.DeliveryID, AttemptID: "019ac4f1-7d3e-7c1a-9e0b-3f4a5b6c7d8e", AgentID: "conn-1/ep-1",
			Status: 200, Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Date", Value: "Sat, 28 Nov 2026 21:00:00 GMT"},
				{Name: "Content-Length", Value: "16"}}, BodySize: 16, DurationMs: 3,
			Fidelity: &domain.Fidelity{Agent: domain.DigestRequest(d.Method, d.Target, d.Headers, d.Body), Relay: domain.DigestRequest(d.Method, d.Target, d.Headers, d.Body)}}
		var n int
		for b.Loop() {
			e, err := codec.Encode("0f6c1e0c-8b4e-4a43-9a53-6f4c2ad3e8a2", fr, at, domain.Trace{})
			if err != nil {
				b.Fatal(err)
			}
			n = len(e.Data)
		}
		b.ReportMetric(float64(n), "bytes/event")
	})
	b.Run("json-decode", func(b *testing.B) {
		e, _ := codec.Encode("0f6c1e0c-8b4e-4a43-9a53-6f4c2ad3e8a1", d, at, domain.Trace{})
		for b.Loop() {
			var back domain.DeliveryReceived
			if err := json.Unmarshal(e.Data, &back); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("binary", func(b *testing.B) {
		var n int
		for b.Loop() {
			w := binwire.Writer{B: make([]byte, 0, 256+len(d.Body))}
			for _, s := range []string{d.DeliveryID, d.Address, string(d.AddressKind), d.AccountID, d.Method, d.Target, d.Host, d.Proto, d.RemoteAddr} {
				w.Str(s)
			}
			w.Headers(d.Headers)
			w.Bytes(d.Body)
			w.Int(d.BodySize)
			w.Bool(d.Complete)
			n = len(w.B)
		}
		b.ReportMetric(float64(n), "bytes/event")
	})
}
