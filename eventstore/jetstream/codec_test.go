package jetstream

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

func TestSubjectToken(t *testing.T) {
	tests := []struct{ in, want string }{
		{"delivery-5f0c8a9e-2b1d-4c3e-9f10-6a7b8c9d0e1f", "delivery-5f0c8a9e-2b1d-4c3e-9f10-6a7b8c9d0e1f"},
		{"a.b", "a_2eb"},
		{"a_2eb", "a_5f2eb"},
		{"*>", "_2a_3e"},
		{"sp ace", "sp_20ace"},
		{"é", "_c3_a9"},
	}
	for _, tt := range tests {
		if got := subjectToken(tt.in); got != tt.want {
			t.Errorf("subjectToken(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzSubjectToken: a token is always one valid subject token, and two
// stream names never share one.
func FuzzSubjectToken(f *testing.F) {
	f.Add("delivery-1", "delivery_1")
	f.Add("a.b", "a_2eb")
	f.Add("", "_")
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, tb := subjectToken(a), subjectToken(b)
		if a != b && ta == tb {
			t.Fatalf("%q and %q share the token %q", a, b, ta)
		}
		if strings.ContainsAny(ta, ".*> \t\r\n") {
			t.Fatalf("subjectToken(%q) = %q is not one token", a, ta)
		}
	})
}

func sampleBatch() batch {
	return batch{
		stream:   "delivery-1",
		revision: 7,
		events: []domain.EventData{
			{ID: "5f0c8a9e-2b1d-4c3e-9f10-6a7b8c9d0e1f", Type: "delivery.received.v1", Data: []byte(`{"a":1}`),
				Metadata: domain.Metadata{SchemaVersion: 2, OccurredAt: time.Date(2025, 6, 7, 8, 9, 10, 11, time.UTC), CorrelationID: "c", CausationID: "d"}},
			{ID: "6f0c8a9e-2b1d-4c3e-9f10-6a7b8c9d0e1f", Type: "delivery.forwarded.v1", Data: []byte{0, 0xff, 0xfe}},
			{ID: "7f0c8a9e-2b1d-4c3e-9f10-6a7b8c9d0e1f", Type: "t"},
		},
	}
}

func sameBatch(a, b batch) bool {
	if a.stream != b.stream || a.revision != b.revision || len(a.events) != len(b.events) {
		return false
	}
	for i := range a.events {
		x, y := a.events[i], b.events[i]
		if x.ID != y.ID || x.Type != y.Type || !bytes.Equal(x.Data, y.Data) || !x.Metadata.OccurredAt.Equal(y.Metadata.OccurredAt) ||
			x.Metadata.SchemaVersion != y.Metadata.SchemaVersion || x.Metadata.CorrelationID != y.Metadata.CorrelationID || x.Metadata.CausationID != y.Metadata.CausationID {
			return false
		}
	}
	return true
}

func TestBatchRoundTrip(t *testing.T) {
	in := sampleBatch()
	body, err := encodeBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeBatch(body)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBatch(in, out) {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
}

func TestDecodeBatchRefuses(t *testing.T) {
	body, err := encodeBatch(sampleBatch())
	if err != nil {
		t.Fatal(err)
	}
	noEvents, _ := encodeBatch(batch{stream: "s"})
	tests := []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"other version", append([]byte{bodyVersion + 1}, body[1:]...)},
		{"cut short", body[:len(body)-1]},
		{"trailing bytes", append(append([]byte{}, body...), 0)},
		{"no events", noEvents},
		{"huge length", []byte{bodyVersion, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeBatch(tt.body); !errors.Is(err, errBadBody) {
				t.Fatalf("decodeBatch = %v, want errBadBody", err)
			}
		})
	}
}

// FuzzDecodeBatch: any body either fails with errBadBody or decodes to a
// batch that encodes and decodes to itself.
func FuzzDecodeBatch(f *testing.F) {
	body, _ := encodeBatch(sampleBatch())
	f.Add(body)
	f.Add([]byte{bodyVersion})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := decodeBatch(body)
		if err != nil {
			if !errors.Is(err, errBadBody) {
				t.Fatalf("decodeBatch = %v, want errBadBody", err)
			}
			return
		}
		again, err := encodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeBatch(again)
		if err != nil || !sameBatch(b, back) {
			t.Fatalf("re-encoded batch decodes to %+v, %v; want %+v", back, err, b)
		}
	})
}
