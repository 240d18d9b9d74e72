package projections

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// leanType pairs a lean decoder with the codec's type it stands in for.
type leanType struct {
	typ    string
	decode func([]byte) (any, error)
	// samples are encoded with the codec besides the golden file: together
	// they give every field a non-zero value at least once.
	samples []domain.Event
}

func leanTypes() []leanType {
	headers := []domain.Header{{Name: "Content-Type", Value: "text/plain"}, {Name: "X-Repeat", Value: "1"}, {Name: "X-Repeat", Value: "2"}}
	return []leanType{
		{
			typ:    domain.TypeDeliveryReceived,
			decode: func(b []byte) (any, error) { return decodeReceived(b) },
			samples: []domain.Event{
				domain.DeliveryReceived{DeliveryID: "d-9", Address: "ep-9", AddressKind: domain.AddressEndpoint, AccountID: "acct-9",
					Method: "PATCH", Target: "/p?q=%20", Host: "ep-9.localhost", Proto: "HTTP/2.0", RemoteAddr: "[::1]:1",
					Scheme: "https", Peer: "127.0.0.1:9", Headers: headers, Body: []byte("\x00\x01body"), BodySize: 1 << 20, Complete: true,
					Answer: &domain.ReceiptAnswer{Status: 204, Reason: "logged"}, Queued: true},
				domain.DeliveryReceived{DeliveryID: "d-8", Address: "insp-8", AddressKind: domain.AddressInspector, Method: "GET",
					Target: "/", Host: "insp-8.localhost", Proto: "HTTP/1.0", RemoteAddr: "127.0.0.1:2",
					Forward: &domain.ReceiptForward{AttemptID: "a-8", EndpointID: "ep-8", Node: "n-8"}},
				domain.DeliveryReceived{DeliveryID: "d-7", Address: "ep-7", AddressKind: domain.AddressEndpoint, Method: "POST",
					Target: "/caf\xe9", Host: "ep-7.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:3",
					Body: []byte("abc"), BodySize: 4, BodyUnread: true, Trailers: headers, DroppedHeaders: 2,
					Provider: &domain.Provider{Name: "stripe", EventType: "invoice.paid", DeliveryID: "evt_7"}},
				domain.DeliveryReceived{DeliveryID: "d-6", Address: "ep-6", AddressKind: domain.AddressEndpoint, Method: "POST",
					Target: "/hook", Host: "ep-6.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:4", Headers: headers, Body: []byte("{}"), BodySize: 2, Complete: true,
					Forward: &domain.ReceiptForward{AttemptID: "a-6", EndpointID: "ep-6", Responded: &domain.ForwardResponded{
						DeliveryID: "d-6", AttemptID: "a-6", AgentID: "ag-6", Status: 201, Headers: headers, Body: []byte("made"), BodySize: 4,
						Captured: true, DurationMs: 7, Signature: "github valid", DroppedHeaders: 1,
						Fidelity: &domain.Fidelity{Agent: domain.DigestRequest("POST", "/hook", nil, []byte("{}")), Relay: domain.DigestRequest("POST", "/hook", nil, []byte("{}"))}}}},
			},
		},
		{
			typ:    domain.TypeForwardResponded,
			decode: func(b []byte) (any, error) { return decodeResponded(b) },
			samples: []domain.Event{
				domain.ForwardResponded{DeliveryID: "d-9", AttemptID: "a-9", AgentID: "ag-9", Status: 418, Headers: headers, Signature: "stripe valid",
					Body: []byte("teapot"), BodySize: 6, Captured: true, DurationMs: 99, DroppedHeaders: 3,
					Fidelity: &domain.Fidelity{Agent: domain.DigestRequest("POST", "/x", nil, []byte("a")), Relay: domain.DigestRequest("POST", "/x", nil, []byte("b"))}},
				domain.ForwardResponded{DeliveryID: "d-8", AttemptID: "a-8", Status: 204, BodySize: 0, DurationMs: 0, Copy: true},
				domain.ForwardResponded{DeliveryID: "d-7", AttemptID: "a-7", Status: 200, Headers: headers, BodySize: 204800, DurationMs: 2, Copy: true,
					NotCaptured: domain.NotCapturedStorageQuota},
			},
		},
	}
}

