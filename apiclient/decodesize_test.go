package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/deliveryjson"
	"github.com/relayhq/relay/internal/gqlws"
)

// repeated is prefix, n copies of elem separated by commas, and suffix.
func repeated(prefix, elem string, n int, suffix string) []byte {
	var b bytes.Buffer
	b.Grow(len(prefix) + n*(len(elem)+1) + len(suffix))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteString(suffix)
	return b.Bytes()
}

// answeringWith is a relay that answers every operation with answer.
func answeringWith(t *testing.T, answer []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDoWeighsAnAnswerBeforeDecodingIt: an answer is weighed by the type
// it decodes into as it arrives, and refused once the part read weighs
// more than DecodeBudget of its length, the rest not read. Before,
// 1 048 560 empty attempts (a 3 MiB answer, within MaxAnswerObjects)
// decoded into 152-byte structs: about 900 MiB allocated and 443 MiB
// held; a list of empty errors of the same size into 24-byte ones; read
// whole, then weighed, they were refused having allocated 7.1 MiB; now
// within the first 300 KiB, 0.3 to 0.6 MiB. The relay's largest answers
// still decode.
func TestDoWeighsAnAnswerBeforeDecodingIt(t *testing.T) {
	type delivery struct{ Attempts []deliveryjson.Attempt }
	for _, tt := range []struct {
		name   string
		answer []byte
	}{
		{"empty attempts", repeated(`{"data":{"delivery":{"attempts":[`, "{}", 1_048_560, `]}}}`)},
		{"empty errors", repeated(`{"errors":[`, "{}", 1_048_560, `],"data":null}`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := answeringWith(t, tt.answer)
			var res struct{ Delivery delivery }
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := New(url, "t").Do(context.Background(), "{ delivery }", nil, &res)
			runtime.ReadMemStats(&after)
			allocated := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / (1 << 20)
			runtime.KeepAlive(&res)
			t.Logf("a %.1f MiB answer: %v; allocated %.1f MiB, held %.1f MiB", float64(len(tt.answer))/(1<<20), err, allocated, held)
			var tooLarge *DecodeTooLargeError
			if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "decode answer: ") || tooLarge.Bytes > len(tt.answer) {
				t.Errorf("Do = %v, want the answer refused as too large decoded", err)
			}
			if allocated > 2 || held > 1 {
				t.Errorf("refusing the answer allocated %.1f MiB and held %.1f, want at most 2 and 1", allocated, held)
			}
		})
	}

	// An answer within the budget decodes through Do.
	url := answeringWith(t, repeated(`{"data":{"delivery":{"attempts":[`, `{"id":"a","status":200}`, 1000, `]}}}`))
	var res struct{ Delivery delivery }
	if err := New(url, "t").Do(context.Background(), "{ delivery }", nil, &res); err != nil || len(res.Delivery.Attempts) != 1000 || *res.Delivery.Attempts[999].Status != 200 {
		t.Errorf("an answer of 1000 attempts: %d decoded, %v", len(res.Delivery.Attempts), err)
	}
}

