package domain

import (
	"bytes"
	"testing"
)

// BenchmarkDetectProvider is the provider detection every delivery gets,
// for a Stripe event of 1 KiB (its id and type are read from the body).
//
//	go test -run '^$' -bench DetectProvider -cpu 1 ./domain
func BenchmarkDetectProvider(b *testing.B) {
	body := []byte(`{"type":"payment_intent.succeeded","data":{"pad":"`)
	body = append(body, bytes.Repeat([]byte("x"), 1024-len(body)-3)...)
	body = append(body, `"}}`...)
	h := []Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Stripe-Signature", Value: "t=1492774577,v1=5257a869"}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if p := DetectProvider(h, body, true); p == nil || p.EventType != "payment_intent.succeeded" {
			b.Fatalf("DetectProvider = %+v", p)
		}
	}
}

// TestPlainWord: the eight-byte test agrees with the byte table for every
// byte value at every place, and for words of several kinds of bytes.
func TestPlainWord(t *testing.T) {
	word := func(bs [8]byte) uint64 {
		var w uint64
		for i := 7; i >= 0; i-- {
			w = w<<8 | uint64(bs[i])
		}
		return w
	}
	check := func(bs [8]byte) {
		t.Helper()
		want := true
		for _, c := range bs {
			want = want && plainStringByte[c]
		}
		if got := plainWord(word(bs)); got != want {
			t.Fatalf("plainWord(%q) = %v, want %v", bs[:], got, want)
		}
	}
	for place := range 8 {
		for c := range 256 {
			bs := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			bs[place] = byte(c)
			check(bs)
			for other := range 8 { // a second byte next to it: borrows between them
				for _, d := range []byte{0, 0x1f, ' ', '!', '"', '#', '[', '\\', ']', 0x7f, 0x80, 0xff} {
					two := bs
					two[other] = d
					check(two)
				}
			}
		}
	}
}