// leftInLog are the payload fields the views read back from the log
// instead of keeping; the lean structs only check their JSON kind.
var leftInLog = map[string]byte{"Headers": '[', "Body": '"', "Trailers": '[', "RedactedQuery": '[', "NotCaptured": '"'}

// TestLeanDecodeAgreesWithCodec decodes the golden payloads of domain and a
// few encoded ones both ways: every field of a lean struct must equal the
// codec's field of the same name, every codec field must be in the lean
// struct or left in the log, and every lean field must be non-zero in some
// payload, so a field renamed in domain (in Go or in JSON) fails here.
func TestLeanDecodeAgreesWithCodec(t *testing.T) {
	codec := domain.NewCodec()
	for _, lt := range leanTypes() {
		t.Run(lt.typ, func(t *testing.T) {
			golden, err := os.ReadFile(filepath.Join("..", "domain", "testdata", lt.typ+".json"))
			if err != nil {
				t.Fatal(err)
			}
			payloads := [][]byte{golden}
			for _, ev := range lt.samples {
				data, err := codec.Encode("00000000-0000-4000-8000-000000000009", ev, t0, domain.Trace{})
				if err != nil {
					t.Fatal(err)
				}
				payloads = append(payloads, data.Data)
			}
			seen := map[string]bool{} // lean fields found non-zero
			for _, payload := range payloads {
				full, err := codec.Decode(lt.typ, payload)
				if err != nil {
					t.Fatalf("codec: %v", err)
				}
				lean, err := lt.decode(payload)
				if err != nil {
					t.Fatalf("lean: %v", err)
				}
				compareLean(t, reflect.ValueOf(lean), reflect.ValueOf(full), seen)
			}
			leanT, fullT := reflect.TypeOf(mustDecode(t, lt, golden)), reflect.TypeOf(mustCodec(t, codec, lt.typ, golden))
			for i := range leanT.NumField() {
				if name := leanT.Field(i).Name; !seen[name] {
					t.Errorf("lean field %s is zero in every payload: the test cannot tell whether it decodes", name)
				}
			}
			for i := range fullT.NumField() {
				name := fullT.Field(i).Name
				if _, ok := leanT.FieldByName(name); !ok {
					t.Errorf("%s.%s is neither in the lean struct nor left in the log", fullT.Name(), name)
				}
			}
		})
	}
}

// compareLean compares a lean struct with the codec's payload, field by
// field, and records the lean fields that hold a non-zero value.
func compareLean(t *testing.T, lean, full reflect.Value, seen map[string]bool) {
	t.Helper()
	for i := range lean.NumField() {
		name := lean.Type().Field(i).Name
		lf, ff := lean.Field(i), full.FieldByName(name)
		if !ff.IsValid() {
			t.Errorf("lean field %s has no field of that name in %s", name, full.Type())
			continue
		}
		if kind, ok := leftInLog[name]; ok {
			// The kind is recorded exactly when the codec found a value (a
			// nil list, an empty string: none).
			got := byte(lf.Interface().(jsonKind))
			absent := ff.IsZero()
			if absent != (got == 0 || got == 'n') || (!absent && got != kind) {
				t.Errorf("%s: lean saw JSON kind %q, codec decoded %v", name, got, ff.Interface())
			}
			if !absent {
				seen[name] = true
			}
			continue
		}
		if lf.Kind() == reflect.Pointer && ff.Kind() == reflect.Pointer && lf.Type() != ff.Type() &&
			lf.Type().Elem().Kind() == reflect.Struct {
			// A lean struct of its own (a receipt's forward and the answer
			// it may record): field by field, as the payload's.
			if lf.IsNil() != ff.IsNil() {
				t.Errorf("%s: lean %#v, codec %#v", name, lf.Interface(), ff.Interface())
			} else if !lf.IsNil() {
				compareLean(t, lf.Elem(), ff.Elem(), seen)
				seen[name] = true
			}
			continue
		}
		if !reflect.DeepEqual(lf.Interface(), ff.Interface()) {
			t.Errorf("%s: lean %#v, codec %#v", name, lf.Interface(), ff.Interface())
		}
		if !lf.IsZero() {
			seen[name] = true
		}
	}
}

