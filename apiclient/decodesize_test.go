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
// it decodes into before it is decoded, and refused past DecodeBudget of
// its length. Before, 1 048 560 empty attempts (a 3 MiB answer, within the
// objects and values cli/cmdutil counts) decoded into 152-byte structs:
// about 900 MiB allocated and 443 MiB held; a list of empty errors of the
// same size into 24-byte ones. The relay's largest answers still decode.
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
			if allocated > 32 || held > 8 {
				t.Errorf("refusing the answer allocated %.1f MiB and held %.1f, want at most 32 and 8", allocated, held)
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
// within DecodeBudget: a delivery whose request and response hold the most
// header fields (agentwire.MaxAnswerHeaders, 349 525, a 1 MiB head of
// "a:" lines; ingress admits fewer) with 400 attempts
// (domain.MaxDeliveryAttempts), and a page of 100 deliveries
// (graph.MaxPageSize) of 200 headers, a request and an answer body of
// 192 KiB and 400 attempts each, 55 MiB of the 64 MiB Do reads.
func TestLargestAnswersFitTheBudget(t *testing.T) {
	const attempt = `{"id":"att-0123456789abcdef","status":200,"startedAt":"2026-12-03T16:00:00.000Z","durationMs":12,"error":null,"retry":false,"late":false}`
	header := `{"name":"a","value":"","valueBase64":null}`
	headers := func(n int) string { return string(repeated(`[`, header, n, `]`)) }
	attempts := string(repeated(`[`, attempt, 400, `]`))
	full := `{"id":"d","headers":` + headers(349_525) + `,"responseHeaders":` + headers(349_525) + `,"attempts":` + attempts + `}`
	body := strings.Repeat("QUJD", 192<<10/3)
	row := `{"id":"d","headers":` + headers(200) + `,"bodyBase64":"` + body + `","responseBodyBase64":"` + body + `","attempts":` + attempts + `}`
	for _, tt := range []struct {
		name string
		data []byte
		out  any
	}{
		{"a delivery at the bounds", []byte(`{"delivery":` + full + `}`), &struct{ Delivery deliveryjson.Export }{}},
		{"a page of 100", repeated(`{"deliveries":{"nodes":[`, row, 100, `]}}`), &struct {
			Deliveries struct{ Nodes []deliveryjson.Export }
		}{}},
	} {
		s := sizer{data: tt.data, budget: 1 << 62}
		s.value(reflect.TypeOf(tt.out), 0)
		t.Logf("%s: %.1f MiB of text weighs %.1f MiB, budget %.1f MiB", tt.name, float64(len(tt.data))/(1<<20), float64(s.cost)/(1<<20), float64(DecodeBudget(len(tt.data)))/(1<<20))
		if err := CheckDecode(tt.data, tt.out); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
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
		{"any", repeated(`[`, `[]`, 1<<20, `]`), new(any)},
		{"raw messages", repeated(`[`, `1`, 1<<20, `]`), &[]json.RawMessage{}},
	} {
		err := CheckDecode(tt.data, tt.out)
		var tooLarge *DecodeTooLargeError
		if !errors.As(err, &tooLarge) {
			t.Errorf("%s: CheckDecode = %v, want too large", tt.name, err)
		}
	}
	// Unknown fields, nulls and what does not decode weigh nothing.
	for _, data := range []string{
		string(repeated(`{"unknown":[`, "{}", 1<<20, `]}`)),
		`{"list":null}`,
		string(repeated(`{"other":[`, "{}", 1<<20, `]}`)),
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
	for _, payload := range [][]byte{
		repeated(`{"errors":[`, "{}", 1<<20, `]}`),
		repeated(`{"errors":[{"extensions":{`, `"a":[]`, 1<<20, `}}]}`),
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
// bytes. Before, every one of 20 000 extensions of 1 KiB (a 20 MiB answer,
// within its budget as raw text) was decoded into a tree of any, twelve
// times its text.
func TestErrorDecodesFewExtensions(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"errors":[{"message":"x","extensions":{`)
	value := "[" + strings.Repeat("0,", 510) + "0]"
	for i := range 20_000 {
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
	t.Logf("a %.1f MiB answer of 20 000 extensions: %v; allocated %.1f MiB", float64(b.Len())/(1<<20), err, allocated)
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != "NOT_FOUND" || len(ae.Extensions) != maxExtensions {
		t.Errorf("Do = %v (%d extensions), want NOT_FOUND with %d extensions", err, len(ae.Extensions), maxExtensions)
	}
	if allocated > 96 {
		t.Errorf("an error's extensions allocated %.1f MiB, want at most 96", allocated)
	}
}
