package domain

import (
	"bytes"
	"encoding/json"
	"runtime"
	"testing"
)

// TestHeadMatchesDecoding: an answer decoded without its body, and its
// body decoded from its base64, are what decoding the whole event gives,
// for events written by appendResponded and by encoding/json.
func TestHeadMatchesDecoding(t *testing.T) {
	responded := []ForwardResponded{
		{DeliveryID: "d1", AttemptID: "a1", Status: 200, Headers: []Header{{Name: "X", Value: `"attempt_id":"no" ,"body":"no"`}}, Body: []byte("hello"), BodySize: 5, Captured: true, DurationMs: 3},
		{DeliveryID: "d1", AttemptID: "a2", Status: 500, Headers: []Header{}, BodySize: 9, NotCaptured: NotCapturedStorageQuota},
		{DeliveryID: "d1", AttemptID: "a3", Status: 201, Body: bytes.Repeat([]byte{0xff}, 1000), BodySize: 1000, Captured: true, Fidelity: &Fidelity{}},
		{DeliveryID: "d1", AttemptID: "a4", Status: 204, Body: []byte{1}, BodySize: 1, Captured: true},
		{DeliveryID: "d1", AttemptID: "a5", Status: 200, Body: []byte{1, 2}, BodySize: 2, Captured: true},
		// No body, and the fidelity's digests, whose keys are named body too.
		{DeliveryID: "d1", AttemptID: "a6", Status: 202, BodySize: 0, Captured: true,
			Fidelity: &Fidelity{Agent: FidelityDigests{Body: "sha256:ab"}, Relay: FidelityDigests{Body: "sha256:cd"}}},
		{DeliveryID: "d1", AttemptID: "a7", Status: 202, Body: []byte("x"), BodySize: 1, Captured: true, Signature: "stripe valid",
			Fidelity: &Fidelity{Agent: FidelityDigests{Body: "sha256:ab"}, Relay: FidelityDigests{Body: "sha256:cd"}}},
	}
	for _, want := range responded {
		byHand, err := marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		byJSON, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		for _, data := range [][]byte{byHand, byJSON} {
			orig := bytes.Clone(data)
			head, body64, err := DecodeRespondedHead(data)
			if err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			if n := Body64Len(body64); n != len(want.Body) {
				t.Errorf("%s: body of %d bytes, want %d", want.AttemptID, n, len(want.Body))
			}
			if body, err := DecodeBody64(body64); err != nil || !bytes.Equal(body, want.Body) {
				t.Errorf("%s: body decoded as %q, %v; want %q", want.AttemptID, body, err, want.Body)
			}
			whole := want
			whole.Body = nil
			if len(whole.Headers) == 0 {
				whole.Headers = head.Headers
			}
			if !sameJSON(t, head, whole) {
				t.Errorf("%s: head %+v, want %+v", want.AttemptID, head, whole)
			}
			if !bytes.Equal(data, orig) {
				t.Errorf("%s: the data was changed", want.AttemptID)
			}
		}
	}
	if _, _, err := DecodeRespondedHead([]byte(`{"attempt_id":"a","body":"AAAA,"body_size":3}`)); err == nil {
		t.Error("an answer whose body does not end decoded")
	}
}

// TestHeadSkipsTheBody: decoding an answer of 8 MB without its body
// allocates a fraction of it.
func TestHeadSkipsTheBody(t *testing.T) {
	data, err := marshal(ForwardResponded{DeliveryID: "d1", AttemptID: "a1", Status: 200, Body: bytes.Repeat([]byte("x"), 8<<20), BodySize: 8 << 20, Captured: true})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	head, body64, err := DecodeRespondedHead(data)
	runtime.ReadMemStats(&after)
	if n := Body64Len(body64); err != nil || head.AttemptID != "a1" || n != 8<<20 {
		t.Fatalf("head %+v, body %d bytes, %v", head, n, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
		t.Errorf("decoding the head of an answer of 8 MiB allocated %d bytes", alloc)
	}
}

// FuzzRespondedHead: whatever an answer holds, its head and its body are
// what decoding it whole gives.
func FuzzRespondedHead(f *testing.F) {
	f.Add("a1", "X-A", `"attempt_id":"b"`, []byte("body"), true)
	f.Add(`a"2`, `,"body":"`, "v", []byte{}, false)
	f.Fuzz(func(t *testing.T, attempt, name, value string, body []byte, captured bool) {
		e := ForwardResponded{DeliveryID: "d1", AttemptID: attempt, Status: 200, Headers: []Header{{Name: name, Value: value}}, Body: body, BodySize: int64(len(body)), Captured: captured,
			Fidelity: &Fidelity{Agent: FidelityDigests{Body: value}, Relay: FidelityDigests{Body: name}}}
		data, err := marshal(e)
		if err != nil {
			t.Skip()
		}
		var whole ForwardResponded
		if err := json.Unmarshal(data, &whole); err != nil {
			t.Fatal(err)
		}
		head, body64, err := DecodeRespondedHead(data)
		if err != nil {
			t.Fatal(err)
		}
		if n := Body64Len(body64); n != len(whole.Body) {
			t.Fatalf("body of %d bytes, decoded %d", n, len(whole.Body))
		}
		if body, err := DecodeBody64(body64); err != nil || !bytes.Equal(body, whole.Body) {
			t.Fatalf("body decoded as %q, %v; want %q", body, err, whole.Body)
		}
		whole.Body = nil
		if !sameJSON(t, head, whole) {
			t.Fatalf("head %+v, decoded %+v", head, whole)
		}
	})
}

func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