// TestLargestAnswersFitTheBudget: what a relay answers at its bounds is
// within DecodeBudget, weighed as it arrives, and within MaxAnswerObjects
// and MaxAnswerValues: a delivery whose request and response hold the most
// header fields (agentwire.MaxAnswerHeaders, 349 525, a 1 MiB head of
// "a:" lines; ingress admits fewer) with 400 attempts
// (domain.MaxDeliveryAttempts), and a page of 100 deliveries
// (graph.MaxPageSize) of 200 headers, a request and an answer body of
// 192 KiB and 400 attempts each, 55 MiB of the 64 MiB Do reads.
func TestLargestAnswersFitTheBudget(t *testing.T) {
	const attempt = `{"id":"att-0123456789abcdef","status":200,"startedAt":"2026-12-03T16:00:00.000Z","durationMs":12,"error":null,"retry":false,"late":false}`
	const header = `{"name":"a","value":"","valueBase64":null}`
	body := strings.Repeat("QUJD", 192<<10/3)
	row := `{"id":"d","headers":` + string(repeated(`[`, header, 200, `]`)) + `,"bodyBase64":"` + body + `","responseBodyBase64":"` + body + `","attempts":` + string(repeated(`[`, attempt, 400, `]`)) + `}`
	for _, tt := range []struct {
		name string
		text []run
		out  any
	}{
		{"a delivery at the bounds", []run{
			{`{"delivery":{"id":"d","headers":[`, 1}, {header, 349_525}, {`],"responseHeaders":[`, 1}, {header, 349_525},
			{`],"attempts":[`, 1}, {attempt, 400}, {`]}}`, 1},
		}, &struct{ Delivery deliveryjson.Export }{}},
		{"a page of 100", []run{{`{"deliveries":{"nodes":[`, 1}, {row, 100}, {`]}}`, 1}}, &struct {
			Deliveries struct{ Nodes []deliveryjson.Export }
		}{}},
	} {
		// Weighed as Do weighs an answer, in parts, counted too.
		s := sizer{next: generated(tt.text), maxObjects: MaxAnswerObjects, maxValues: MaxAnswerValues}
		s.value(reflect.TypeOf(tt.out), 0)
		t.Logf("%s: %.1f MiB of text weighs %.1f MiB, budget %.1f MiB; %d objects, %d values", tt.name, float64(s.pos())/(1<<20), float64(s.cost)/(1<<20), float64(DecodeBudget(s.pos()))/(1<<20), s.objects, s.values)
		if err := s.err(); err != nil || s.bad || s.avail() {
			t.Errorf("%s: %v (not JSON: %v)", tt.name, err, s.bad)
		}
	}
}

// run is n copies of elem, separated by commas.
type run struct {
	elem string
	n    int
}

// generated gives the text of runs in parts of about 64 KiB, one buffer
// reused, so that a test weighs a large text without building it.
func generated(runs []run) func() []byte {
	runs = slices.Clone(runs)
	var buf []byte
	return func() []byte {
		buf = buf[:0]
		for len(runs) > 0 && len(buf) < 64<<10 {
			r := &runs[0]
			buf = append(buf, r.elem...)
			if r.n--; r.n > 0 {
				buf = append(buf, ',')
			} else {
				runs = runs[1:]
			}
		}
		if len(buf) == 0 {
			return nil
		}
		return buf
	}
}

// TestCheckDecodeWeighsAsDecoded: the weight follows encoding/json's
// matching (any case, escaped keys, embedded structs) and counts maps,
// any and pointers, so no spelling of a key escapes it.
func TestCheckDecodeWeighsAsDecoded(t *testing.T) {
	type Inner struct{ List []deliveryjson.Attempt }
	type embedding struct {
		*Inner
		Other string `json:"other"`
	}
	const n = 100_000 // 15 MiB of attempts, 0.3 MiB of text
	for _, tt := range []struct {
		name string
		data []byte
		out  any
	}{
		{"upper case", repeated(`{"LIST":[`, "{}", n, `]}`), &Inner{}},
		{"escaped key", repeated(`{"\u004cist":[`, "{}", n, `]}`), &Inner{}},
		{"embedded behind a pointer", repeated(`{"list":[`, "{}", n, `]}`), &embedding{}},
		{"map of pointers", repeated(`{"m":{`, `"":{}`, n, `}}`), &map[string]map[string]*deliveryjson.Attempt{}},
		{"any", repeated(`[`, `[]`, 1<<18, `]`), new(any)},                     // 10 MiB
		{"raw messages", repeated(`[`, `1`, 1<<19, `]`), &[]json.RawMessage{}}, // 12.5 MiB
	} {
		err := CheckDecode(tt.data, tt.out)
		var tooLarge *DecodeTooLargeError
		if !errors.As(err, &tooLarge) {
			t.Errorf("%s: CheckDecode = %v, want too large", tt.name, err)
		}
	}
	// Unknown fields, nulls and what does not decode weigh nothing (1<<17
	// attempts would be 19 MiB).
	for _, data := range []string{
		string(repeated(`{"unknown":[`, "{}", 1<<17, `]}`)),
		`{"list":null}`,
		string(repeated(`{"other":[`, "{}", 1<<17, `]}`)),
		`{"list":[{}`,
		`{"list":[{]}`,
	} {
		if err := CheckDecode([]byte(data), &embedding{}); err != nil {
			t.Errorf("CheckDecode(%.20s…) = %v", data, err)
		}
	}
}

