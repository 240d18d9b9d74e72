package agentwire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/binwire"
)

func TestFramesRoundTrip(t *testing.T) {
	f := Forward{Operation: "forward-0", AttemptID: "a1", DeliveryID: "d1", Method: "POST", Target: "/x?y=%zz\xff",
		Headers: []domain.Header{{Name: "A", Value: "1"}, {Name: "A", Value: "\x00\xff"}}, Body: []byte{0, 1, 2, 255},
		Host: "h.example", Scheme: "https", RemoteAddr: "192.0.2.1:5"}
	got, err := DecodeForward(AppendForward(nil, f))
	if err != nil || !reflect.DeepEqual(got, f) {
		t.Fatalf("forward: %+v, %v; want %+v", got, err, f)
	}
	c := Complete{AttemptID: "a1", Status: 201, Headers: []domain.Header{{Name: "B", Value: "2"}}, Body: []byte("ok"), DurationMs: 7}
	gc, err := DecodeComplete(AppendComplete(nil, c))
	if err != nil || !reflect.DeepEqual(gc, c) {
		t.Fatalf("complete: %+v, %v; want %+v", gc, err, c)
	}
	failed := Complete{AttemptID: "a2", Headers: []domain.Header{}, Body: []byte{}, Error: "dial tcp: refused", Failure: "target down", DurationMs: 1}
	if gc, err := DecodeComplete(AppendComplete(nil, failed)); err != nil || gc.Error != failed.Error || gc.Status != 0 {
		t.Fatalf("failed complete: %+v, %v", gc, err)
	}
	d := Done{AttemptID: "a1", Code: "NOT_FOUND", Message: "gone"}
	if gd, err := DecodeDone(AppendDone(nil, d)); err != nil || gd != d {
		t.Fatalf("done: %+v, %v", gd, err)
	}
}

// TestMalformedFrames: wrong kinds, cut frames, trailing bytes and lengths
// past the frame are refused, not misread.
func TestMalformedFrames(t *testing.T) {
	full := AppendForward(nil, Forward{Operation: "o", AttemptID: "a", Body: bytes.Repeat([]byte("b"), 100)})
	for _, tt := range []struct {
		name  string
		frame []byte
	}{
		{"empty", nil},
		{"wrong kind", AppendDone(nil, Done{AttemptID: "a"})},
		{"cut", full[:len(full)-5]},
		{"trailing byte", append(bytes.Clone(full), 0)},
		{"length past the end", []byte{KindForward, 0x7f, 'a'}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeForward(tt.frame); !errors.Is(err, binwire.ErrMalformed) {
				t.Fatalf("DecodeForward: %v, want ErrMalformed", err)
			}
		})
	}
}

// FuzzDecode: no frame makes a decoder panic or allocate past the frame's
// own size, and what decodes encodes to a frame that decodes the same
// (varints have more than one encoding, so the bytes may differ).
func FuzzDecode(f *testing.F) {
	f.Add(AppendForward(nil, Forward{Operation: "forward-0", AttemptID: "a", Method: "POST", Body: []byte("{}")}))
	f.Add(AppendComplete(nil, Complete{AttemptID: "a", Status: 200, Body: []byte("ok")}))
	f.Add(AppendDone(nil, Done{AttemptID: "a", Code: "NOT_FOUND"}))
	f.Fuzz(func(t *testing.T, frame []byte) {
		switch Kind(frame) {
		case KindForward:
			if v, err := DecodeForward(frame); err == nil {
				if again, err := DecodeForward(AppendForward(nil, v)); err != nil || !reflect.DeepEqual(again, v) {
					t.Fatalf("forward %+v decodes again as %+v, %v", v, again, err)
				}
			}
		case KindComplete:
			if v, err := DecodeComplete(frame); err == nil {
				if again, err := DecodeComplete(AppendComplete(nil, v)); err != nil || !reflect.DeepEqual(again, v) {
					t.Fatalf("complete %+v decodes again as %+v, %v", v, again, err)
				}
			}
		case KindDone:
			if v, err := DecodeDone(frame); err == nil {
				if again, err := DecodeDone(AppendDone(nil, v)); err != nil || again != v {
					t.Fatalf("done %+v decodes again as %+v, %v", v, again, err)
				}
			}
		}
	})
}

