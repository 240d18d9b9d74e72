package projections

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// searchedCases are DeliveryReceived payloads as the codec writes them:
// fastSearched must read each exactly as the codec decodes it.
func searchedCases(t testing.TB) [][]byte {
	codec := domain.NewCodec()
	var out [][]byte
	for _, ev := range []domain.DeliveryReceived{
		{DeliveryID: "d-1", Address: "a", AddressKind: domain.AddressInspector, Method: "POST", Target: "/x?a=1&b=<2>",
			Headers: []domain.Header{{Name: "X-Sig", Value: "a\"b"}, {Name: "Ünï", Value: "\u0001"}}, Body: []byte("hello \x00\xff"), BodySize: 9, Complete: true},
		{DeliveryID: "d-2", Address: "a", Method: "GET", Target: "/", DroppedHeaders: 3},
		{DeliveryID: "d-3", Address: "a", Method: "POST", Target: "/", Body: []byte{}, Headers: []domain.Header{},
			Answer: &domain.ReceiptAnswer{Status: 204}, Provider: &domain.Provider{Name: "github", EventType: "push"},
			Trailers: []domain.Header{{Name: "T", Value: "v"}}, RedactedQuery: []string{"token"}},
		// A proxied receipt that records its answer (record.ReceiptHold):
		// a search skips the answer, whatever its size.
		{DeliveryID: "d-4", Address: "ep", Method: "POST", Target: "/hook", Body: []byte(`{"a":1}`),
			Forward: &domain.ReceiptForward{AttemptID: "at-1", EndpointID: "ep", Responded: &domain.ForwardResponded{
				DeliveryID: "d-4", AttemptID: "at-1", Status: 200, Headers: []domain.Header{{Name: "X", Value: "\"}"}},
				Body: bytes.Repeat([]byte("answer "), 1000), BodySize: 7000, Captured: true}}},
	} {
		data, err := codec.Encode("id-"+ev.DeliveryID, ev, time.Unix(0, 0), domain.Trace{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data.Data)
	}
	return out
}

// checkSearched fails t when fastSearched reads payload differently from
// the codec (when both read it).
func checkSearched(t *testing.T, payload []byte) {
	t.Helper()
	fast, ok := fastSearched(payload, nil)
	if !ok {
		return
	}
	ev, err := domain.NewCodec().Decode(domain.TypeDeliveryReceived, payload)
	if err != nil {
		return // the codec refuses it: a reader of the delivery gets its error
	}
	d := ev.(domain.DeliveryReceived)
	slow := searchedRequest{DeliveryID: d.DeliveryID, Headers: d.Headers, Body: d.Body, DroppedHeaders: d.DroppedHeaders}
	if len(fast.Body) == 0 && len(slow.Body) == 0 {
		fast.Body, slow.Body = nil, nil
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Errorf("%s:\nfast %+v\ncodec %+v", payload, fast, slow)
	}
}

func TestFastSearchedReadsWhatTheCodecReads(t *testing.T) {
	for _, p := range searchedCases(t) {
		if _, ok := fastSearched(p, nil); !ok && len(p) > 0 {
			t.Logf("general path: %s", p)
		}
		checkSearched(t, p)
	}
	if _, ok := fastSearched(searchedCases(t)[1], nil); !ok {
		t.Error("the plain case took the general path")
	}
	// The general path would decode the recorded answer's body too.
	if _, ok := fastSearched(searchedCases(t)[3], nil); !ok {
		t.Error("a receipt recording its answer took the general path")
	}
}

func FuzzFastSearched(f *testing.F) {
	for _, p := range searchedCases(f) {
		f.Add(p)
	}
	for _, p := range []string{`{}`, `{"body":"aGk="}`, `{"body":"aG\nk="}`, `{"body":"a\"b"}`, `{"headers":null,"body":null}`,
		`{"x":{"y":[1,{"z":"}"}]},"body":"aGk="}`, `{"dropped_headers":-1}`, `{"delivery_id":"a\u0041"}`} {
		f.Add([]byte(p))
	}
	f.Fuzz(func(t *testing.T, payload []byte) { checkSearched(t, payload) })
}
