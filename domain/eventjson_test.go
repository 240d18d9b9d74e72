package domain

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// oldReceivedJSON is how DeliveryReceived was encoded before it was
// written by hand: encoding/json over its fields.
func oldReceivedJSON(e DeliveryReceived) ([]byte, error) {
	if utf8.ValidString(e.Target) {
		return json.Marshal(receivedJSON(e))
	}
	return json.Marshal(struct {
		receivedJSON
		TargetB64 []byte `json:"target_b64"`
	}{receivedJSON(e), []byte(e.Target)})
}

// eventJSONCases are the odd requests and answers a sender or a local
// process can make: text json escapes, text that is not UTF-8, empty,
// nil and binary bodies, no headers at all, every optional field.
func eventJSONCases() ([]DeliveryReceived, []ForwardResponded) {
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	ascii := make([]byte, 0, 128)
	for c := range 128 {
		ascii = append(ascii, byte(c))
	}
	odd := []Header{
		{Name: "X-Html", Value: "<script>&amp;</script>"}, {Name: "X-Ctl", Value: "\x00\x01\t\x1f\x7f"},
		{Name: "X-Sep", Value: "\u2028\u2029"}, {Name: "X-Latin1", Value: "caf\xe9"}, {Name: "Bad\xff", Value: "v"},
		{Name: "X-Empty", Value: ""}, {Name: "", Value: ""}, {Name: "X-Quote", Value: `"a\b"`},
		{Name: "X-All", Value: string(ascii)}, {Name: "X-Emoji", Value: "🙂 中文"}, {Name: "X-Same", Value: "1"}, {Name: "X-Same", Value: "2"},
	}
	base := DeliveryReceived{
		DeliveryID: "0f6c1e0c-8b4e-4a43-9a53-6f4c2ad3e8a1", Address: "ep-1", AddressKind: AddressEndpoint, AccountID: "acc-1",
		Method: "POST", Target: "/webhooks/stripe?a=<b>&c=d", Host: "ep-1.relay.example", Proto: "HTTP/1.1",
		RemoteAddr: "192.0.2.10:40000", Headers: []Header{{Name: "Content-Type", Value: "application/json"}},
		Body: []byte(`{"a":"<b>"}`), BodySize: 11, Complete: true,
	}
	with := func(f func(*DeliveryReceived)) DeliveryReceived {
		e := base
		f(&e)
		return e
	}
	received := []DeliveryReceived{
		{},
		base,
		with(func(e *DeliveryReceived) { e.Headers, e.Body = nil, nil }),
		with(func(e *DeliveryReceived) { e.Headers, e.Body = []Header{}, []byte{} }),
		with(func(e *DeliveryReceived) { e.Headers, e.Trailers = odd, odd }),
		with(func(e *DeliveryReceived) { e.Body, e.BodySize, e.Complete = binary, 4096, false }),
		with(func(e *DeliveryReceived) { e.Target = "/bad\xff\xfe?q=\x00" }),
		with(func(e *DeliveryReceived) { e.Target = "*" }),
		with(func(e *DeliveryReceived) {
			e.AccountID, e.AddressKind = "", AddressInspector
			e.DroppedHeaders, e.RedactedQuery, e.BodyUnread = 3, []string{"hub.verify_token", "<x>", ""}, true
			e.Trailers = []Header{}
			e.Answer = &ReceiptAnswer{Status: 413, Reason: "body larger than 1 MiB & more"}
			e.Provider = &Provider{Name: "stripe", EventType: "payment_intent.succeeded", DeliveryID: "evt_1"}
			e.Scheme, e.Peer, e.Queued = "https", "10.0.0.1", true
			e.Forward = &ReceiptForward{AttemptID: "att", EndpointID: "ep-1", Node: "node-a"}
		}),
		with(func(e *DeliveryReceived) {
			e.Answer = &ReceiptAnswer{Status: 204}
			e.Provider = &Provider{Name: "github"}
			e.Forward = &ReceiptForward{AttemptID: "att\xff", EndpointID: ""}
			e.DeliveryID, e.Host, e.Method = "id\xc3", "h\u2028", "M\""
		}),
		with(func(e *DeliveryReceived) { e.DroppedHeaders = -1 }),
		with(func(e *DeliveryReceived) {
			e.Forward = &ReceiptForward{AttemptID: "att", EndpointID: "ep-1", Node: "n ", Responded: &ForwardResponded{
				DeliveryID: e.DeliveryID, AttemptID: "att", AgentID: "ag<1>", Status: 299, Headers: odd, Body: binary, BodySize: 256,
				Captured: true, DurationMs: 7, Signature: "stripe valid", DroppedHeaders: 2, Copy: false,
				Fidelity: &Fidelity{Agent: DigestRequest("POST", "/x", odd, binary), Relay: DigestRequest("POST", "/x", nil, nil)},
			}}
		}),
		with(func(e *DeliveryReceived) {
			e.Forward = &ReceiptForward{AttemptID: "att", Responded: &ForwardResponded{Headers: nil, Body: nil}}
		}),
	}
	resp := ForwardResponded{DeliveryID: "d", AttemptID: "a", Status: 200,
		Headers: []Header{{Name: "Content-Type", Value: "text/plain"}}, Body: []byte("ok\n"), BodySize: 3, Captured: true, DurationMs: 12}
	withR := func(f func(*ForwardResponded)) ForwardResponded {
		e := resp
		f(&e)
		return e
	}
	responded := []ForwardResponded{
		{},
		resp,
		withR(func(e *ForwardResponded) { e.Headers, e.Body, e.Captured = nil, nil, false }),
		withR(func(e *ForwardResponded) { e.Headers, e.Body = []Header{}, []byte{} }),
		withR(func(e *ForwardResponded) { e.Headers, e.Body, e.BodySize = odd, binary, 256 }),
		withR(func(e *ForwardResponded) {
			e.AgentID, e.Signature, e.Copy, e.DroppedHeaders, e.Status, e.DurationMs = "conn/ep", "stripe valid <ok>", true, 2, 599, -1
			e.Fidelity = &Fidelity{Agent: FidelityDigests{RequestLine: "a", Headers: "b", Body: "c"}, Relay: FidelityDigests{}}
		}),
		withR(func(e *ForwardResponded) { e.Signature = "bad\xff"; e.AttemptID = strings.Repeat("\u2029", 3) }),
	}
	return received, responded
}