// TestCompleteSignatureIsOptional: a Complete with a signature verdict
// round-trips, and a frame without one (an older agent's) still decodes.
func TestCompleteSignatureIsOptional(t *testing.T) {
	c := Complete{AttemptID: "a1", Status: 200, Headers: []domain.Header{}, Body: []byte{}, DurationMs: 1, Signature: "stripe valid"}
	got, err := DecodeComplete(AppendComplete(nil, c))
	if err != nil || got.Signature != "stripe valid" || got.AttemptID != "a1" {
		t.Fatalf("with a signature: %+v, %v", got, err)
	}
	c.Signature = ""
	frame := AppendComplete(nil, c)
	if got, err := DecodeComplete(frame); err != nil || got.Signature != "" {
		t.Fatalf("without one: %+v, %v", got, err)
	}
	if _, err := DecodeComplete(append(frame, 0xff)); err == nil {
		t.Fatal("a frame with a malformed last field decoded")
	}
}

// TestCompleteReceiptIsOptional: a Complete with a fidelity receipt
// round-trips with or without a signature verdict before it; frames of
// older agents (no receipt, or not even a signature) decode with none, and
// a receipt cut short does not decode.
func TestCompleteReceiptIsOptional(t *testing.T) {
	receipt := domain.DigestRequest("POST", "/hook", []domain.Header{{Name: "A", Value: "1"}}, []byte("x"))
	for _, sig := range []string{"", "stripe valid"} {
		c := Complete{AttemptID: "a1", Status: 200, Headers: []domain.Header{}, Body: []byte{}, DurationMs: 1, Signature: sig, Receipt: &receipt}
		frame := AppendComplete(nil, c)
		got, err := DecodeComplete(frame)
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("signature %q: %+v, %v", sig, got, err)
		}
		// Cut inside the receipt: its last digest missing.
		cut := frame[:len(frame)-len(receipt.Body)-1]
		if _, err := DecodeComplete(cut); err == nil {
			t.Fatalf("signature %q: a receipt cut short decoded", sig)
		}
	}
	older := Complete{AttemptID: "a1", Status: 200, Headers: []domain.Header{}, Body: []byte{}, DurationMs: 1, Signature: "stripe valid"}
	if got, err := DecodeComplete(AppendComplete(nil, older)); err != nil || got.Receipt != nil || got.Signature != "stripe valid" {
		t.Fatalf("an older agent's frame: %+v, %v", got, err)
	}
}

// TestDecodeForwardAllocates: a forward frame's strings share one
// allocation, so decoding one costs that and the header list, however many
// headers it has; the body is not copied.
func TestDecodeForwardAllocates(t *testing.T) {
	f := Forward{Operation: "forward-0", AttemptID: "att-1", DeliveryID: "del-1", Method: "POST", Target: "/hook?x=1",
		Body: bytes.Repeat([]byte("b"), 1024), Host: "ep.relay.test", Scheme: "https", RemoteAddr: "192.0.2.1:5"}
	for i := range 12 {
		f.Headers = append(f.Headers, domain.Header{Name: "X-Field-" + string(rune('a'+i)), Value: "value"})
	}
	frame := AppendForward(nil, f)
	if got, err := DecodeForward(frame); err != nil || !reflect.DeepEqual(got, f) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeForward(frame) }); n > 2 {
		t.Errorf("decoding a forward frame allocates %v times, want 2 at most", n)
	}
}

// TestDecodeCompleteAllocates: a complete frame's strings share one
// allocation too: decoding one costs that, the header list and the
// receipt, however many headers it has; the body is not copied.
func TestDecodeCompleteAllocates(t *testing.T) {
	c := Complete{AttemptID: "att-1", Status: 200, Body: bytes.Repeat([]byte("b"), 1024), Error: "", Failure: "", DurationMs: 3,
		Signature: "stripe valid", Receipt: &domain.FidelityDigests{RequestLine: "sha256:aa", Headers: "sha256:bb", Body: "sha256:cc"}}
	for i := range 12 {
		c.Headers = append(c.Headers, domain.Header{Name: "X-Field-" + string(rune('a'+i)), Value: "value"})
	}
	frame := AppendComplete(nil, c)
	if got, err := DecodeComplete(frame); err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeComplete(frame) }); n > 3 {
		t.Errorf("decoding a complete frame allocates %v times, want 3 at most", n)
	}
}

