package cmdutil

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/deliveryjson"
)

// answering is a relay that answers every operation with answer.
func answering(t *testing.T, answer []byte) *Connection {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return &Connection{Server: srv.URL}
}

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

// TestAnswersAreCountedBeforeTheyAreDecoded: an answer of a relay holding
// more JSON objects than MaxAnswerObjects, or values than MaxAnswerValues,
// is refused as it arrives, never decoded, naming the bound. Before, a
// command decoded whatever the 64 MiB apiclient reads held: here 6 MiB of
// empty attempts, 2 M structs of 152 bytes, and 13.5 MiB of empty strings
// into a list of them. A relay's largest answers (a delivery with the most
// header fields its request and response hold) still decode.
func TestAnswersAreCountedBeforeTheyAreDecoded(t *testing.T) {
	type delivery struct {
		Attempts []deliveryjson.Attempt
		Headers  []deliveryjson.Header
	}
	for _, tt := range []struct {
		name   string
		answer []byte
		what   string
	}{
		{"empty attempts", repeated(`{"data":{"delivery":{"attempts":[`, "{}", 2<<20, `]}}}`), "objects"},
		{"empty strings", repeated(`{"data":{"delivery":{"attempts":[{"fidelity":{"differences":[`, `""`, 9<<19, `]}}]}}}`), "values"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn := answering(t, tt.answer)
			var res struct{ Delivery delivery }
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := conn.Client("t").Do(context.Background(), "{ delivery }", nil, &res)
			runtime.ReadMemStats(&after)
			grew := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
			t.Logf("a %.1f MiB answer: %v; allocated %.1f MiB", float64(len(tt.answer))/(1<<20), err, grew)
			if err == nil || !strings.Contains(err.Error(), "over") || !strings.Contains(err.Error(), "JSON "+tt.what) {
				t.Errorf("Do = %v, want the answer refused for its %s", err, tt.what)
			}
			if grew > 48 {
				t.Errorf("refusing the answer allocated %.1f MiB, want at most 48", grew)
			}
		})
	}

	// The most header fields a relay records, a request's and a
	// response's, each an object of three values, are within the bounds;
	// an answer within them decodes.
	const fields = 2 * 350_890
	if err := countAll(repeated(`{"data":{"delivery":{"attempts":[{"id":"a"}],"headers":[`, `{"name":"a","value":"","valueBase64":null}`, fields, `]}}}`)); err != nil {
		t.Errorf("an answer of %d header fields: %v", fields, err)
	}
	conn := answering(t, repeated(`{"data":{"delivery":{"attempts":[{"id":"a"}],"headers":[`, `{"name":"a","value":"","valueBase64":null}`, 1000, `]}}}`))
	var res struct{ Delivery delivery }
	if err := conn.Client("t").Do(context.Background(), "{ delivery }", nil, &res); err != nil || len(res.Delivery.Headers) != 1000 || res.Delivery.Attempts[0].ID != "a" {
		t.Errorf("an answer of 1000 header fields: %d decoded, %v", len(res.Delivery.Headers), err)
	}

	// Over https with --ca-file (a transport of its own), the same.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(repeated(`{"data":{"delivery":{"attempts":[`, "{}", MaxAnswerObjects+1, `]}}}`))
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	tconn := &Connection{Server: srv.URL, TLS: &tls.Config{RootCAs: pool}}
	if err := tconn.Client("t").Do(context.Background(), "{ delivery }", nil, &res); err == nil || !strings.Contains(err.Error(), "JSON objects") {
		t.Errorf("over https: Do = %v, want the answer refused for its objects", err)
	}

	// The counter on a whole text.
	var tooLarge *AnswerTooLargeError
	if err := countAll(repeated(`{"deliveries":[`, "{}", MaxAnswerObjects+1, "]}")); !errors.As(err, &tooLarge) || tooLarge.What != "objects" {
		t.Errorf("CheckMessage of %d objects = %v", MaxAnswerObjects+2, err)
	}
	if err := countAll(repeated(`{"deliveries":[`, `"x"`, MaxAnswerValues, "]}")); !errors.As(err, &tooLarge) || tooLarge.What != "values" {
		t.Errorf("CheckMessage of %d values = %v", MaxAnswerValues+2, err)
	}
	if err := countAll([]byte(`{"a":"b\"c","d":[1,true,null,{"e":"\\"}]}`)); err != nil {
		t.Errorf("CheckMessage of a small message = %v", err)
	}
}

// TestAnswersUnderTheCountsAreWeighed: an answer within the counts above
// is still weighed by what it decodes into (apiclient.CheckDecode): 1 048 560
// empty attempts, 3 MiB, decoded into 152-byte structs, 904.7 MiB
// allocated and 178.9 MiB held, and are now refused.
func TestAnswersUnderTheCountsAreWeighed(t *testing.T) {
	conn := answering(t, repeated(`{"data":{"delivery":{"attempts":[`, "{}", MaxAnswerObjects-16, `]}}}`))
	var res struct {
		Delivery struct{ Attempts []deliveryjson.Attempt }
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := conn.Client("t").Do(context.Background(), "{ delivery }", nil, &res)
	runtime.ReadMemStats(&after)
	grew := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
	t.Logf("%v; allocated %.1f MiB", err, grew)
	var tooLarge *apiclient.DecodeTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Errorf("Do = %v, want the answer refused for what it decodes into", err)
	}
	if grew > 32 {
		t.Errorf("refusing the answer allocated %.1f MiB, want at most 32", grew)
	}
}

// countAll counts a whole text as countedBody counts an answer arriving.
func countAll(data []byte) error {
	var c jsonCounter
	if err := c.feed(data); err != nil {
		return err
	}
	return c.end()
}