// TestEventJSONMatchesEncodingJSON: the hand-written DeliveryReceived and
// ForwardResponded are exactly the bytes encoding/json wrote before, the
// log's format and its evidence chain depend on it.
func TestEventJSONMatchesEncodingJSON(t *testing.T) {
	received, responded := eventJSONCases()
	for i, e := range received {
		checkReceivedJSON(t, i, e)
	}
	for i, e := range responded {
		checkRespondedJSON(t, i, e)
	}
}

// FuzzEventJSONMatchesEncodingJSON is the same with any text a sender or
// a local process controls.
func FuzzEventJSONMatchesEncodingJSON(f *testing.F) {
	f.Add("/a?b=<c>", "X-A", "v1=\xfe", []byte("{}"), "att")
	f.Add("*", "", "", []byte(nil), "")
	f.Fuzz(func(t *testing.T, target, name, value string, body []byte, id string) {
		h := []Header{{Name: name, Value: value}, {Name: "X-" + value, Value: name}}
		checkReceivedJSON(t, 0, DeliveryReceived{DeliveryID: id, Address: value, Method: name, Target: target, Host: value,
			Headers: h, Trailers: h, Body: body, BodySize: int64(len(body)), RedactedQuery: []string{name, value},
			Forward: &ReceiptForward{AttemptID: id, EndpointID: value, Node: name}, Provider: &Provider{Name: name, EventType: value}})
		checkRespondedJSON(t, 0, ForwardResponded{DeliveryID: id, AttemptID: target, AgentID: name, Headers: h, Body: body,
			Signature: value, Fidelity: &Fidelity{Agent: FidelityDigests{RequestLine: value}}})
	})
}

func checkReceivedJSON(t *testing.T, i int, e DeliveryReceived) {
	t.Helper()
	want, err := oldReceivedJSON(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []func() ([]byte, error){e.MarshalJSON, func() ([]byte, error) { return marshal(e) }, func() ([]byte, error) { return json.Marshal(e) }} {
		got, err := f()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("received %d:\n got %s (%v)\nwant %s", i, got, err, want)
		}
	}
}

func checkRespondedJSON(t *testing.T, i int, e ForwardResponded) {
	t.Helper()
	want, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshal(e)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("responded %d:\n got %s (%v)\nwant %s", i, got, err, want)
	}
}

// TestEventJSONCoversEveryField fills every field of the two hand-written
// events, however deep, and compares with encoding/json: a field added to
// either struct but not to its encoder fails here.
func TestEventJSONCoversEveryField(t *testing.T) {
	var received DeliveryReceived
	fillEveryField(reflect.ValueOf(&received).Elem())
	checkReceivedJSON(t, 0, received)
	var responded ForwardResponded
	fillEveryField(reflect.ValueOf(&responded).Elem())
	checkRespondedJSON(t, 0, responded)
}

// fillEveryField sets v and everything under it to a value that is not
// its zero: one element in a slice or map, a pointer to a filled value.
func fillEveryField(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillEveryField(v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillEveryField(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillEveryField(v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillEveryField(k)
		fillEveryField(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("f<" + v.Type().Name() + ">")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	}
}