// TestBodySizes: the sizes DecodeForward and DecodeComplete leave out of
// the one allocation their strings share are the frames' bodies, for
// every shape of frame (no headers, many, an empty body, the optional
// tail of a Complete, or none), and 0 for a frame that is not one.
func TestBodySizes(t *testing.T) {
	receipt := domain.DigestRequest("POST", "/hook", nil, []byte("x"))
	many := make([]domain.Header, 40)
	for i := range many {
		many[i] = domain.Header{Name: "X-H", Value: "v"}
	}
	for _, body := range [][]byte{nil, {}, []byte("b"), bytes.Repeat([]byte("b"), 70000)} {
		for _, headers := range [][]domain.Header{nil, {{Name: "A", Value: "1"}}, many} {
			f := Forward{Operation: "o", AttemptID: "a", DeliveryID: "d", Method: "POST", Target: "/t", Headers: headers, Body: body,
				Host: "h", Scheme: "https", RemoteAddr: "192.0.2.1:5"}
			if got := forwardBodySize(AppendForward(nil, f)); got != len(body) {
				t.Errorf("forward with %d headers: body size %d, want %d", len(headers), got, len(body))
			}
			for _, c := range []Complete{
				{AttemptID: "a", Status: 200, Headers: headers, Body: body},
				{AttemptID: "a", Status: 200, Headers: headers, Body: body, Signature: "stripe valid"},
				{AttemptID: "a", Status: 200, Headers: headers, Body: body, Signature: "stripe valid", Receipt: &receipt},
				{AttemptID: "a", Headers: headers, Body: body, Error: "refused", Failure: "down", DurationMs: 9},
			} {
				if got := completeBodySize(AppendComplete(nil, c)); got != len(body) {
					t.Errorf("complete with %d headers, signature %q, receipt %v: body size %d, want %d",
						len(headers), c.Signature, c.Receipt != nil, got, len(body))
				}
			}
		}
	}
	for _, frame := range [][]byte{nil, {KindForward}, AppendDone(nil, Done{AttemptID: "a"})} {
		if forwardBodySize(frame) != 0 || completeBodySize(frame) != 0 {
			t.Errorf("frame %q: body sizes %d, %d; want 0", frame, forwardBodySize(frame), completeBodySize(frame))
		}
	}
}

// TestForwardSizeIsTheFrame: ForwardSize is the frame's length, whatever
// its shape (lengths on both sides of each varint step, no headers, many),
// so a buffer made for it takes the frame without growing.
func TestForwardSizeIsTheFrame(t *testing.T) {
	str := func(n int) string { return string(bytes.Repeat([]byte("s"), n)) }
	many := make([]domain.Header, 200)
	for i := range many {
		many[i] = domain.Header{Name: "X-Header-" + string(rune('a'+i%26)), Value: str(i * 3)}
	}
	for _, n := range []int{0, 1, 127, 128, 16383, 16384} {
		for _, headers := range [][]domain.Header{nil, {{Name: str(n), Value: str(n)}}, many} {
			f := Forward{Operation: str(n), AttemptID: str(n), DeliveryID: str(n), Method: str(n), Target: str(n),
				Headers: headers, Body: bytes.Repeat([]byte("b"), n), Host: str(n), Scheme: str(n), RemoteAddr: str(n)}
			size := ForwardSize(f)
			buf := make([]byte, 0, size)
			frame := AppendForward(buf, f)
			if len(frame) != size || cap(frame) != size {
				t.Errorf("fields of %d bytes, %d headers: frame of %d bytes (capacity %d), ForwardSize %d",
					n, len(headers), len(frame), cap(frame), size)
			}
		}
	}
}