func mustDecode(t *testing.T, lt leanType, payload []byte) any {
	t.Helper()
	v, err := lt.decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustCodec(t *testing.T, codec *domain.Codec, typ string, payload []byte) domain.Event {
	t.Helper()
	v, err := codec.Decode(typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// malformed are payloads, good and bad, on which the lean decoders must
// agree with the codec: what it rejects is skipped, whichever decodes it.
var malformed = []string{
	`{}`,
	`{"headers":null,"body":null}`,
	`{"delivery_id":"d","headers":[{"name":"a","value":"b"}],"body":"AAEC"}`,
	`{"delivery_id":"d","unknown":{"x":[1,"y",null]}}`,
	`{"DELIVERY_ID":"d","Body":"AAEC"}`,
	`not json`,
	`{"delivery_id":"d"} trailing`,
	`{"delivery_id":5}`,
	`{"body":5}`,
	`{"body":{}}`,
	`{"body":true}`,
	`{"headers":"x"}`,
	`{"headers":{}}`,
	`{"complete":"yes"}`,
	`{"captured":1}`,
	`{"body_size":"1"}`,
	`{"status":"200"}`,
	`{"address_kind":7}`,
	`{"agent_id":[]}`,
	`{"answer":null}`,
	`{"answer":{"status":204}}`,
	`{"answer":{"status":"204"}}`,
	`{"answer":{"reason":5}}`,
	`{"answer":[]}`,
}

func TestLeanDecodeRejectsWhatTheCodecRejects(t *testing.T) {
	codec := domain.NewCodec()
	for _, lt := range leanTypes() {
		for _, payload := range malformed {
			_, codecErr := codec.Decode(lt.typ, []byte(payload))
			_, leanErr := lt.decode([]byte(payload))
			if (codecErr == nil) != (leanErr == nil) {
				t.Errorf("%s %s: codec error %v, lean error %v", lt.typ, payload, codecErr, leanErr)
			}
		}
	}
}

// FuzzLeanDecode checks that whatever the codec decodes, the lean decoders
// decode alike. (The converse holds for the JSON syntax and the type of
// every field, not for the base64 text of a body or the fields inside a
// header: see lean.go.)
func FuzzLeanDecode(f *testing.F) {
	for _, p := range malformed {
		f.Add(p)
	}
	for _, lt := range leanTypes() {
		for _, ev := range lt.samples {
			data, err := domain.NewCodec().Encode("00000000-0000-4000-8000-000000000009", ev, time.Unix(0, 0), domain.Trace{})
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(data.Data))
		}
	}
	codec := domain.NewCodec()
	f.Fuzz(func(t *testing.T, payload string) {
		for _, lt := range leanTypes() {
			full, err := codec.Decode(lt.typ, []byte(payload))
			if err != nil {
				continue
			}
			lean, err := lt.decode([]byte(payload))
			if err != nil {
				t.Fatalf("%s: the codec decodes %q, the lean decoder fails: %v", lt.typ, payload, err)
			}
			compareLean(t, reflect.ValueOf(lean), reflect.ValueOf(full), map[string]bool{})
		}
	})
}

// fastCases are payloads fastReceived must either decode exactly as
// encoding/json does or leave to it.
var fastCases = []string{
	`{"delivery_id":"d1","address":"a","address_kind":"inspector","method":"POST","target":"/x?y=1","host":"a.localhost","proto":"HTTP/1.1","remote_addr":"127.0.0.1:1","headers":[{"name":"X","value":"a\u0026b"}],"body":"AAEC/w==","body_size":10,"complete":false,"answer":{"status":204}}`,
	`{"delivery_id":"d1","headers":null,"body":null,"answer":null}`,
	`{"delivery_id":"d1","remote_addr":"203.0.113.9","scheme":"https","peer":"127.0.0.1:5"}`,
	`{"delivery_id":"d1","answer":{"status":413,"reason":"too } large"}}`,
	`{"delivery_id":"d1","answer":{"status":413,"extra":{"x":1}}}`,
	`{"delivery_id":"d\u00e9"}`,
	`{"delivery_id":"dé"}`,
	`{ "delivery_id":"d1"}`,
	`{"Delivery_ID":"d1"}`,
	`{"delivery_id":"d1","delivery_id":"d2"}`,
	`{"body_size":01}`,
	`{"body_size":-0}`,
	`{"body_size":1e3}`,
	`{"body_size":9223372036854775808}`,
	`{"complete":truex}`,
	`{"body":"a\nb"}`,
	`{"body":"a\\"}`,
	`{"headers":[1,[2,{"a":"]"}]]}`,
	`{"headers":[1,}`,
	`{"headers":["\"]"]}`,
	`{"target":"/a"}x`,
	`{"target":"/a"`,
	`{}`,
	`{"x":1}`,
}

func TestFastReceivedAgreesWithJSON(t *testing.T) {
	took := 0
	for _, payload := range append(append([]string{}, fastCases...), malformed...) {
		if checkFastReceived(t, []byte(payload)) {
			took++
		}
	}
	if took < 5 {
		t.Errorf("the fast path decoded only %d of the cases: it is not being exercised", took)
	}
	// What ingress writes takes the fast path.
	req := domain.CapturedRequest{Method: "POST", Target: "/hooks?a=1&b=<2>", Host: "x.localhost", Proto: "HTTP/1.1",
		RemoteAddr: "127.0.0.1:5", Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Sig", Value: "t=1,v1=ab&c"}},
		Body: []byte(`{"event":"paid","amount":100}`), BodySize: 29, Complete: true}
	d, err := domain.ReceiveAndAnswer("d1", "x", domain.AddressInspector, "", req, 204, "")
	if err != nil {
		t.Fatal(err)
	}
	data, err := domain.NewCodec().Encode("00000000-0000-4000-8000-000000000009", d.Changes()[0], time.Unix(0, 0), domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	if !checkFastReceived(t, data.Data) {
		t.Errorf("the codec's own payload did not take the fast path: %s", data.Data)
	}
}

// checkFastReceived reports whether fastReceived decoded payload, failing
// the test if it decoded it differently from decodeReceivedJSON.
func checkFastReceived(t *testing.T, payload []byte) bool {
	t.Helper()
	return checkFast(t, payload, fastReceived, decodeReceivedJSON)
}

// checkFast reports whether fast decoded payload, failing the test if it
// decoded it differently from slow, the encoding/json path.
func checkFast[T any](t *testing.T, payload []byte, fast func([]byte) (T, bool), slow func([]byte) (T, error)) bool {
	t.Helper()
	got, ok := fast(payload)
	if !ok {
		return false
	}
	want, err := slow(payload)
	if err != nil {
		t.Errorf("fast path accepted %s, encoding/json refuses it: %v", payload, err)
		return true
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\nfast %+v\nslow %+v", payload, got, want)
	}
	return true
}

func FuzzFastReceived(f *testing.F) {
	for _, p := range append(append([]string{}, fastCases...), malformed...) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		checkFastReceived(t, []byte(payload))
	})
}

// fastRespondedCases are payloads fastResponded must either decode exactly
// as encoding/json does or leave to it.
var fastRespondedCases = []string{
	`{"delivery_id":"d1","attempt_id":"a1","agent_id":"g","status":200,"headers":[{"name":"X","value":"a\u0026b"}],"body":"AAEC/w==","body_size":4,"captured":true,"duration_ms":3,"signature":"stripe valid","fidelity":{"agent":{"request_line":"x","headers":"y","body":"z"},"relay":{"request_line":"x","headers":"y","body":"w"}},"copy":true,"dropped_headers":2}`,
	`{"delivery_id":"d1","attempt_id":"a1","status":502,"headers":null,"body_size":0,"captured":false,"duration_ms":0}`,
	`{"delivery_id":"d1","fidelity":null}`,
	`{"delivery_id":"d1","fidelity":{"agent":{"body":"}"}}}`,
	`{"delivery_id":"d1","fidelity":{"agent":1}}`,
	`{"fidelity":{"agent":{"body":"a"}},"fidelity":{"relay":{"body":"b"}}}`,
	`{"fidelity":{"agent":{"body":"a"},"agent":{"headers":"h"}}}`,
	`{"fidelity":{"agent":{"body":"a\u0026"}},"fidelity":null}`,
	`{"delivery_id":"d1","fidelity":{"agent":{}}`,
	`{"status":2147483648}`,
	`{"status":-1}`,
	`{"status":1.5}`,
	`{"status":"200"}`,
	`{"dropped_headers":-1}`,
	`{"copy":1}`,
	`{"headers":[1,}`,
	`{"body":"a\nb"}`,
	`{"body":{}}`,
	`{"x":1}`,
	`{ "status":200}`,
	`{"status":200}x`,
	`{}`,
}

func TestFastRespondedAgreesWithJSON(t *testing.T) {
	took := 0
	for _, payload := range append(append([]string{}, fastRespondedCases...), malformed...) {
		if checkFastResponded(t, []byte(payload)) {
			took++
		}
	}
	if took < 5 {
		t.Errorf("the fast path decoded only %d of the cases: it is not being exercised", took)
	}
	// What the tunnel records takes the fast path.
	ev := domain.ForwardResponded{DeliveryID: "d1", AttemptID: "a1", AgentID: "g", Status: 201,
		Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{"ok":true}`),
		BodySize: 11, Captured: true, DurationMs: 7, Signature: "stripe valid",
		Fidelity: &domain.Fidelity{Agent: domain.FidelityDigests{Body: "a"}, Relay: domain.FidelityDigests{Body: "a"}}, Copy: true}
	data, err := domain.NewCodec().Encode("00000000-0000-4000-8000-000000000009", ev, time.Unix(0, 0), domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	if !checkFastResponded(t, data.Data) {
		t.Errorf("the codec's own payload did not take the fast path: %s", data.Data)
	}
}

// checkFastResponded reports whether fastResponded decoded payload, failing
// the test if it decoded it differently from decodeRespondedJSON.
func checkFastResponded(t *testing.T, payload []byte) bool {
	t.Helper()
	return checkFast(t, payload, fastResponded, decodeRespondedJSON)
}

func FuzzFastResponded(f *testing.F) {
	for _, p := range append(append([]string{}, fastRespondedCases...), malformed...) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		checkFastResponded(t, []byte(payload))
	})
}

// TestRowsOfPayloadsAgreeWithDecoding: the rows the views take from a
// payload the writer hands them (receivedRowOf, respondedRowOf) are the
// rows they would decode from its encoding, every field but the kinds of
// what stays in the log; and every field of each row is set by some sample,
// so a field added to a row and not to its ...Of fails here.
func TestRowsOfPayloadsAgreeWithDecoding(t *testing.T) {
	codec := domain.NewCodec()
	for _, lt := range leanTypes() {
		set := map[string]bool{}
		for _, sample := range lt.samples {
			data, err := codec.Encode("id", sample, time.Now(), domain.Trace{})
			if err != nil {
				t.Fatal(err)
			}
			decoded := reflect.ValueOf(mustDecode(t, lt, data.Data))
			var of any
			switch p := sample.(type) {
			case domain.DeliveryReceived:
				of = receivedRowOf(p)
			case domain.ForwardResponded:
				of = respondedRowOf(p)
			default:
				t.Fatalf("no row for %T", sample)
			}
			got := reflect.ValueOf(of)
			for i := range got.NumField() {
				name := got.Type().Field(i).Name
				if _, left := leftInLog[name]; left {
					continue
				}
				if !reflect.DeepEqual(withoutKinds(got.Field(i).Interface()), withoutKinds(decoded.Field(i).Interface())) {
					t.Errorf("%s %s: %#v from the payload, %#v decoded", lt.typ, name, got.Field(i).Interface(), decoded.Field(i).Interface())
				}
				if !got.Field(i).IsZero() {
					set[name] = true
				}
			}
		}
		row := reflect.TypeOf(mustDecode(t, lt, []byte(`{}`)))
		for i := range row.NumField() {
			name := row.Field(i).Name
			if _, left := leftInLog[name]; !left && !set[name] {
				t.Errorf("%s: no sample sets %s", lt.typ, name)
			}
		}
	}
}

// withoutKinds is v with the JSON kinds of the answer a receipt's forward
// records cleared: like the payload's own, they are left in the log.
func withoutKinds(v any) any {
	f, ok := v.(*forwardRow)
	if !ok || f == nil || f.Responded == nil {
		return v
	}
	c, r := *f, *f.Responded
	r.Headers, r.Body = 0, 0
	c.Responded = &r
	return &c
}