// TestSubscribeWeighsAMessage: a subscription's message is weighed as Do
// weighs an answer, its errors included.
func TestSubscribeWeighsAMessage(t *testing.T) {
	// 1<<17 empty errors, 256 KiB, are 11 MiB of wireError, past their
	// budget of 8.3 MiB.
	for _, payload := range [][]byte{
		repeated(`{"errors":[`, "{}", 1<<17, `]}`),
	} {
		up := websocket.Upgrader{Subprotocols: []string{gqlws.Subprotocol}}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			msg := append(append([]byte(`{"type":"next","id":"1","payload":`), payload...), '}')
			_ = c.WriteMessage(websocket.TextMessage, msg)
			// Read until the client leaves: closing with its messages
			// unread would reset the connection under it.
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := New(srv.URL, "t").Subscribe(ctx, "subscription{ x }", nil, func(json.RawMessage) error { return nil })
		cancel()
		srv.Close()
		var tooLarge *DecodeTooLargeError
		if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "decode subscription result") {
			t.Errorf("Subscribe = %v, want the message refused as too large decoded", err)
		}
	}
}

// TestErrorDecodesFewExtensions: of an error's extensions, err decodes
// the code and at most maxExtensions others, each of at most maxExtension
// bytes, and copies no more of them. Before, every one of 20 000
// extensions of 1 KiB (a 20 MiB answer, within its budget as raw text) was
// decoded into a tree of any, twelve times its text, 453.3 MiB; here 256
// of them.
func TestErrorDecodesFewExtensions(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"errors":[{"message":"x","extensions":{`)
	value := "[" + strings.Repeat("0,", 510) + "0]"
	for i := range 256 {
		b.WriteString(`"a` + strconv.Itoa(i) + `":` + value + `,`)
	}
	b.WriteString(`"code":"NOT_FOUND"}}],"data":null}`)
	url := answeringWith(t, b.Bytes())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := New(url, "t").Do(context.Background(), "{ x }", nil, nil)
	runtime.ReadMemStats(&after)
	allocated := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
	t.Logf("a %.2f MiB answer of 256 extensions: %v; allocated %.2f MiB", float64(b.Len())/(1<<20), err, allocated)
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != "NOT_FOUND" || len(ae.Extensions) != maxExtensions {
		t.Fatalf("Do = %v, want NOT_FOUND with %d extensions", err, maxExtensions)
	}
	if most := 4 * float64(b.Len()) / (1 << 20); allocated > most {
		t.Errorf("an error's extensions allocated %.2f MiB, want at most %.2f", allocated, most)
	}
}

// lowerCounts sets the counts Do bounds an answer by to objects and
// values for the test.
func lowerCounts(t *testing.T, objects, values int) {
	o, v := answerObjects, answerValues
	answerObjects, answerValues = objects, values
	t.Cleanup(func() { answerObjects, answerValues = o, v })
}

// TestAnswersAreCountedAsTheyArrive: an answer holding more JSON objects
// than MaxAnswerObjects, or values than MaxAnswerValues (lowered here to
// 1<<14 and 1<<16), is refused once the part read passes the count,
// naming it, though they weigh nothing decoded (an unknown field's). The
// relay's largest answers are within the counts
// (TestLargestAnswersFitTheBudget).
func TestAnswersAreCountedAsTheyArrive(t *testing.T) {
	lowerCounts(t, 1<<14, 1<<16)
	for _, tt := range []struct {
		what   string
		answer []byte
	}{
		{"objects", repeated(`{"data":{"unknown":[`, "{}", 1<<14+1, `]}}`)},
		{"values", repeated(`{"data":{"unknown":[`, "0", 1<<16, `]}}`)},
	} {
		url := answeringWith(t, tt.answer)
		var res struct{ Delivery struct{ ID string } }
		err := New(url, "t").Do(context.Background(), "{ delivery }", nil, &res)
		var tooMany *AnswerTooLargeError
		if !errors.As(err, &tooMany) || tooMany.What != tt.what || !strings.Contains(err.Error(), "over") {
			t.Errorf("Do = %v, want the answer refused for its %s", err, tt.what)
		}
	}
	// Just within them, an answer decodes.
	url := answeringWith(t, repeated(`{"data":{"unknown":[`, "0", 1<<16-3, `]}}`))
	if err := New(url, "t").Do(context.Background(), "{ delivery }", nil, nil); err != nil {
		t.Errorf("an answer within the counts: %v", err)
	}
}
