package sqlite

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/s2"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/sqlitedsn"
)

// receiptLike is data shaped like a delivery's receipt: headers and a
// base64 JSON body inside JSON.
func receiptLike(bodyBytes int) []byte {
	body := `{"id":"evt_1","type":"invoice.paid","data":{"object":{"lines":[` + strings.Repeat(`{"amount":1200,"currency":"usd","description":"Seat"},`, bodyBytes/55) + `{}]}}}`
	return []byte(`{"method":"POST","headers":[{"name":"Content-Type","value":"application/json"},{"name":"Stripe-Signature","value":"t=1,v1=abc"}],"body":"` +
		base64.StdEncoding.EncodeToString([]byte(body)) + `"}`)
}

func randomBase64(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return []byte(`"` + base64.StdEncoding.EncodeToString(b) + `"`)
}

// TestDataStoredCompressed appends data of every kind, reopens the log (so
// nothing comes from the tail in memory) and reads it back through every
// read: each returns the data as given, the rows keep it compressed only
// where that pays, and the chain's leaves are those of the data as given.
func TestDataStoredCompressed(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	cases := []struct {
		name    string
		data    []byte
		wantEnc int64
	}{
		{"tiny", []byte(`{"n":1}`), encRaw},
		{"receipt", receiptLike(1024), encS2},
		{"large receipt", receiptLike(200 << 10), encS2},
		{"random", randomBase64(t, 3<<10), encRaw},
		{"past compressMax", receiptLike(compressMax), encRaw},
		{"empty", []byte{}, encRaw},
	}
	s := openAt(t, path, Options{})
	for i, c := range cases {
		e := domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: c.data}
		if _, err := s.Append(ctx, fmt.Sprintf("delivery-%d", i), domain.NoStream(), e); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, c := range cases {
		var enc, size int64
		if err := db.QueryRow(`SELECT enc, length(data) FROM events WHERE stream = ?`, fmt.Sprintf("delivery-%d", i)).Scan(&enc, &size); err != nil {
			t.Fatal(err)
		}
		if enc != c.wantEnc {
			t.Errorf("%s: stored as %d, want %d", c.name, enc, c.wantEnc)
		}
		if enc == encS2 && size > int64(len(c.data))/2 {
			t.Errorf("%s: %d bytes stored for %d", c.name, size, len(c.data))
		}
	}

	s = openAt(t, path, Options{})
	defer s.Close()
	all, err := s.ReadAll(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.ReadStored(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	links, err := s.ReadChain(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := s.SubscribeAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	live, err := sub.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(cases) || len(stored) != len(cases) || len(links) != len(cases) || len(live) != len(cases) {
		t.Fatalf("read %d, %d stored, %d links, %d by subscription; want %d each", len(all), len(stored), len(links), len(live), len(cases))
	}
	for i, c := range cases {
		evs, err := s.ReadStream(ctx, fmt.Sprintf("delivery-%d", i), 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		for what, got := range map[string][]byte{"ReadStream": evs[0].Data, "ReadAll": all[i].Data, "ReadStored": stored[i].Data, "SubscribeAll": live[i].Data} {
			if !bytes.Equal(got, c.data) {
				t.Errorf("%s: %s returned %d bytes, want the %d given", c.name, what, len(got), len(c.data))
			}
		}
		if leaf := evidence.Leaf(stored[i]); leaf != links[i].Leaf {
			t.Errorf("%s: the chain's leaf is not the leaf of the data as given", c.name)
		}
	}
}

// TestCompressedBuffersReusedOnlyAfterCommit: the buffers compressed data
// is held in go back for reuse once their batch is committed; appends from
// many goroutines, each compressing into a buffer another append used
// before, still read back exactly as given.
func TestCompressedBuffersReusedOnlyAfterCommit(t *testing.T) {
	ctx := t.Context()
	s := openAt(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	const senders, each = 8, 40
	data := func(g, i int) []byte { // each its own bytes
		return append(receiptLike(600+37*g+i), fmt.Sprintf(" %d-%d", g, i)...)
	}
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				e := domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: data(g, i)}
				if _, err := s.Append(ctx, fmt.Sprintf("delivery-%d-%d", g, i), domain.NoStream(), e); err != nil {
					t.Errorf("append: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for g := range senders {
		for i := range each {
			evs, err := s.ReadStream(ctx, fmt.Sprintf("delivery-%d-%d", g, i), 0, 1)
			if err != nil || len(evs) != 1 {
				t.Fatalf("read %d-%d: %v (%d events)", g, i, err, len(evs))
			}
			if !bytes.Equal(evs[0].Data, data(g, i)) {
				t.Fatalf("event %d-%d reads back other bytes than were appended", g, i)
			}
		}
	}
}

// TestDamagedDataIsRefused: a stored value that cannot be what the writer
// wrote is damage to the log, refused without allocating what it claims.
func TestDamagedDataIsRefused(t *testing.T) {
	huge := s2.Encode(nil, bytes.Repeat([]byte("a"), 64))
	huge = append([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, huge[1:]...) // claims 4 GiB
	over := s2.Encode(nil, bytes.Repeat([]byte("a"), compressMax+1))
	for _, c := range []struct {
		name   string
		stored []byte
		enc    int64
	}{
		{"garbage", []byte("not s2 at all"), encS2},
		{"truncated", s2.Encode(nil, receiptLike(2048))[:100], encS2},
		{"claims 4 GiB", huge, encS2},
		{"more than is ever compressed", over, encS2},
		{"unknown encoding", []byte("{}"), 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := decodeData(c.stored, c.enc)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, sqlitedsn.ErrDamagedValue) || !sqlitedsn.Damaged(err) {
				t.Fatalf("decodeData: %v, want damage", err)
			}
			// What the claim asks for is never allocated (the race
			// detector and the error text take a few KiB).
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
				t.Errorf("%d bytes allocated to refuse the value", grew)
			}
		})
	}

	// Through the store: a damaged row fails the read as damage.
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	if _, err := s.Append(ctx, "delivery-1", domain.NoStream(), domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: receiptLike(2048)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE events SET data = X'00112233' WHERE stream = 'delivery-1'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = openAt(t, path, Options{})
	defer s.Close()
	if _, err := s.ReadStream(ctx, "delivery-1", 0, 1); !sqlitedsn.Damaged(err) {
		t.Errorf("ReadStream of a damaged row: %v, want damage", err)
	}
	if _, err := s.ReadStored(ctx, 0, 10); !sqlitedsn.Damaged(err) {
		t.Errorf("ReadStored of a damaged row: %v, want damage", err)
	}
}

// FuzzDecodeData: any stored value either decodes to at most compressMax
// bytes or is refused as damage, and whatever encodeData stores decodes to
// what it was given.
func FuzzDecodeData(f *testing.F) {
	f.Add(receiptLike(512))
	f.Add(s2.Encode(nil, receiptLike(512)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := decodeData(b, encS2)
		if err != nil && !errors.Is(err, sqlitedsn.ErrDamagedValue) {
			t.Fatalf("error not damage: %v", err)
		}
		if err == nil && len(out) > compressMax {
			t.Fatalf("decoded %d bytes", len(out))
		}
		stored, enc, _ := encodeData(b)
		back, err := decodeData(stored, enc)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("round trip: %v, equal %v", err, bytes.Equal(back, b))
		}
	})
}

// stripeEvent is a webhook as Stripe sends one: varied keys, ids and
// values, unlike receiptLike's repeated lines.
const stripeEvent = `{
  "id": "evt_1QJx8cL7fH2kP9mZq3Rt4Vw1",
  "object": "event",
  "api_version": "2024-06-20",
  "created": 1732792451,
  "data": {
    "object": {
      "id": "in_1QJx7yL7fH2kP9mZxC1bN8sA",
      "object": "invoice",
      "account_country": "US",
      "account_name": "Acme Analytics, Inc.",
      "amount_due": 4900,
      "amount_paid": 4900,
      "amount_remaining": 0,
      "attempt_count": 1,
      "attempted": true,
      "billing_reason": "subscription_cycle",
      "charge": "ch_3QJx80L7fH2kP9mZ0kQe5JvR",
      "collection_method": "charge_automatically",
      "created": 1732788851,
      "currency": "usd",
      "customer": "cus_R2fLm9QyT0aZ3x",
      "customer_email": "jordan.rivera@example.org",
      "customer_name": "Jordan Rivera",
      "hosted_invoice_url": "https://invoice.stripe.com/i/acct_1N3xZ9L7fH2kP9mZ/test_YWNjdF8xTjN4WjlMN2ZIMmtQOW1aLF9SMmZMbTlReVQwYVozeA0200Xk3mQ2P",
      "invoice_pdf": "https://pay.stripe.com/invoice/acct_1N3xZ9L7fH2kP9mZ/test_YWNjdF8xTjN4WjlMN2ZIMmtQOW1aLF9SMmZMbTlReVQwYVozeA0200Xk3mQ2P/pdf?s=ap",
      "lines": {
        "object": "list",
        "data": [
          {
            "id": "il_1QJx7yL7fH2kP9mZq8V2bT0e",
            "object": "line_item",
            "amount": 4900,
            "currency": "usd",
            "description": "1 × Pro plan (at $49.00 / month)",
            "period": {"end": 1735467251, "start": 1732788851},
            "plan": {"id": "price_1N3yA2L7fH2kP9mZtY6uI0oP", "object": "plan", "active": true, "amount": 4900, "interval": "month", "product": "prod_O1yA9kLm3Qw8Zx"},
            "quantity": 1,
            "subscription": "sub_1N3yB7L7fH2kP9mZpL4kJ9hG",
            "type": "subscription"
          }
        ],
        "has_more": false,
        "total_count": 1,
        "url": "/v1/invoices/in_1QJx7yL7fH2kP9mZxC1bN8sA/lines"
      },
      "livemode": false,
      "number": "A1B2C3D4-0012",
      "paid": true,
      "payment_intent": "pi_3QJx80L7fH2kP9mZ0yUe7KqW",
      "period_end": 1732788851,
      "period_start": 1730196851,
      "status": "paid",
      "subscription": "sub_1N3yB7L7fH2kP9mZpL4kJ9hG",
      "subtotal": 4900,
      "tax": null,
      "total": 4900
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": null, "idempotency_key": null},
  "type": "invoice.paid"
}`

// stripeReceipt is the receipt of stripeEvent sent to an inspector, as the
// codec encodes it.
func stripeReceipt(tb testing.TB) []byte {
	tb.Helper()
	body := []byte(stripeEvent)
	ev := domain.DeliveryReceived{DeliveryID: "0193780c-5b1e-7c2a-9f3e-2a1b4c5d6e7f", Address: "k3j5h2g7f9d1s4a6", AddressKind: domain.AddressInspector,
		Method: "POST", Target: "/", Host: "k3j5h2g7f9d1s4a6.relay.example.com", Proto: "HTTP/1.1", RemoteAddr: "54.187.174.169:44312",
		Headers: []domain.Header{{Name: "Accept", Value: "*/*; q=0.5, application/xml"}, {Name: "Cache-Control", Value: "no-cache"},
			{Name: "Content-Length", Value: "2418"}, {Name: "Content-Type", Value: "application/json; charset=utf-8"},
			{Name: "Stripe-Signature", Value: "t=1732792452,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"},
			{Name: "User-Agent", Value: "Stripe/1.0 (+https://stripe.com/docs/webhooks)"}},
		Body: body, BodySize: int64(len(body)), Complete: true, Answer: &domain.ReceiptAnswer{Status: 204}}
	d, err := domain.NewCodec().Encode("0193780c-5b1e-7c2a-9f3e-2a1b4c5d6e80", ev, time.Unix(1732792452, 0), domain.Trace{})
	if err != nil {
		tb.Fatal(err)
	}
	return d.Data
}

// BenchmarkEncodeData is what storing an event's data costs the appending
// goroutine, what reading it back costs, and how much is stored: a
// receipt of repeated lines and a Stripe event's receipt.
func BenchmarkEncodeData(b *testing.B) {
	for _, c := range []struct {
		name string
		data []byte
	}{{"repeated", receiptLike(1024)}, {"stripe", stripeReceipt(b)}} {
		stored, enc, _ := encodeData(c.data)
		if enc != encS2 {
			b.Fatalf("%s: not compressed", c.name)
		}
		b.Run(c.name+"/encode", func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				_, _, buf := encodeData(c.data)
				releaseBuffer(buf)
			}
			b.ReportMetric(float64(len(stored))/float64(len(c.data)), "stored/given")
		})
		b.Run(c.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				if _, err := decodeData(stored, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
